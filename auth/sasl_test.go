package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	fscram "github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"
)

var quietLog = slog.New(slog.DiscardHandler)

// writeUsers saves a users file with the given name/password pairs at the
// minimum iteration count (fast) and returns its path.
func writeUsers(t *testing.T, dir string, pairs ...string) string {
	t.Helper()
	u := NewUsers()
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := u.Set(pairs[i], pairs[i+1], MinIterations); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "users.yaml")
	if err := u.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func newTestServer(t *testing.T, mechs ...string) (*Server, string) {
	t.Helper()
	dir := t.TempDir()
	path := writeUsers(t, dir, "alice", "alice-secret", "bob,=x", "bob-secret")
	s, err := NewServer(&configs.ListenerSASL{Mechanisms: mechs, UsersFile: path}, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, path
}

// drive runs a franz-go client mechanism against an Exchange, as the
// session would relay SaslAuthenticate tokens, and checks that client and
// server agree on when the exchange is done.
func drive(t *testing.T, s *Server, m sasl.Mechanism) (*Exchange, error) {
	t.Helper()
	x, err := s.Start(m.Name())
	if err != nil {
		return nil, err
	}
	sess, tok, err := m.Authenticate(context.Background(), "broker")
	if err != nil {
		t.Fatalf("client start: %v", err)
	}
	for i := 0; i < 5; i++ {
		reply, done, err := x.Step(tok)
		if err != nil {
			return x, err
		}
		cdone, next, cerr := sess.Challenge(reply)
		if cerr != nil {
			t.Fatalf("client rejected server reply %q: %v", reply, cerr)
		}
		if done != cdone {
			t.Fatalf("server done=%v but client done=%v", done, cdone)
		}
		if done {
			return x, nil
		}
		tok = next
	}
	t.Fatal("exchange did not finish")
	return nil, nil
}

func TestExchangesWithFranzGoClients(t *testing.T) {
	s, _ := newTestServer(t, configs.MechScramSHA512, configs.MechScramSHA256, configs.MechPlain)
	scramAuth := func(user, pass string) fscram.Auth { return fscram.Auth{User: user, Pass: pass} }
	mechs := map[string]func(user, pass string) sasl.Mechanism{
		"SCRAM-SHA-256": func(u, p string) sasl.Mechanism { return scramAuth(u, p).AsSha256Mechanism() },
		"SCRAM-SHA-512": func(u, p string) sasl.Mechanism { return scramAuth(u, p).AsSha512Mechanism() },
		"PLAIN":         func(u, p string) sasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() },
	}
	for name, mk := range mechs {
		t.Run(name, func(t *testing.T) {
			x, err := drive(t, s, mk("alice", "alice-secret"))
			if err != nil {
				t.Fatalf("right password: %v", err)
			}
			if x.Principal() != "alice" || x.Mechanism() != name || x.SessionLifetime() != 0 {
				t.Errorf("principal %q mechanism %q lifetime %v", x.Principal(), x.Mechanism(), x.SessionLifetime())
			}
			if _, _, err := x.Step([]byte("again")); !errors.Is(err, ErrExchangeDone) {
				t.Errorf("Step after done: %v, want ErrExchangeDone", err)
			}
			// A name with ',' and '=' travels escaped in SCRAM (=2C, =3D).
			if x, err := drive(t, s, mk("bob,=x", "bob-secret")); err != nil || x.Principal() != "bob,=x" {
				t.Errorf("escaped name: principal %q, %v", x.Principal(), err)
			}

			_, wrong := drive(t, s, mk("alice", "wrong"))
			_, unknown := drive(t, s, mk("mallory", "alice-secret"))
			for _, err := range []error{wrong, unknown} {
				if !errors.Is(err, ErrAuthFailed) {
					t.Fatalf("got %v, want ErrAuthFailed", err)
				}
			}
			// Kafka does not tell a client whether the user exists.
			if wrong.Error() != unknown.Error() {
				t.Errorf("wrong password %q and unknown user %q answered differently", wrong, unknown)
			}
			if !strings.Contains(wrong.Error(), "invalid credentials with SASL mechanism "+name) {
				t.Errorf("message %q", wrong)
			}
			if FailureReason(unknown) != `unknown user "mallory"` || FailureReason(wrong) != `wrong password for "alice"` {
				t.Errorf("reasons %q / %q", FailureReason(unknown), FailureReason(wrong))
			}
			for _, err := range []error{wrong, unknown} {
				if strings.Contains(err.Error(), "secret") || strings.Contains(FailureReason(err), "secret") {
					t.Errorf("a password leaked into %q", err)
				}
			}
		})
	}
}

