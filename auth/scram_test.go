package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"hash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
	xscram "github.com/xdg-go/scram"
)

// librdkafkaNonce is the client nonce of a captured kcat (librdkafka
// 2.0.2) exchange; its client-final message carried
// r=<this><server-first nonce>, and the server-first nonce starts with it.
const librdkafkaNonce = "tgIBdY|TM[3^Jx6swl9^0j?mClWfHdET"

// lockedBuffer collects log output written from any goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newCompatServer is a SCRAM server for alice with a max_reauth (so the
// session lifetime can be compared between paths) that logs at debug level
// into the returned buffer.
func newCompatServer(t *testing.T) (*Server, *lockedBuffer) {
	t.Helper()
	path := writeUsers(t, t.TempDir(), "alice", "alice-secret")
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := NewServer(&configs.ListenerSASL{
		Mechanisms: []string{configs.MechScramSHA256, configs.MechScramSHA512},
		UsersFile:  path,
		MaxReauth:  configs.Duration(time.Hour),
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, logs
}

// handFinal builds a client-final message the way RFC 5802 section 3 (and
// librdkafka) does, with whatever nonce it is given, and returns it with
// the server-final message the client will expect. The proof and the
// expected server signature are both computed over the AuthMessage built
// from the messages as sent, nonce included.
func handFinal(t *testing.T, h func() hash.Hash, pass, clientFirstBare, serverFirst, nonce string) (final, serverFinal string) {
	t.Helper()
	var salt []byte
	var iters int
	for _, field := range strings.Split(serverFirst, ",") {
		k, v, _ := strings.Cut(field, "=")
		switch k {
		case "s":
			var err error
			if salt, err = base64.StdEncoding.DecodeString(v); err != nil {
				t.Fatalf("server-first salt: %v", err)
			}
		case "i":
			var err error
			if iters, err = strconv.Atoi(v); err != nil {
				t.Fatalf("server-first iterations: %v", err)
			}
		}
	}
	if salt == nil || iters == 0 {
		t.Fatalf("server-first %q lacks salt or iterations", serverFirst)
	}
	salted, err := pbkdf2.Key(h, pass, salt, iters, h().Size())
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	hh := h()
	hh.Write(clientKey)
	storedKey := hh.Sum(nil)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte("n,,")) + ",r=" + nonce
	authMsg := clientFirstBare + "," + serverFirst + "," + withoutProof
	sig := mac(storedKey, authMsg)
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	serverSig := mac(mac(salted, "Server Key"), authMsg)
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), "v=" + base64.StdEncoding.EncodeToString(serverSig)
}

// serverNonce is the r= value of a server-first message.
func serverNonce(t *testing.T, serverFirst string) string {
	t.Helper()
	r, _, _ := strings.Cut(serverFirst, ",")
	n, ok := strings.CutPrefix(r, "r=")
	if !ok || n == "" {
		t.Fatalf("server-first %q has no nonce", serverFirst)
	}
	return n
}

// startFirst starts an exchange and sends client-first for user with the
// captured librdkafka client nonce; it returns the server-first message.
func startFirst(t *testing.T, s *Server, mech, user string) (*Exchange, string) {
	t.Helper()
	x, err := s.Start(mech)
	if err != nil {
		t.Fatal(err)
	}
	reply, done, err := x.Step([]byte("n,,n=" + user + ",r=" + librdkafkaNonce))
	if err != nil || done {
		t.Fatalf("client-first: done=%v %v", done, err)
	}
	return x, string(reply)
}

