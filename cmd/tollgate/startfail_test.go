package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFailedStartLeavesNoDataDir: a start that fails on a busy port (the
// Kafka listener's or the admin server's) does not leave behind the data
// directory it created; one that existed before is kept as it was.
func TestFailedStartLeavesNoDataDir(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	start := func(args ...string) string {
		t.Helper()
		var stderr bytes.Buffer
		if code := run(append(args, "--log-level", "error"), io.Discard, &stderr); code != 1 {
			t.Fatalf("start %v: exit %d, want 1 (stderr %q)", args, code, stderr.String())
		}
		return stderr.String()
	}
	fresh := filepath.Join(t.TempDir(), "new", "data")
	if msg := start("--listen", busy.Addr().String(), "--data-dir", fresh, "--admin", "off"); !strings.Contains(msg, "address already in use") {
		t.Errorf("busy listener: %q", msg)
	}
	if _, err := os.Stat(filepath.Dir(fresh)); !os.IsNotExist(err) {
		t.Errorf("after a start that failed on a busy listener, %s: %v (want it not to exist)", filepath.Dir(fresh), err)
	}
	if msg := start("--listen", "127.0.0.1:0", "--data-dir", fresh, "--admin", busy.Addr().String()); !strings.Contains(msg, "address already in use") {
		t.Errorf("busy admin port: %q", msg)
	}
	if _, err := os.Stat(filepath.Dir(fresh)); !os.IsNotExist(err) {
		t.Errorf("after a start that failed on a busy admin port, %s: %v (want it not to exist)", filepath.Dir(fresh), err)
	}

	kept := t.TempDir()
	marker := filepath.Join(kept, "keep-me")
	if err := os.WriteFile(marker, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	start("--listen", busy.Addr().String(), "--data-dir", kept, "--admin", "off")
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("an existing data directory was touched by a failed start: %v", err)
	}
}
