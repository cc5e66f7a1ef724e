package auth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestUsersRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.yaml")
	if _, err := LoadUsers(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}
	u := NewUsers()
	for _, n := range []string{"carol", "alice", "bob"} {
		if err := u.Set(n, "pw-of-"+n, 0); err != nil {
			t.Fatal(err)
		}
	}
	if !u.Remove("bob") || u.Remove("bob") {
		t.Error("Remove should report true once, then false")
	}
	if err := u.Save(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	data, _ := os.ReadFile(path)
	if bytes.Contains(data, []byte("pw-of-")) {
		t.Fatal("the users file holds a password")
	}
	got, err := LoadUsers(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Names(), []string{"alice", "carol"}) {
		t.Errorf("names %v", got.Names())
	}
	if m := got.Mechanisms("alice"); !slices.Equal(m, []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}) {
		t.Errorf("mechanisms %v", m)
	}
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		c, ok := got.Credential("alice", mech)
		orig, _ := u.Credential("alice", mech)
		if !ok || c.Iterations != DefaultIterations || !bytes.Equal(c.StoredKey, orig.StoredKey) || !bytes.Equal(c.ServerKey, orig.ServerKey) || !bytes.Equal(c.Salt, orig.Salt) {
			t.Errorf("%s credential changed on the round trip", mech)
		}
		// The stored key is what the password derives to.
		d, _ := DeriveCredential(mech, "pw-of-alice", c.Salt, c.Iterations)
		if !bytes.Equal(d.StoredKey, c.StoredKey) {
			t.Errorf("%s: the password does not derive to the stored key", mech)
		}
	}
	a256, _ := got.Credential("alice", "SCRAM-SHA-256")
	a512, _ := got.Credential("alice", "SCRAM-SHA-512")
	if bytes.Equal(a256.Salt, a512.Salt) {
		t.Error("the two hashes share a salt")
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries", len(entries))
	}
}

// RFC 7677's SCRAM-SHA-256 test vector: user "user", password "pencil",
// salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096 iterations. Its server signature
// fixes ServerKey; StoredKey is checked through a full exchange elsewhere.
func TestDeriveCredentialVector(t *testing.T) {
	salt := []byte{0x5b, 0x6d, 0x99, 0x68, 0x9d, 0x12, 0x35, 0x8e, 0xec, 0xa0, 0x4b, 0x14, 0x12, 0x36, 0xfa, 0x81}
	c, err := DeriveCredential("SCRAM-SHA-256", "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	authMsg := "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	sig := hmacSum(scramHashes["SCRAM-SHA-256"], c.ServerKey, authMsg)
	const want = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
	if got := b64(sig); got != want {
		t.Errorf("server signature %s, want %s", got, want)
	}
}

func TestUsersBounds(t *testing.T) {
	u := NewUsers()
	for _, it := range []int{MinIterations - 1, MaxIterations + 1, -1} {
		if err := u.Set("a", "p", it); err == nil {
			t.Errorf("iterations %d accepted", it)
		}
	}
	for _, it := range []int{MinIterations, MaxIterations} {
		if err := u.Set("a", "p", it); err != nil {
			t.Errorf("iterations %d: %v", it, err)
		}
	}
	for _, name := range []string{"", " a", "a ", "a\nb", "\xff", strings.Repeat("x", 256)} {
		if err := u.Set(name, "p", 0); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	if err := u.Set("a", "", 0); err == nil {
		t.Error("empty password accepted")
	}
}

func TestLoadUsersErrors(t *testing.T) {
	good := func() string {
		u := NewUsers()
		u.Set("a", "p", MinIterations)
		path := filepath.Join(t.TempDir(), "u.yaml")
		u.Save(path)
		data, _ := os.ReadFile(path)
		return string(data)
	}()
	cases := map[string]func(string) string{
		"unknown field":     func(s string) string { return s + "extra: 1\n" },
		"iterations low":    func(s string) string { return strings.Replace(s, "iterations: 4096", "iterations: 100", 1) },
		"unknown mechanism": func(s string) string { return strings.Replace(s, "SCRAM-SHA-256", "SCRAM-SHA-1", 1) },
		"bad base64":        func(s string) string { return strings.Replace(s, "salt: ", "salt: '!!'", 1) },
		"short key":         func(s string) string { return strings.Replace(s, "stored_key: ", "stored_key: AAAA", 1) },
		"syntax":            func(string) string { return "users: [" },
		"no credentials":    func(string) string { return "users:\n  a: {}\n" },
		"bad name":          func(string) string { return "users:\n  \" a\": {}\n" },
	}
	for name, mod := range cases {
		path := filepath.Join(t.TempDir(), "u.yaml")
		os.WriteFile(path, []byte(mod(good)), 0o600)
		if _, err := LoadUsers(path); !errors.Is(err, ErrBadUsersFile) {
			t.Errorf("%s: %v, want ErrBadUsersFile", name, err)
		}
	}
	path := filepath.Join(t.TempDir(), "u.yaml")
	os.WriteFile(path, []byte(good), 0o600)
	if _, err := LoadUsers(path); err != nil {
		t.Errorf("unmodified file: %v", err)
	}
	os.WriteFile(path, nil, 0o600)
	if u, err := LoadUsers(path); err != nil || len(u.Names()) != 0 {
		t.Errorf("empty file: %v", err)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
