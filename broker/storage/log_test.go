package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestParseFsyncPolicy(t *testing.T) {
	for in, want := range map[string]FsyncPolicy{"always": FsyncAlways, "Interval": FsyncInterval, " never ": FsyncNever} {
		got, err := ParseFsyncPolicy(in)
		if err != nil || got != want {
			t.Errorf("ParseFsyncPolicy(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseFsyncPolicy("sometimes"); err == nil {
		t.Error("ParseFsyncPolicy accepted an unknown policy")
	}
}

// Stored batches are byte-identical to the produced ones except BaseOffset
// and PartitionLeaderEpoch; a compressed batch stays compressed.
func TestAppendReadRoundTrip(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncInterval, FsyncNever} {
		t.Run(policy.String(), func(t *testing.T) {
			s := NewSyncer(policy, 5*time.Millisecond)
			defer s.Close()
			l := openTest(t, t.TempDir(), smallConfig(), s)
			defer l.Close()
			var sent [][]byte
			for i := range 20 {
				sp := dataSpec(1 + i%4)
				sp.zstd = i%3 == 0
				b := makeBatch(t, sp)
				sent = append(sent, append([]byte(nil), b...))
				res := mustAppend(t, l, b)
				if i == 0 && res.BaseOffset != 0 {
					t.Fatalf("first base offset %d", res.BaseOffset)
				}
				if res.LogAppendTime != -1 {
					t.Fatalf("LogAppendTime %d on a CreateTime log", res.LogAppendTime)
				}
			}
			if l.HighWatermark() != l.LogEndOffset() {
				t.Fatalf("hw %d != leo %d after durable appends", l.HighWatermark(), l.LogEndOffset())
			}
			got := readAll(t, l, 0)
			next := int64(0)
			for i, want := range sent {
				h := parseHeader(got)
				if h.baseOffset != next {
					t.Fatalf("batch %d at offset %d, want %d", i, h.baseOffset, next)
				}
				if int32(binary.BigEndian.Uint32(got[offLeaderEpoch:])) != leaderEpoch {
					t.Fatalf("batch %d leader epoch not assigned", i)
				}
				if !bytes.Equal(got[offLength:offLeaderEpoch], want[offLength:offLeaderEpoch]) || !bytes.Equal(got[offMagic:h.size()], want[offMagic:]) {
					t.Fatalf("batch %d differs from what was produced beyond offset/epoch", i)
				}
				if (i%3 == 0) != (h.compression() == 4) {
					t.Fatalf("batch %d compression %d", i, h.compression())
				}
				next += int64(h.numRecords)
				got = got[h.size():]
			}
			if len(got) != 0 || next != l.LogEndOffset() {
				t.Fatalf("%d stray bytes, next %d, leo %d", len(got), next, l.LogEndOffset())
			}
		})
	}
}

func TestAppendValidation(t *testing.T) {
	l := openTest(t, t.TempDir(), smallConfig(), nil)
	defer l.Close()
	mustAppend(t, l, makeBatch(t, dataSpec(3)))
	size := l.Size()

	flip := makeBatch(t, dataSpec(2))
	flip[len(flip)-1] ^= 0xff
	magic := makeBatch(t, dataSpec(2))
	magic[offMagic] = 1
	delta := makeBatch(t, dataSpec(2))
	binary.BigEndian.PutUint32(delta[offLastOffsetDelta:], 5)
	binary.BigEndian.PutUint32(delta[offCRC:], crcOf(delta))
	ctl := dataSpec(1)
	ctl.control, ctl.pid, ctl.epoch = 1, 7, 0
	big := dataSpec(1)
	big.valueSize = 2 << 20
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"crc", flip, ErrCorruptMessage},
		{"truncated", makeBatch(t, dataSpec(2))[:70], ErrCorruptMessage},
		{"short", make([]byte, 20), ErrCorruptMessage},
		{"magic", magic, ErrInvalidRecord},
		{"delta", delta, ErrInvalidRecord},
		{"control from client", makeBatch(t, ctl), ErrInvalidRecord},
		{"too large", makeBatch(t, big), ErrMessageTooLarge},
		{"empty", nil, ErrInvalidRecord},
	}
	for _, c := range cases {
		_, _, err := l.Append(c.b, AppendOptions{})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	if l.Size() != size || l.LogEndOffset() != 3 {
		t.Fatalf("rejected batches changed the log: size %d -> %d, leo %d", size, l.Size(), l.LogEndOffset())
	}
	if _, _, err := l.Append(makeBatch(t, ctl), AppendOptions{AllowControl: true}); err != nil {
		t.Fatalf("broker control batch refused: %v", err)
	}
}