// The unknown user gets a server-first message just like a real user's,
// with a salt that is stable for the name, so SCRAM's first step reveals
// nothing either.
func TestScramUnknownUserLooksReal(t *testing.T) {
	s, _ := newTestServer(t, configs.MechScramSHA256)
	first := func(user string) string {
		x, err := s.Start(configs.MechScramSHA256)
		if err != nil {
			t.Fatal(err)
		}
		reply, done, err := x.Step([]byte("n,,n=" + user + ",r=abc"))
		if err != nil || done {
			t.Fatalf("step 1 for %s: %v %v", user, done, err)
		}
		parts := strings.Split(string(reply), ",")
		if len(parts) != 3 || !strings.HasPrefix(parts[0], "r=abc") || !strings.HasPrefix(parts[1], "s=") || parts[2] != fmt.Sprintf("i=%d", MinIterations) && parts[2] != fmt.Sprintf("i=%d", DefaultIterations) {
			t.Fatalf("server-first %q", reply)
		}
		return parts[1]
	}
	if a, b := first("mallory"), first("mallory"); a != b {
		t.Errorf("fake salt changes between attempts: %s vs %s", a, b)
	}
	if first("mallory") == first("alice") {
		t.Error("fake salt equals a real one")
	}
}

func TestXdgClient(t *testing.T) {
	s, _ := newTestServer(t, configs.MechScramSHA512)
	for _, pass := range []string{"alice-secret", "nope"} {
		c, err := xscram.SHA512.NewClientUnprepped("alice", pass, "")
		if err != nil {
			t.Fatal(err)
		}
		conv := c.NewConversation()
		x, _ := s.Start(configs.MechScramSHA512)
		c1, _ := conv.Step("")
		s1, _, err := x.Step([]byte(c1))
		if err != nil {
			t.Fatal(err)
		}
		c2, err := conv.Step(string(s1))
		if err != nil {
			t.Fatal(err)
		}
		s2, done, err := x.Step([]byte(c2))
		if pass == "nope" {
			if err == nil || done {
				t.Fatal("wrong password accepted")
			}
			continue
		}
		if err != nil || !done {
			t.Fatalf("final: %v %v", done, err)
		}
		if _, err := conv.Step(string(s2)); err != nil || !conv.Valid() {
			t.Fatalf("client does not accept the server signature: %v", err)
		}
	}
}

func TestUnsupportedMechanism(t *testing.T) {
	s, _ := newTestServer(t, configs.MechScramSHA512)
	if _, err := s.Start("SCRAM-SHA-256"); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Errorf("Start(SCRAM-SHA-256) = %v, want ErrUnsupportedMechanism", err)
	}
	if _, err := s.Start("GSSAPI"); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Errorf("Start(GSSAPI) = %v", err)
	}
	if got := s.Mechanisms(); len(got) != 1 || got[0] != "SCRAM-SHA-512" {
		t.Errorf("Mechanisms = %v", got)
	}
}

// scramFirstStep runs a valid client-first for alice and returns the
// exchange and the combined nonce.
func scramFirstStep(t *testing.T, s *Server, mech string) (*Exchange, string) {
	t.Helper()
	x, err := s.Start(mech)
	if err != nil {
		t.Fatal(err)
	}
	reply, _, err := x.Step([]byte("n,,n=alice,r=clientnonce"))
	if err != nil {
		t.Fatal(err)
	}
	r, _, _ := strings.Cut(string(reply), ",")
	return x, strings.TrimPrefix(r, "r=")
}

