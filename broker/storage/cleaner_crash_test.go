package storage

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The crash test runs a cleaning in a child process (this test binary)
// that SIGKILLs itself at a stage of the swap, then recovers the directory
// in the parent. Before the manifest is written the old segments must
// come back, byte for byte; from then on, exactly the segments an
// uninterrupted cleaning produces (checked against a reference run on a
// copy of the directory with the same clock).
const (
	envCrashDir   = "TOLLGATE_CLEAN_CRASH_DIR"
	envCrashStage = "TOLLGATE_CLEAN_CRASH_STAGE"
	envCrashNow   = "TOLLGATE_CLEAN_CRASH_NOW"
)

// TestCleanCrashChild is the child: it is skipped unless the parent set
// the environment.
func TestCleanCrashChild(t *testing.T) {
	dir := os.Getenv(envCrashDir)
	if dir == "" {
		t.Skip("helper process for TestCleanSIGKILLDuringSwap")
	}
	l, err := OpenLog(dir, compactConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	stage := os.Getenv(envCrashStage)
	l.cleanHook = func(s string) error {
		if s == stage {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
		return nil
	}
	ms, _ := strconv.ParseInt(os.Getenv(envCrashNow), 10, 64)
	if _, err := l.Clean(CleanOptions{Force: true, Now: time.UnixMilli(ms)}); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("stage %q never reached", stage)
}

// dirFiles maps the segment files of dir to their contents.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		switch filepath.Ext(e.Name()) {
		case ".log", ".index", ".timeindex", ".cleaned":
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = b
		}
	}
	return out
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func sameSegments(t *testing.T, stage string, got, want map[string][]byte) {
	t.Helper()
	var gn, wn []string
	for n := range got {
		gn = append(gn, n)
	}
	for n := range want {
		wn = append(wn, n)
	}
	sort.Strings(gn)
	sort.Strings(wn)
	if len(gn) != len(wn) {
		t.Fatalf("stage %s: files %v, want %v", stage, gn, wn)
	}
	for i := range gn {
		// The active segment's index files are rewritten on open; only
		// the data must match for it.
		if gn[i] != wn[i] || (filepath.Ext(gn[i]) == ".log" && !bytes.Equal(got[gn[i]], want[wn[i]])) {
			t.Fatalf("stage %s: file %s differs from %s", stage, gn[i], wn[i])
		}
	}
}

func TestCleanSIGKILLDuringSwap(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	now := time.Now()
	seed := t.TempDir()
	l := openTest(t, seed, compactConfig(), nil)
	want := history(t, l, plainKeyed(), 10, 6, map[int]bool{2: true})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	old := dirFiles(t, seed)
	ref := t.TempDir()
	copyDir(t, seed, ref)
	rl := openTest(t, ref, compactConfig(), nil)
	mustClean(t, rl, CleanOptions{Now: now})
	rl.Close()
	cleaned := dirFiles(t, ref)

	for _, stage := range []string{"cleaned", "manifest", "renamed", "swapped"} {
		t.Run(stage, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, seed, dir)
			cmd := exec.Command(os.Args[0], "-test.run=^TestCleanCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashStage+"="+stage, envCrashNow+"="+strconv.FormatInt(now.UnixMilli(), 10))
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die by SIGKILL at %s: %v\n%s", stage, err, out)
			}
			l := openTest(t, dir, compactConfig(), nil)
			if stage == "cleaned" {
				sameSegments(t, stage, dirFiles(t, dir), old)
				checkLatest(t, l, want)
			} else {
				sameSegments(t, stage, dirFiles(t, dir), cleaned)
				checkCompacted(t, l, want, false)
			}
			if _, err := os.Stat(filepath.Join(dir, swapFile)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("swap manifest left after recovery: %v", err)
			}
			mustClean(t, l, CleanOptions{Now: now})
			checkCompacted(t, l, want, false)
		})
	}
}

// checkLatest checks only that every key's latest value is at its offset.
func checkLatest(t testing.TB, l *Log, want map[string]seen) {
	t.Helper()
	last := map[string]seen{}
	for _, r := range readRecords(t, l) {
		last[r.key] = r
	}
	for k, w := range want {
		if g := last[k]; g.off != w.off || !bytes.Equal(g.value, w.value) {
			t.Fatalf("key %s: want %q at %d, got %+v", k, w.value, w.off, g)
		}
	}
}
