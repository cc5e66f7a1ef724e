package auth

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRereadForcesLoad: a file rewritten in place with the same size and
// modification time is invisible to the stat check; Reread (a
// configuration reload) makes the next use read it anyway.
func TestRereadForcesLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v")
	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWatched("test file", slog.New(slog.DiscardHandler), func() (string, error) {
		b, err := os.ReadFile(path)
		return string(b), err
	}, path)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	w.now = func() time.Time { return clock }
	if err := os.WriteFile(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * checkInterval)
	if got := w.get(); got != "one" {
		t.Fatalf("same stamp: got %q, want the first version (the stat check cannot see this change)", got)
	}
	Reread()
	if got := w.get(); got != "two" {
		t.Fatalf("after Reread: got %q, want two", got)
	}
	// A second use without another Reread is an ordinary check again.
	if got := w.get(); got != "two" {
		t.Fatalf("got %q", got)
	}
}
