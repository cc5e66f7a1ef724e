package storage

import (
	"testing"
	"time"
)

// TestRetentionOnRoll: with retention.bytes set and nobody calling
// ApplyRetention, segments that rolled are deleted as the log grows, so
// the log stays within about one segment of the limit.
func TestRetentionOnRoll(t *testing.T) {
	cfg := smallConfig()
	batch := makeBatch(t, dataSpec(4))
	cfg.SegmentBytes = int64(len(batch)) * 10
	cfg.RetentionBytes = cfg.SegmentBytes * 3
	l := openTest(t, t.TempDir(), cfg, nil)
	for range 200 {
		mustAppend(t, l, append([]byte(nil), batch...))
	}
	// The pass runs in the background after the last roll: poll.
	deadline := time.Now().Add(10 * time.Second)
	for {
		size, start := l.Size(), l.LogStartOffset()
		if size <= cfg.RetentionBytes+cfg.SegmentBytes && start > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log is %d bytes with log start %d; retention.bytes %d, segment.bytes %d", size, start, cfg.RetentionBytes, cfg.SegmentBytes)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// What remains is readable from the new log start, densely.
	start := l.LogStartOffset()
	r, err := l.Read(start, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	next := start
	for len(b) > 0 {
		h := parseHeader(b)
		if h.baseOffset != next {
			t.Fatalf("batch at %d, want %d", h.baseOffset, next)
		}
		next = h.lastOffset() + 1
		b = b[h.size():]
	}
	if next != l.HighWatermark() {
		t.Fatalf("read up to %d, high watermark %d", next, l.HighWatermark())
	}
}
