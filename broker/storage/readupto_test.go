package storage

import (
	"testing"
	"time"
)

// TestReadUpToLastStableOffset checks the read_committed read: nothing at
// or past the last stable offset, a batch straddling the bound kept,
// NextOffset naming the first batch left out, across segment rolls; and
// that WaitStable wakes on the commit marker, not on a data append.
func TestReadUpToLastStableOffset(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 250 // about two batches per segment: reads cross rolls
	l := openTest(t, t.TempDir(), cfg, nil)
	txn := func(seq int32) spec {
		s := dataSpec(2)
		s.pid, s.epoch, s.seq, s.txn = 9, 0, seq, true
		return s
	}
	mustAppend(t, l, makeBatch(t, dataSpec(2))) // 0-1
	mustAppend(t, l, makeBatch(t, dataSpec(2))) // 2-3
	mustAppend(t, l, makeBatch(t, txn(0)))      // 4-5, opens the transaction
	mustAppend(t, l, makeBatch(t, dataSpec(2))) // 6-7
	mustAppend(t, l, makeBatch(t, txn(2)))      // 8-9
	if len(l.segs) < 3 {
		t.Fatalf("want several segments, have %d", len(l.segs))
	}
	lso := l.LastStableOffset()
	if lso != 4 || l.HighWatermark() != 10 {
		t.Fatalf("lso %d hw %d", lso, l.HighWatermark())
	}
	type want struct {
		from, upTo int64
		maxBytes   int32
		bases      []int64
		next       int64
	}
	for _, w := range []want{
		{0, lso, 1 << 20, []int64{0, 2}, 4},
		{2, lso, 1 << 20, []int64{2}, 4},
		{3, lso, 1 << 20, []int64{2}, 4},
		{4, lso, 1 << 20, nil, 4},
		{0, lso, 1, []int64{0}, 2},
		{0, 5, 1 << 20, []int64{0, 2, 4}, 6}, // 5 is inside 4-5: kept
		{0, 1 << 40, 1 << 20, []int64{0, 2, 4, 6, 8}, 10},
	} {
		r, err := l.ReadUpTo(w.from, w.maxBytes, w.upTo)
		if err != nil {
			t.Fatalf("read %d up to %d: %v", w.from, w.upTo, err)
		}
		b, err := r.AppendTo(nil)
		r.Release()
		if err != nil {
			t.Fatal(err)
		}
		var bases []int64
		for _, h := range batchesOf(t, b) {
			bases = append(bases, h.baseOffset)
		}
		if len(bases) != len(w.bases) || r.NextOffset != w.next || r.Size != len(b) {
			t.Fatalf("read %d up to %d (max %d): batches %v next %d, want %v next %d", w.from, w.upTo, w.maxBytes, bases, r.NextOffset, w.bases, w.next)
		}
		for i := range bases {
			if bases[i] != w.bases[i] {
				t.Fatalf("read %d up to %d: batches %v, want %v", w.from, w.upTo, bases, w.bases)
			}
		}
	}

	stable := l.WaitStable(lso)
	hwMoved := l.Wait(l.HighWatermark() - 1)
	select {
	case <-hwMoved:
	default:
		t.Fatal("Wait below the high watermark must be ready")
	}
	mustAppend(t, l, makeBatch(t, dataSpec(1))) // 10: moves hw, not the LSO
	select {
	case <-stable:
		t.Fatal("WaitStable woke on a data append inside the open transaction")
	default:
	}
	commit := dataSpec(1)
	commit.pid, commit.epoch, commit.control = 9, 0, 1
	if _, _, err := l.Append(makeBatch(t, commit), AppendOptions{AllowControl: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stable:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitStable did not wake on the commit marker")
	}
	if lso, hw := l.LastStableOffset(), l.HighWatermark(); lso != hw || hw != 12 {
		t.Fatalf("after commit lso %d hw %d", lso, hw)
	}
	// A waiter at the new end is released by Close.
	end := l.WaitStable(12)
	l.Close()
	select {
	case <-end:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitStable not released by Close")
	}
}
