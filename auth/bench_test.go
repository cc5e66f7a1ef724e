package auth

import (
	"testing"

	"github.com/tollgate-kafka/tollgate/configs"
)

// BenchmarkPlainVerify is the cost of one SASL/PLAIN check: a PBKDF2
// derivation at the user's iteration count (DefaultIterations here).
func BenchmarkPlainVerify(b *testing.B) {
	u := NewUsers()
	u.Set("alice", "alice-secret", DefaultIterations)
	path := b.TempDir() + "/users.yaml"
	u.Save(path)
	s, err := NewServer(&configs.ListenerSASL{Mechanisms: []string{"PLAIN"}, UsersFile: path}, quietLog)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		x, _ := s.Start("PLAIN")
		if _, done, err := x.Step([]byte("\x00alice\x00alice-secret")); !done || err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScramServerFirst is the server's first SCRAM-SHA-512 step
// (lookup and server-first message); SCRAM puts the PBKDF2 work on the
// client, and the final step is two HMACs and a hash.
func BenchmarkScramServerFirst(b *testing.B) {
	u := NewUsers()
	u.Set("alice", "alice-secret", DefaultIterations)
	path := b.TempDir() + "/users.yaml"
	u.Save(path)
	s, err := NewServer(&configs.ListenerSASL{Mechanisms: []string{"SCRAM-SHA-512"}, UsersFile: path}, quietLog)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		x, _ := s.Start("SCRAM-SHA-512")
		if _, _, err := x.Step([]byte("n,,n=alice,r=abcdef")); err != nil {
			b.Fatal(err)
		}
	}
}