// TestScramLibrdkafkaDoubledNonce reproduces librdkafka < 2.6.1's
// client-final message, r=<client nonce><server-first nonce>: it is
// accepted, and the server signature is the one librdkafka expects
// (computed over its own, doubled, client-final message).
func TestScramLibrdkafkaDoubledNonce(t *testing.T) {
	s, logs := newCompatServer(t)
	for mech, gen := range map[string]xscram.HashGeneratorFcn{configs.MechScramSHA256: xscram.SHA256, configs.MechScramSHA512: xscram.SHA512} {
		t.Run(mech, func(t *testing.T) {
			h := scramHashes[mech]
			c, err := gen.NewClientUnprepped("alice", "alice-secret", "")
			if err != nil {
				t.Fatal(err)
			}
			c = c.WithNonceGenerator(func() string { return librdkafkaNonce })

			// First a normal exchange driven by xdg-go's client: it
			// checks handFinal against an independent implementation
			// (same nonce and salt give the same message) and gives the
			// normal path's principal and lifetime to compare with.
			conv := c.NewConversation()
			c1, err := conv.Step("")
			if err != nil {
				t.Fatal(err)
			}
			if c1 != "n,,n=alice,r="+librdkafkaNonce {
				t.Fatalf("xdg-go client-first %q", c1)
			}
			x1, err := s.Start(mech)
			if err != nil {
				t.Fatal(err)
			}
			s1, _, err := x1.Step([]byte(c1))
			if err != nil {
				t.Fatal(err)
			}
			c2, err := conv.Step(string(s1))
			if err != nil {
				t.Fatal(err)
			}
			mine, mineSig := handFinal(t, h, "alice-secret", strings.TrimPrefix(c1, "n,,"), string(s1), serverNonce(t, string(s1)))
			if mine != c2 {
				t.Fatalf("hand-built client-final\n%q\ndiffers from xdg-go's\n%q", mine, c2)
			}
			s2, done, err := x1.Step([]byte(c2))
			if err != nil || !done {
				t.Fatalf("normal final: done=%v %v", done, err)
			}
			if string(s2) != mineSig {
				t.Fatalf("normal server-final %q, hand-computed %q", s2, mineSig)
			}
			if _, err := conv.Step(string(s2)); err != nil || !conv.Valid() {
				t.Fatalf("xdg-go rejects the server-final: %v", err)
			}

			// Now librdkafka's form.
			x2, sf := startFirst(t, s, mech, "alice")
			sn := serverNonce(t, sf)
			if !strings.HasPrefix(sn, librdkafkaNonce) || len(sn) <= len(librdkafkaNonce) {
				t.Fatalf("server nonce %q does not extend the client nonce", sn)
			}
			final, wantSig := handFinal(t, h, "alice-secret", "n=alice,r="+librdkafkaNonce, sf, librdkafkaNonce+sn)
			// The captured shape: c=biws,r=<cnonce><cnonce><snonce>,p=...
			if !strings.HasPrefix(final, "c=biws,r="+librdkafkaNonce+librdkafkaNonce+sn[len(librdkafkaNonce):]+",p=") {
				t.Fatalf("built %q, not librdkafka's shape", final)
			}
			reply, done, err := x2.Step([]byte(final))
			if err != nil || !done {
				t.Fatalf("doubled-nonce final rejected: done=%v %v", done, err)
			}
			if string(reply) != wantSig {
				t.Errorf("server-final %q, librdkafka expects %q", reply, wantSig)
			}
			if x2.Principal() != "alice" || x2.Principal() != x1.Principal() {
				t.Errorf("principal %q, normal path %q", x2.Principal(), x1.Principal())
			}
			if x2.SessionLifetime() != time.Hour || x2.SessionLifetime() != x1.SessionLifetime() {
				t.Errorf("lifetime %v, normal path %v", x2.SessionLifetime(), x1.SessionLifetime())
			}
			if _, _, err := x2.Step([]byte(final)); !errors.Is(err, ErrExchangeDone) {
				t.Errorf("step after done: %v", err)
			}
		})
	}
	if got := strings.Count(logs.String(), "doubled nonce"); got != 2 {
		t.Errorf("%d debug lines about the doubled nonce, want 2; log:\n%s", got, logs)
	}
}