func TestScramMalformed(t *testing.T) {
	s, _ := newTestServer(t, configs.MechScramSHA256)
	proof := base64.StdEncoding.EncodeToString(make([]byte, 32))
	cbind := base64.StdEncoding.EncodeToString([]byte("n,,"))
	firsts := map[string]string{
		"empty":            "",
		"empty gs2 flag":   ",,n=alice,r=x",
		"channel binding":  "p=tls-unique,,n=alice,r=x",
		"y flag":           "y,,n=alice,r=x",
		"no user":          "n,,r=x",
		"empty user":       "n,,n=,r=x",
		"bad escape":       "n,,n=al=ice,r=x",
		"no nonce":         "n,,n=alice",
		"comma-less nonce": "n,,n=alice,r=",
		"mandatory ext":    "n,,m=x,n=alice,r=x",
		"tokenauth":        "n,,n=alice,r=x,tokenauth=true",
		"other authzid":    "n,a=bob,n=alice,r=x",
		"not utf8":         "n,,n=\xff,r=x",
		"junk":             "hello",
	}
	for name, msg := range firsts {
		x, _ := s.Start(configs.MechScramSHA256)
		if _, _, err := x.Step([]byte(msg)); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("client-first %s (%q): %v, want ErrAuthFailed", name, msg, err)
		}
	}
	finals := map[string]func(nonce string) string{
		"empty":       func(string) string { return "" },
		"no proof":    func(n string) string { return "c=" + cbind + ",r=" + n },
		"short proof": func(n string) string { return "c=" + cbind + ",r=" + n + ",p=AAAA" },
		"long proof": func(n string) string {
			return "c=" + cbind + ",r=" + n + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 64))
		},
		"proof not b64": func(n string) string { return "c=" + cbind + ",r=" + n + ",p=!!!" },
		"cbind not b64": func(n string) string { return "c=!!,r=" + n + ",p=" + proof },
		"cbind mismatch": func(n string) string {
			return "c=" + base64.StdEncoding.EncodeToString([]byte("y,,")) + ",r=" + n + ",p=" + proof
		},
		"nonce mismatch":  func(n string) string { return "c=" + cbind + ",r=" + n + "x,p=" + proof },
		"client nonce":    func(string) string { return "c=" + cbind + ",r=clientnonce,p=" + proof },
		"wrong proof":     func(n string) string { return "c=" + cbind + ",r=" + n + ",p=" + proof },
		"fields reversed": func(n string) string { return "r=" + n + ",c=" + cbind + ",p=" + proof },
	}
	for name, mk := range finals {
		x, nonce := scramFirstStep(t, s, configs.MechScramSHA256)
		_, done, err := x.Step([]byte(mk(nonce)))
		if done || !errors.Is(err, ErrAuthFailed) {
			t.Errorf("client-final %s: done=%v %v, want ErrAuthFailed", name, done, err)
		}
		if name == "nonce mismatch" && !strings.Contains(err.Error(), "nonce") {
			t.Errorf("nonce mismatch message %q", err)
		}
	}
}

func TestPlainMalformed(t *testing.T) {
	s, _ := newTestServer(t, configs.MechPlain)
	for msg, want := range map[string]string{
		"alice\x00alice-secret":             "expected 3 tokens, got 2",
		"\x00alice\x00alice-secret\x00":     "expected 3 tokens, got 4",
		"\x00\x00alice-secret":              "username not specified",
		"\x00alice\x00":                     "password not specified",
		"bob\x00alice\x00alice-secret":      "authorization id that is different",
		"alice\x00alice\x00alice-secret":    "", // authzid = user is fine
		"\x00alice\x00alice-secret":         "",
		"\x00alice\x00alice-secret-but-not": "invalid credentials",
	} {
		x, _ := s.Start(configs.MechPlain)
		reply, done, err := x.Step([]byte(msg))
		if want == "" {
			if err != nil || !done || len(reply) != 0 || x.Principal() != "alice" {
				t.Errorf("%q: done=%v reply=%q principal=%q err=%v", msg, done, reply, x.Principal(), err)
			}
			continue
		}
		if !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", msg, err, want)
		}
	}
}

func TestTokenTooLarge(t *testing.T) {
	s, _ := newTestServer(t, configs.MechPlain)
	x, _ := s.Start(configs.MechPlain)
	if _, _, err := x.Step(make([]byte, maxTokenBytes+1)); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("huge token: %v", err)
	}
}

func TestUsersReloadLive(t *testing.T) {
	s, path := newTestServer(t, configs.MechScramSHA512)
	u, err := LoadUsers(path)
	if err != nil {
		t.Fatal(err)
	}
	u.Remove("alice")
	if err := u.Set("carol", "carol-secret", MinIterations); err != nil {
		t.Fatal(err)
	}
	if err := u.Save(path); err != nil {
		t.Fatal(err)
	}
	carol := fscram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism()
	alice := fscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()
	waitFor(t, 5*time.Second, func() bool { _, err := drive(t, s, carol); return err == nil })
	if _, err := drive(t, s, alice); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("removed user still authenticates: %v", err)
	}
	// A broken file keeps the last good users in service.
	if err := os.WriteFile(path, []byte("users: [nonsense"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(checkInterval + 100*time.Millisecond) // let a check happen
	if _, err := drive(t, s, carol); err != nil {
		t.Errorf("a broken users file dropped the previous users: %v", err)
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestNewServerErrors(t *testing.T) {
	dir := t.TempDir()
	for name, cfg := range map[string]*configs.ListenerSASL{
		"no mechanisms":   {},
		"unknown":         {Mechanisms: []string{"GSSAPI"}},
		"no users file":   {Mechanisms: []string{"PLAIN"}},
		"missing file":    {Mechanisms: []string{"PLAIN"}, UsersFile: filepath.Join(dir, "none.yaml")},
		"no oauth config": {Mechanisms: []string{"OAUTHBEARER"}},
		"twice":           {Mechanisms: []string{"PLAIN", "PLAIN"}, UsersFile: writeUsers(t, dir, "a", "b")},
	} {
		if s, err := NewServer(cfg, nil); err == nil {
			s.Close()
			t.Errorf("%s: NewServer succeeded", name)
		}
	}
}
