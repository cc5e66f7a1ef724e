package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/configs"
)

func usersRun(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runUsers(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// plainOK reports whether the users file accepts name/password over SASL
// PLAIN, through the same server a listener runs.
func plainOK(t *testing.T, file, name, password string) bool {
	t.Helper()
	s, err := auth.NewServer(&configs.ListenerSASL{Mechanisms: []string{"PLAIN"}, UsersFile: file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x, _ := s.Start("PLAIN")
	_, done, err := x.Step([]byte("\x00" + name + "\x00" + password))
	return done && err == nil
}

func TestUsersCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "users.yaml")
	code, out, errOut := usersRun(t, "s3cret-alice\n", "add", "alice", "--password-stdin", "--iterations", "4096", "--file", file)
	if code != 0 || !strings.Contains(out, `added user "alice"`) {
		t.Fatalf("add: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := usersRun(t, "s3cret-bob", "add", "--file", file, "--password-stdin", "bob"); code != 0 {
		t.Fatalf("add bob (flags first, no newline): %d %q", code, errOut)
	}
	fi, _ := os.Stat(file)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	data, _ := os.ReadFile(file)
	if bytes.Contains(data, []byte("s3cret")) {
		t.Fatal("the users file holds a password")
	}
	if !plainOK(t, file, "alice", "s3cret-alice") || plainOK(t, file, "alice", "s3cret-bob") || !plainOK(t, file, "bob", "s3cret-bob") {
		t.Error("the saved credentials do not check out")
	}

	code, out, _ = usersRun(t, "", "list", "--file", file)
	if code != 0 || out != "alice\tSCRAM-SHA-256(4096) SCRAM-SHA-512(4096)\nbob\tSCRAM-SHA-256(8192) SCRAM-SHA-512(8192)\n" {
		t.Errorf("list: %d %q", code, out)
	}
	if strings.Contains(out, "s3cret") {
		t.Error("list printed a secret")
	}

	// Changing a password replaces the credentials.
	if code, out, _ := usersRun(t, "new-pw\n", "add", "alice", "--password-stdin", "--file", file); code != 0 || !strings.Contains(out, "updated") {
		t.Errorf("update: %d %q", code, out)
	}
	if plainOK(t, file, "alice", "s3cret-alice") || !plainOK(t, file, "alice", "new-pw") {
		t.Error("the password did not change")
	}

	if code, out, _ := usersRun(t, "", "remove", "alice", "--file", file); code != 0 || !strings.Contains(out, "removed") {
		t.Errorf("remove: %d %q", code, out)
	}
	if code, _, errOut := usersRun(t, "", "remove", "alice", "--file", file); code != 1 || !strings.Contains(errOut, `no user "alice"`) {
		t.Errorf("remove again: %d %q", code, errOut)
	}
	if _, out, _ := usersRun(t, "", "list", "--file", file); out != "bob\tSCRAM-SHA-256(8192) SCRAM-SHA-512(8192)\n" {
		t.Errorf("list after remove: %q", out)
	}
}

func TestUsersCommandErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "users.yaml")
	for _, c := range []struct {
		stdin string
		args  []string
		code  int
		msg   string
	}{
		{"", nil, 2, "usage"},
		{"", []string{"frobnicate"}, 2, "unknown subcommand"},
		{"", []string{"add", "alice"}, 2, "usage"},                            // no --file
		{"", []string{"list", "extra", "--file", file}, 2, "usage"},           // stray argument
		{"pw\n", []string{"add", "a", "--file", file}, 1, "--password-stdin"}, // stdin not a terminal
		{"\n", []string{"add", "a", "--password-stdin", "--file", file}, 1, "empty password"},
		{"pw\n", []string{"add", "a", "--password-stdin", "--iterations", "100", "--file", file}, 1, "out of range"},
		{"pw\n", []string{"add", " a", "--password-stdin", "--file", file}, 1, "space"},
		{"", []string{"list", "--file", file}, 1, "no such file"},
		{"", []string{"remove", "a", "--file", file}, 1, "no such file"},
		{"", []string{"list", "--file", dir}, 1, "not a regular file"},
	} {
		code, _, errOut := usersRun(t, c.stdin, c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("%v: exit %d %q; want %d and %q", c.args, code, errOut, c.code, c.msg)
		}
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Error("a failed add created the file")
	}
}
