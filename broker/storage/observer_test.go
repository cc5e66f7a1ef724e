package storage

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestFsyncObserver checks that every group-commit round's fdatasync is
// reported, and that removing the observer stops the reports.
func TestFsyncObserver(t *testing.T) {
	s := NewSyncer(FsyncAlways, 0)
	defer s.Close()
	var n, total atomic.Int64
	s.SetFsyncObserver(func(d time.Duration) {
		n.Add(1)
		total.Add(int64(d))
	})
	l := openTest(t, t.TempDir(), smallConfig(), s)
	for i := 0; i < 3; i++ {
		mustAppend(t, l, makeBatch(t, dataSpec(2)))
	}
	// Each append waited for its own flush (FsyncAlways): at least one
	// fdatasync per append, each taking some time.
	if n.Load() < 3 || total.Load() <= 0 {
		t.Fatalf("observed %d fsyncs totalling %v, want >= 3", n.Load(), time.Duration(total.Load()))
	}
	s.SetFsyncObserver(nil)
	before := n.Load()
	mustAppend(t, l, makeBatch(t, dataSpec(2)))
	if n.Load() != before {
		t.Fatalf("observer called after removal")
	}
}