func crcOf(b []byte) uint32 { return crc32c(b[offAttributes:]) }

func TestLogAppendTime(t *testing.T) {
	cfg := smallConfig()
	cfg.LogAppendTime = true
	l := openTest(t, t.TempDir(), cfg, nil)
	defer l.Close()
	now := time.UnixMilli(1_800_000_000_000)
	res, _, err := l.Append(makeBatch(t, dataSpec(3)), AppendOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if res.LogAppendTime != now.UnixMilli() {
		t.Fatalf("LogAppendTime %d", res.LogAppendTime)
	}
	hs := batchesOf(t, readAll(t, l, 0)) // validates the recomputed CRC
	if hs[0].attributes&attrLogAppendTime == 0 || hs[0].maxTimestamp != now.UnixMilli() {
		t.Fatalf("batch not stamped: attrs %x max %d", hs[0].attributes, hs[0].maxTimestamp)
	}
}

// Many small segments; a read at every offset returns the batch holding it.
func TestSegmentRollAndIndexLookups(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 4 << 10
	cfg.IndexIntervalBytes = 300
	l := openTest(t, dir, cfg, nil)
	for i := range 400 {
		mustAppend(t, l, makeBatch(t, dataSpec(1+i%5)))
	}
	check := func(l *Log) {
		t.Helper()
		if n := len(l.segs); n < 10 {
			t.Fatalf("only %d segments", n)
		}
		for off := int64(0); off < l.LogEndOffset(); off++ {
			r, err := l.Read(off, 1)
			if err != nil {
				t.Fatalf("read %d: %v", off, err)
			}
			b, _ := r.AppendTo(nil)
			r.Release()
			hs := batchesOf(t, b)
			if len(hs) != 1 || hs[0].baseOffset > off || hs[0].lastOffset() < off {
				t.Fatalf("read %d got %d batches, first [%d,%d]", off, len(hs), hs[0].baseOffset, hs[0].lastOffset())
			}
		}
		if _, err := l.Read(l.LogEndOffset()+1, 100); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read past end: %v", err)
		}
		r, err := l.Read(l.LogEndOffset(), 100)
		if err != nil || r.Size != 0 {
			t.Fatalf("read at end: %v, %d bytes", err, r.Size)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, cfg, nil)
	defer l.Close()
	check(l)
}

// maxBytes is honoured with whole batches; a first batch larger than it is
// returned anyway.
func TestReadMaxBytes(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 4 << 10
	cfg.IndexIntervalBytes = 100
	l := openTest(t, t.TempDir(), cfg, nil)
	defer l.Close()
	for range 100 {
		mustAppend(t, l, makeBatch(t, dataSpec(2)))
	}
	one := int32(len(makeBatch(t, dataSpec(2))))
	for _, mb := range []int32{0, 1, one, one + 1, 3*one - 1, 3 * one, 10000, 1 << 20} {
		r, err := l.Read(5, mb)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := r.AppendTo(nil)
		r.Release()
		hs := batchesOf(t, b)
		want := max(1, int(mb/one))
		if total := int(l.LogEndOffset()-4) / 2; want > total {
			want = total
		}
		if len(hs) != want || hs[0].baseOffset != 4 {
			t.Fatalf("maxBytes %d: %d batches from %d, want %d from 4", mb, len(hs), hs[0].baseOffset, want)
		}
		for i := 1; i < len(hs); i++ {
			if hs[i].baseOffset != hs[i-1].lastOffset()+1 {
				t.Fatalf("maxBytes %d: gap between batches", mb)
			}
		}
	}
}

func TestRetention(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 2 << 10
	l := openTest(t, t.TempDir(), cfg, nil)
	defer l.Close()
	base := int64(1_700_000_000_000)
	for i := range 60 {
		sp := dataSpec(2)
		sp.valueSize = 64
		sp.baseTs = base + int64(i)*1000
		mustAppend(t, l, makeBatch(t, sp))
	}
	// Rolls started background retention passes (retainSoon); let them
	// finish before the configuration changes, or a late pass applies the
	// new retention.ms at the wall clock and the test reads l.segs while
	// it changes.
	waitRetained(t, l)
	segs := len(l.segs)
	if segs < 5 {
		t.Fatalf("%d segments", segs)
	}
	// By time: records older than 30s before the last one.
	cfg.RetentionMs = 30_000
	l.SetConfig(cfg)
	if err := l.ApplyRetention(time.UnixMilli(base + 59_000)); err != nil {
		t.Fatal(err)
	}
	for _, s := range l.segs[:len(l.segs)-1] {
		if s.maxTs < base+59_000-30_000 {
			t.Fatalf("segment %d with max ts %d survived retention.ms", s.base, s.maxTs)
		}
	}
	if len(l.segs) >= segs || l.LogStartOffset() != l.segs[0].base {
		t.Fatalf("retention.ms: %d -> %d segments, log start %d", segs, len(l.segs), l.LogStartOffset())
	}
	if _, err := l.Read(0, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	// By bytes.
	cfg.RetentionMs, cfg.RetentionBytes = -1, 5<<10
	l.SetConfig(cfg)
	if err := l.ApplyRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if sz := l.Size(); sz > 5<<10+2<<10 || sz-l.segs[0].size >= 5<<10 {
		t.Fatalf("size %d after retention.bytes 5KiB", sz)
	}
	if len(l.segs) < 2 {
		t.Fatal("retention.bytes deleted the active segment's predecessors too eagerly")
	}
	readAll(t, l, l.LogStartOffset())
}

// waitRetained waits until no roll-time retention pass is running.
func waitRetained(t *testing.T, l *Log) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.retaining.Load() {
		if time.Now().After(deadline) {
			t.Fatal("background retention pass did not finish")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDeleteRecordsPersisted(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 2 << 10
	l := openTest(t, dir, cfg, nil)
	for range 50 {
		mustAppend(t, l, makeBatch(t, dataSpec(2)))
	}
	if _, err := l.DeleteRecords(l.LogEndOffset() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("delete past hw: %v", err)
	}
	ls, err := l.DeleteRecords(37)
	if err != nil || ls != 37 {
		t.Fatalf("DeleteRecords = %d, %v", ls, err)
	}
	if l.segs[0].base > 37 || (len(l.segs) > 1 && l.segs[1].base <= 37) {
		t.Fatalf("segments not trimmed: first base %d", l.segs[0].base)
	}
	if _, err := l.Read(36, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read 36: %v", err)
	}
	crash(l) // the log start must not depend on a clean close
	l = openTest(t, dir, cfg, nil)
	if l.LogStartOffset() != 37 || l.LogEndOffset() != 100 {
		t.Fatalf("after reopen: start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	b := readAll(t, l, 37)
	if hs := batchesOf(t, b); hs[0].lastOffset() < 37 {
		t.Fatal("first batch below log start")
	}
	// Delete everything: -1 means the high watermark.
	if ls, err := l.DeleteRecords(-1); err != nil || ls != 100 {
		t.Fatalf("DeleteRecords(-1) = %d, %v", ls, err)
	}
	if l.Size() != 0 {
		t.Fatalf("size %d after deleting all", l.Size())
	}
	mustAppend(t, l, makeBatch(t, dataSpec(1)))
	l.Close()
	l = openTest(t, dir, cfg, nil)
	defer l.Close()
	if l.LogStartOffset() != 100 || l.LogEndOffset() != 101 {
		t.Fatalf("start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
}

func segPaths(t *testing.T, dir string) []string {
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A torn last batch (cut short, or with flipped bytes) is cut off at
// recovery and everything before it kept.
func TestRecoverTornTail(t *testing.T) {
	for _, mode := range []string{"truncate", "flip", "zeros"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			l := openTest(t, dir, smallConfig(), nil)
			var lastPos int64
			for i := range 30 {
				if i == 29 {
					lastPos = l.Size()
				}
				mustAppend(t, l, makeBatch(t, dataSpec(3)))
			}
			before := readAll(t, l, 0)[:lastPos]
			crash(l)
			path := segPaths(t, dir)[0]
			switch mode {
			case "truncate":
				os.Truncate(path, lastPos+40)
			case "flip":
				f, _ := os.OpenFile(path, os.O_RDWR, 0)
				f.WriteAt([]byte{0xde, 0xad}, lastPos+70)
				f.Close()
			case "zeros":
				f, _ := os.OpenFile(path, os.O_RDWR, 0)
				f.WriteAt(make([]byte, 4096), lastPos)
				f.Close()
			}
			l = openTest(t, dir, smallConfig(), nil)
			defer l.Close()
			if l.LogEndOffset() != 29*3 {
				t.Fatalf("leo %d after recovery, want %d", l.LogEndOffset(), 29*3)
			}
			if got := readAll(t, l, 0); !bytes.Equal(got, before) {
				t.Fatal("recovered prefix differs")
			}
			if fi, _ := os.Stat(path); fi.Size() != lastPos {
				t.Fatalf("file size %d, want %d", fi.Size(), lastPos)
			}
			res := mustAppend(t, l, makeBatch(t, dataSpec(1)))
			if res.BaseOffset != 29*3 {
				t.Fatalf("append after recovery at %d", res.BaseOffset)
			}
		})
	}
}

// Recovery reads only what follows the checkpoint: after a clean close
// nothing, and a corrupted byte in an old, checkpointed segment is never
// looked at; after a crash only the unflushed tail.
func TestRecoveryReadsOnlyTail(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 4 << 10
	l := openTest(t, dir, cfg, nil)
	for range 200 {
		mustAppend(t, l, makeBatch(t, dataSpec(2)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	paths := segPaths(t, dir)
	if len(paths) < 5 {
		t.Fatalf("%d segments", len(paths))
	}
	f, _ := os.OpenFile(paths[1], os.O_RDWR, 0)
	f.WriteAt([]byte("garbage!"), 500)
	f.Close()
	fi1, _ := os.Stat(paths[1])

	l = openTest(t, dir, cfg, nil)
	if l.recoveredBytes != 0 {
		t.Fatalf("clean reopen verified %d bytes", l.recoveredBytes)
	}
	if fi, _ := os.Stat(paths[1]); fi.Size() != fi1.Size() || l.LogEndOffset() != 400 {
		t.Fatal("clean reopen touched the old segment")
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	var tail int64
	for range 10 {
		b := makeBatch(t, dataSpec(2))
		tail += int64(len(b))
		mustAppend(t, l, b)
	}
	crash(l)
	l = openTest(t, dir, cfg, nil)
	defer l.Close()
	if l.recoveredBytes != tail {
		t.Fatalf("crash recovery verified %d bytes, the unflushed tail is %d", l.recoveredBytes, tail)
	}
	if l.LogEndOffset() != 420 {
		t.Fatalf("leo %d", l.LogEndOffset())
	}
}

// Without a checkpoint every segment is verified and a corrupt middle
// segment ends the log there.
func TestRecoverWithoutCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 2 << 10
	l := openTest(t, dir, cfg, nil)
	for range 50 {
		mustAppend(t, l, makeBatch(t, dataSpec(2)))
	}
	l.Close()
	os.Remove(filepath.Join(dir, checkpointFile))
	paths := segPaths(t, dir)
	f, _ := os.OpenFile(paths[2], os.O_RDWR, 0)
	f.WriteAt([]byte{1, 2, 3}, 300)
	f.Close()
	l = openTest(t, dir, cfg, nil)
	defer l.Close()
	if len(l.segs) != 3 || l.LogEndOffset() <= l.segs[2].base || l.LogEndOffset() >= 100 {
		t.Fatalf("segments %d, leo %d", len(l.segs), l.LogEndOffset())
	}
	if l.recoveredBytes == 0 {
		t.Fatal("nothing verified without a checkpoint")
	}
	readAll(t, l, 0)
}

func TestIdempotentProducer(t *testing.T) {
	l := openTest(t, t.TempDir(), smallConfig(), nil)
	defer l.Close()
	idem := func(pid int64, epoch int16, seq int32, n int) []byte {
		s := dataSpec(n)
		s.pid, s.epoch, s.seq = pid, epoch, seq
		return makeBatch(t, s)
	}
	// A never-written partition refuses a producer starting mid-sequence.
	if _, _, err := l.Append(idem(1, 0, 5, 1), AppendOptions{}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("first seq 5 on empty partition: %v", err)
	}
	var bases []int64
	for i := range 7 {
		bases = append(bases, mustAppend(t, l, idem(1, 0, int32(i*3), 3)).BaseOffset)
	}
	// The last five batches are recognised, with their original offsets.
	for i := 2; i < 7; i++ {
		res, _, err := l.Append(idem(1, 0, int32(i*3), 3), AppendOptions{})
		if err != nil || !res.Duplicate || res.BaseOffset != bases[i] {
			t.Fatalf("retry of batch %d: %+v, %v", i, res, err)
		}
	}
	leo := l.LogEndOffset()
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"gap", idem(1, 0, 22, 1), ErrOutOfOrderSequence},
		{"too old to dedupe", idem(1, 0, 0, 3), ErrOutOfOrderSequence},
		{"negative epoch", idem(1, -1, 21, 1), ErrInvalidRecord},
		{"new epoch mid-sequence", idem(1, 1, 4, 1), ErrOutOfOrderSequence},
	} {
		if _, _, err := l.Append(c.b, AppendOptions{}); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if l.LogEndOffset() != leo {
		t.Fatal("rejected batches were written")
	}
	mustAppend(t, l, idem(1, 0, 21, 1))
	mustAppend(t, l, idem(1, 1, 0, 1)) // epoch bump restarts at 0
	if _, _, err := l.Append(idem(1, 0, 22, 1), AppendOptions{}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("fenced epoch: %v", err)
	}
	// A producer the (non-empty) log has no state for may start anywhere
	// (Kafka 2.5+).
	mustAppend(t, l, idem(2, 0, 1000, 1))
	// Sequences wrap at MaxInt32.
	mustAppend(t, l, idem(3, 0, math.MaxInt32-1, 2))
	mustAppend(t, l, idem(3, 0, 0, 1))
}

// Producer state is rebuilt from the log after a crash: part from the
// checkpoint, part replayed from the tail.
func TestProducerStateRebuiltAfterCrash(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, smallConfig(), nil)
	idem := func(seq int32) []byte {
		s := dataSpec(2)
		s.pid, s.epoch, s.seq = 42, 3, seq
		return makeBatch(t, s)
	}
	var bases []int64
	for i := range 4 {
		bases = append(bases, mustAppend(t, l, idem(int32(2*i))).BaseOffset)
		if i == 1 {
			l.Flush() // checkpoint holds the state after two batches
		}
	}
	crash(l)
	l = openTest(t, dir, smallConfig(), nil)
	defer l.Close()
	for i := range 4 {
		res, _, err := l.Append(idem(int32(2*i)), AppendOptions{})
		if err != nil || !res.Duplicate || res.BaseOffset != bases[i] {
			t.Fatalf("retry %d after crash: %+v %v", i, res, err)
		}
	}
	if _, _, err := l.Append(idem(10), AppendOptions{}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after crash: %v", err)
	}
	mustAppend(t, l, idem(8))
}

func TestTransactionsLSO(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, smallConfig(), nil)
	mustAppend(t, l, makeBatch(t, dataSpec(2)))
	txn := dataSpec(2)
	txn.pid, txn.epoch, txn.seq, txn.txn = 9, 0, 0, true
	mustAppend(t, l, makeBatch(t, txn))
	if lso := l.LastStableOffset(); lso != 2 {
		t.Fatalf("lso %d with an open transaction at 2", lso)
	}
	abort := dataSpec(1)
	abort.pid, abort.epoch, abort.control = 9, 0, 0
	if _, _, err := l.Append(makeBatch(t, abort), AppendOptions{AllowControl: true}); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		t.Helper()
		if lso, hw := l.LastStableOffset(), l.HighWatermark(); lso != hw {
			t.Fatalf("lso %d hw %d after abort", lso, hw)
		}
		got := l.AbortedTransactions(0, 100)
		if len(got) != 1 || got[0] != (AbortedTxn{ProducerID: 9, FirstOffset: 2, LastOffset: 4}) {
			t.Fatalf("aborted %+v", got)
		}
	}
	check(l)
	crash(l)
	l = openTest(t, dir, smallConfig(), nil)
	defer l.Close()
	check(l)
}

func TestTimestampLookups(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 2 << 10
	cfg.IndexIntervalBytes = 200
	dir := t.TempDir()
	l := openTest(t, dir, cfg, nil)
	base := int64(1_700_000_000_000)
	for i := range 100 { // batch i: offsets 3i..3i+2, timestamps base+10*(3i)+{0,10,20}
		sp := dataSpec(3)
		sp.baseTs, sp.tsStep = base+int64(30*i), 10
		sp.zstd = i%10 == 7
		mustAppend(t, l, makeBatch(t, sp))
	}
	check := func(l *Log) {
		t.Helper()
		for off := int64(0); off < 300; off++ {
			ts := base + 10*off
			want := off
			if (off/3)%10 == 7 {
				want = off / 3 * 3 // compressed batches answer with their base
			}
			got, gotTs, err := l.OffsetForTimestamp(ts - 5)
			if err != nil || got != want {
				t.Fatalf("ts for offset %d: got %d (ts %d), %v; want %d", off, got, gotTs, err, want)
			}
		}
		if o, ts, _ := l.OffsetForTimestamp(base + 10_000); o != -1 || ts != -1 {
			t.Fatalf("timestamp past the end: %d %d", o, ts)
		}
		if o, ts := l.MaxTimestamp(); o != 299 || ts != base+2990 {
			t.Fatalf("max timestamp %d at %d", ts, o)
		}
	}
	check(l)
	l.Close()
	l = openTest(t, dir, cfg, nil)
	defer l.Close()
	check(l)
}

// A failed write (disk full) leaves no partial batch and the log takes
// appends again once space returns.
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, smallConfig(), nil)
	mustAppend(t, l, makeBatch(t, dataSpec(2)))
	size := l.Size()
	real := l.writeAt
	l.writeAt = func(f *os.File, b []byte, off int64) (int, error) {
		n, _ := real(f, b[:len(b)/2], off) // half lands, then ENOSPC
		return n, os.NewSyscallError("pwrite", syscall.ENOSPC)
	}
	_, _, err := l.Append(makeBatch(t, dataSpec(2)), AppendOptions{})
	if !errors.Is(err, ErrStorage) {
		t.Fatalf("append on full disk: %v", err)
	}
	if fi, _ := os.Stat(segPaths(t, dir)[0]); fi.Size() != size || l.LogEndOffset() != 2 {
		t.Fatalf("partial batch left: file %d bytes, want %d; leo %d", fi.Size(), size, l.LogEndOffset())
	}
	l.writeAt = real
	if res := mustAppend(t, l, makeBatch(t, dataSpec(2))); res.BaseOffset != 2 {
		t.Fatalf("append after space returned at %d", res.BaseOffset)
	}
	crash(l)
	l = openTest(t, dir, smallConfig(), nil)
	defer l.Close()
	if hs := batchesOf(t, readAll(t, l, 0)); len(hs) != 2 || l.recoveredBytes == 0 && l.LogEndOffset() != 4 {
		t.Fatalf("after reopen %d batches, leo %d", len(hs), l.LogEndOffset())
	}
}

// Under FsyncAlways the high watermark moves only when the data is durable.
func TestFsyncAlwaysHoldsHighWatermark(t *testing.T) {
	// A Syncer whose goroutine is not running: rounds happen only when the
	// test runs them.
	s := &Syncer{policy: FsyncAlways, dirty: map[*Log]struct{}{}, kick: make(chan struct{}, 1)}
	l := openTest(t, t.TempDir(), smallConfig(), s)
	defer l.Close()
	_, durable, err := l.Append(makeBatch(t, dataSpec(4)), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wait := l.Wait(0)
	select {
	case <-durable:
		t.Fatal("acknowledged before fsync")
	case <-wait:
		t.Fatal("high watermark moved before fsync")
	default:
	}
	if r, _ := l.Read(0, 1000); l.HighWatermark() != 0 || r.Size != 0 {
		t.Fatalf("hw %d, readable %d bytes before fsync", l.HighWatermark(), r.Size)
	}
	s.round()
	if err := <-durable; err != nil {
		t.Fatal(err)
	}
	<-wait
	if l.HighWatermark() != 4 {
		t.Fatalf("hw %d after fsync", l.HighWatermark())
	}
}

func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	unlock, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockDir(dir); !errors.Is(err, ErrDirLocked) {
		t.Fatalf("second lock: %v", err)
	} else if !bytes.Contains([]byte(err.Error()), []byte("pid")) {
		t.Fatalf("error does not name the holder: %v", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	unlock, err = LockDir(dir)
	if err != nil {
		t.Fatalf("relock: %v", err)
	}
	unlock()
}

func TestCheckpointRoundTrip(t *testing.T) {
	ps := newProducerState()
	h := batchHeader{producerID: 5, producerEpoch: 2, baseSequence: 10, lastOffsetDelta: 3, baseOffset: 100, attributes: attrTransactional}
	ps.update(&h, -1)
	c := checkpoint{clean: true, segBase: 64, pos: 4096, next: 104, ps: ps, maxTs: 7, maxTsOff: 101, firstTs: 3, sinceIndex: 99}
	b := c.encode()
	got, err := decodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	e := got.ps.entries[5]
	if !got.clean || got.next != 104 || got.sinceIndex != 99 || e == nil || e.txnFirst != 100 || e.batches[0].lastSeq != 13 {
		t.Fatalf("decoded %+v %+v", got, e)
	}
	b[20] ^= 1
	if _, err := decodeCheckpoint(b); err == nil {
		t.Fatal("damaged checkpoint accepted")
	}
}