// TestScramDoubledNonceWrongCredentials: the doubled form with a wrong
// password, or for an unknown user, fails with the same generic message as
// the normal path.
func TestScramDoubledNonceWrongCredentials(t *testing.T) {
	s, logs := newCompatServer(t)
	mech := configs.MechScramSHA512
	h := scramHashes[mech]

	// The normal path's message for a wrong password.
	x, sf := startFirst(t, s, mech, "alice")
	final, _ := handFinal(t, h, "nope", "n=alice,r="+librdkafkaNonce, sf, serverNonce(t, sf))
	_, _, normalErr := x.Step([]byte(final))
	if !errors.Is(normalErr, ErrAuthFailed) || !strings.Contains(normalErr.Error(), "invalid credentials") {
		t.Fatalf("normal wrong password: %v", normalErr)
	}

	for _, tc := range []struct{ user, pass, reason string }{
		{"alice", "nope", "wrong password"},
		{"alice", "alice-secreT", "wrong password"},
		{"mallory", "alice-secret", "unknown user"},
	} {
		x, sf := startFirst(t, s, mech, tc.user)
		final, _ := handFinal(t, h, tc.pass, "n="+tc.user+",r="+librdkafkaNonce, sf, librdkafkaNonce+serverNonce(t, sf))
		reply, done, err := x.Step([]byte(final))
		if done || reply != nil || !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%s/%s: done=%v reply=%q err=%v", tc.user, tc.pass, done, reply, err)
			continue
		}
		if err.Error() != normalErr.Error() {
			t.Errorf("%s/%s: message %q, normal path says %q", tc.user, tc.pass, err, normalErr)
		}
		if r := FailureReason(err); !strings.HasPrefix(r, tc.reason) {
			t.Errorf("%s/%s: reason %q, want %q", tc.user, tc.pass, r, tc.reason)
		}
		if x.Principal() != "" {
			t.Errorf("%s/%s: principal %q after a failure", tc.user, tc.pass, x.Principal())
		}
	}
	if strings.Contains(logs.String(), "accepted SCRAM") {
		t.Errorf("a failed exchange logged acceptance:\n%s", logs)
	}
}

// TestScramOtherNoncesRejected: only the exact doubled form is accepted.
// Every other nonce fails the nonce check even with a proof computed
// correctly over it (so the nonce is the only thing wrong).
func TestScramOtherNoncesRejected(t *testing.T) {
	s, _ := newCompatServer(t)
	mech := configs.MechScramSHA512
	h := scramHashes[mech]
	cn := librdkafkaNonce
	variants := map[string]func(sn string) string{
		"random suffix":        func(sn string) string { return sn + rand.Text() },
		"doubled, random tail": func(sn string) string { return cn + sn + rand.Text() },
		"random prefix":        func(sn string) string { return rand.Text() + sn },
		"other prefix, same len": func(sn string) string {
			return strings.Repeat("x", len(cn)) + sn
		},
		"client nonce only":    func(string) string { return cn },
		"client nonce twice":   func(string) string { return cn + cn },
		"tripled client nonce": func(sn string) string { return cn + cn + sn },
		"server part only":     func(sn string) string { return sn[len(cn):] },
		"reversed":             func(sn string) string { return sn + cn },
		"doubled, truncated":   func(sn string) string { return cn + sn[:len(sn)-1] },
		"doubled server nonce": func(sn string) string { return sn + sn },
	}
	for name, mk := range variants {
		x, sf := startFirst(t, s, mech, "alice")
		sn := serverNonce(t, sf)
		nonce := mk(sn)
		if nonce == sn || nonce == cn+sn {
			t.Fatalf("%s: variant %q is an accepted form", name, nonce)
		}
		final, _ := handFinal(t, h, "alice-secret", "n=alice,r="+cn, sf, nonce)
		reply, done, err := x.Step([]byte(final))
		if done || reply != nil || !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%s: done=%v reply=%q err=%v", name, done, reply, err)
			continue
		}
		if err.Error() != "Authentication failed: Invalid client nonce in the final client message." {
			t.Errorf("%s: %q, want the nonce message", name, err)
		}
	}
}
