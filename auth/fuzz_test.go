package auth

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-kafka/tollgate/configs"
)

func fuzzServer(f *testing.F, mech string) *Server {
	dir := f.TempDir()
	u := NewUsers()
	if err := u.Set("alice", "alice-secret", MinIterations); err != nil {
		f.Fatal(err)
	}
	path := dir + "/users.yaml"
	if err := u.Save(path); err != nil {
		f.Fatal(err)
	}
	s, err := NewServer(&configs.ListenerSASL{Mechanisms: []string{mech}, UsersFile: path}, quietLog)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(s.Close)
	return s
}

// FuzzSCRAMClientFirst feeds arbitrary client-first messages. Invariants:
// Step never panics; it either answers a server-first message
// ("r=<client nonce + server nonce>,s=...,i=...") without finishing, or
// fails with an error wrapping ErrAuthFailed.
func FuzzSCRAMClientFirst(f *testing.F) {
	s := fuzzServer(f, configs.MechScramSHA256)
	f.Fuzz(func(t *testing.T, msg []byte) {
		x, err := s.Start(configs.MechScramSHA256)
		if err != nil {
			t.Fatal(err)
		}
		reply, done, err := x.Step(msg)
		if done {
			t.Fatal("one message finished a SCRAM exchange")
		}
		if err != nil {
			if !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("error %v does not wrap ErrAuthFailed", err)
			}
			return
		}
		if !strings.HasPrefix(string(reply), "r=") || strings.Count(string(reply), ",") != 2 {
			t.Fatalf("server-first %q", reply)
		}
	})
}

// FuzzSCRAMClientFinal feeds arbitrary client-final messages after a valid
// client-first for a real user; "NONCE" in the input is replaced by the
// exchange's nonce so that the fuzzer gets past the nonce check.
// Invariants: Step never panics, never authenticates (the fuzzer does not
// know the password), and every failure wraps ErrAuthFailed.
func FuzzSCRAMClientFinal(f *testing.F) {
	s := fuzzServer(f, configs.MechScramSHA512)
	f.Fuzz(func(t *testing.T, msg []byte) {
		x, err := s.Start(configs.MechScramSHA512)
		if err != nil {
			t.Fatal(err)
		}
		first, _, err := x.Step([]byte("n,,n=alice,r=fuzz"))
		if err != nil {
			t.Fatal(err)
		}
		nonce, _, _ := strings.Cut(strings.TrimPrefix(string(first), "r="), ",")
		_, done, err := x.Step([]byte(strings.ReplaceAll(string(msg), "NONCE", nonce)))
		if done || err == nil {
			t.Fatalf("a fuzzed client-final authenticated (done=%v)", done)
		}
		if !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("error %v does not wrap ErrAuthFailed", err)
		}
	})
}

// FuzzPrincipalRules parses a rule and applies it to a DN. Invariants: no
// panic; a rule that parses yields a principal or an error wrapping
// ErrNoPrincipal; L and U rules give lower- and upper-case results.
func FuzzPrincipalRules(f *testing.F) {
	f.Fuzz(func(t *testing.T, rule, dn string) {
		m, err := NewPrincipalMapper(&configs.ListenerTLS{PrincipalMappingRules: []string{rule}})
		if err != nil {
			return
		}
		p, err := m.mapDN(dn)
		if err != nil {
			if !errors.Is(err, ErrNoPrincipal) {
				t.Fatalf("error %v does not wrap ErrNoPrincipal", err)
			}
			return
		}
		if p == "" {
			t.Fatal("empty principal without an error")
		}
		switch m.rules[0].Case {
		case 'L':
			if p != strings.ToLower(p) {
				t.Fatalf("L rule gave %q", p)
			}
		case 'U':
			if p != strings.ToUpper(p) {
				t.Fatalf("U rule gave %q", p)
			}
		}
	})
}

// FuzzOAuthBearerMessage parses OAUTHBEARER initial responses. Invariants:
// no panic; a message that parses has a non-empty token that occurs in it.
func FuzzOAuthBearerMessage(f *testing.F) {
	f.Fuzz(func(t *testing.T, msg string) {
		_, tok, err := parseOAuthBearer(msg)
		if err != nil {
			return
		}
		if tok == "" || !strings.Contains(msg, "auth=Bearer "+tok) {
			t.Fatalf("token %q from %q", tok, msg)
		}
	})
}
