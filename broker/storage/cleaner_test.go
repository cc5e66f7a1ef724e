package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kv is one record of a keyed test batch; a nil value is a tombstone.
type kv struct {
	key, value []byte
}

func kvs(pairs ...string) []kv {
	var out []kv
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, kv{key: []byte(pairs[i]), value: []byte(pairs[i+1])})
	}
	return out
}

// keyedSpec describes a keyed batch: codec, producer fields, txn.
type keyedSpec struct {
	codec int
	pid   int64
	epoch int16
	seq   int32
	txn   bool
	ts    int64
}

func plainKeyed() keyedSpec { return keyedSpec{pid: -1, epoch: -1, seq: -1} }

// makeKeyed encodes a batch of records as a producer sends it, compressed
// with the spec's codec (our compress, which readRecords checks with
// franz-go's decompressor and kmsg's decoding).
func makeKeyed(t testing.TB, s keyedSpec, recs []kv) []byte {
	t.Helper()
	if s.ts == 0 {
		s.ts = time.Now().UnixMilli()
	}
	var raw []byte
	for i, r := range recs {
		kr := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Key: r.key, Value: r.value}
		raw = append(raw, encodeRecord(kr)...)
	}
	body, err := compressRecords(s.codec, raw)
	if err != nil {
		t.Fatal(err)
	}
	attrs := int16(s.codec)
	if s.txn {
		attrs |= attrTransactional
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  s.ts, MaxTimestamp: s.ts + int64(len(recs)-1),
		ProducerID: s.pid, ProducerEpoch: s.epoch, FirstSequence: s.seq,
		NumRecords: int32(len(recs)), Records: body,
	}
	b.Length = int32(batchHeaderSize - lengthPrefix + len(body))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[offCRC:], crc32c(out[offAttributes:]))
	return out
}

// makeMarker encodes a commit (1) or abort (0) marker of pid.
func makeMarker(t testing.TB, pid int64, epoch int16, ctl int16) []byte {
	s := dataSpec(1)
	s.pid, s.epoch, s.control = pid, epoch, ctl
	s.txn = true
	s.baseTs = time.Now().UnixMilli()
	return makeBatch(t, s)
}

// seen is one record read back: offset, key, value (nil: tombstone),
// absolute timestamp.
type seen struct {
	off   int64
	key   string
	value []byte
	ts    int64
}

// readRecords reads the whole log from its start and decodes every record
// with franz-go (an independent decoder: kgo's decompressor, kmsg's
// records), checking CRCs.
func readRecords(t testing.TB, l *Log) []seen {
	t.Helper()
	b := readAll(t, l, l.LogStartOffset())
	var out []seen
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("kmsg cannot read a stored batch: %v", err)
		}
		size := int(rb.Length) + lengthPrefix
		h := parseHeader(b)
		if got := crc32c(b[offAttributes:size]); got != uint32(rb.CRC) {
			t.Fatalf("batch at %d: bad CRC", rb.FirstOffset)
		}
		if rb.Attributes&attrControl == 0 {
			recs, err := kgo.DefaultDecompressor().Decompress(b[batchHeaderSize:size], kgo.CompressionCodecType(h.compression()))
			if err != nil {
				t.Fatal(err)
			}
			for i := int32(0); i < rb.NumRecords; i++ {
				var r kmsg.Record
				if err := r.ReadFrom(recs); err != nil {
					t.Fatalf("kmsg cannot read record %d of batch %d: %v", i, rb.FirstOffset, err)
				}
				n := len(encodeRecord(r))
				recs = recs[n:]
				out = append(out, seen{off: rb.FirstOffset + int64(r.OffsetDelta), key: string(r.Key), value: r.Value, ts: rb.FirstTimestamp + r.TimestampDelta64})
			}
			if len(recs) != 0 {
				t.Fatalf("batch %d: %d bytes after its records", rb.FirstOffset, len(recs))
			}
		}
		b = b[size:]
	}
	return out
}

func compactConfig() LogConfig {
	c := smallConfig()
	c.Compact = true
	c.SegmentBytes = 600
	c.MinCleanableDirtyRatio = 0.01
	return c
}

// history appends versions of keys k0..k(n-1): version v of every key,
// then the next version, with tombstones for keys in dead at the end. It
// returns the expected latest (offset, value) per live key.
func history(t testing.TB, l *Log, s keyedSpec, keys, versions int, dead map[int]bool) map[string]seen {
	t.Helper()
	want := map[string]seen{}
	for v := 0; v < versions; v++ {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("k%d", k)
			val := []byte(fmt.Sprintf("v%d-of-%s", v, key))
			if v == versions-1 && dead[k] {
				val = nil
			}
			res := mustAppend(t, l, makeKeyed(t, s, []kv{{key: []byte(key), value: val}}))
			want[key] = seen{off: res.BaseOffset, key: key, value: val}
			if s.seq >= 0 {
				s.seq++
			}
		}
	}
	return want
}

// activeBase is the base offset of the log's active segment.
func activeBase(l *Log) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().base
}

// checkCompacted checks what a consumer reading from the start relies on:
// every live key's latest value at its original offset, no older value of
// a key below the active segment, offsets increasing.
func checkCompacted(t testing.TB, l *Log, want map[string]seen, tombstonesGone bool) {
	t.Helper()
	got := readRecords(t, l)
	act := activeBase(l)
	last := map[string]seen{}
	count := map[string]int{}
	prev := int64(-1)
	for _, r := range got {
		if r.off <= prev {
			t.Fatalf("offset %d after %d", r.off, prev)
		}
		prev = r.off
		if r.off < act {
			count[r.key]++
		}
		last[r.key] = r
	}
	for k, w := range want {
		g, ok := last[k]
		if w.value == nil {
			if ok && g.value != nil {
				t.Fatalf("key %s: deleted but reads %q at %d", k, g.value, g.off)
			}
			if tombstonesGone && ok && g.off < act {
				t.Fatalf("key %s: tombstone at %d still there after delete.retention.ms", k, g.off)
			}
			continue
		}
		if !ok || g.off != w.off || string(g.value) != string(w.value) {
			t.Fatalf("key %s: want %q at %d, got %+v (present %v)", k, w.value, w.off, g, ok)
		}
	}
	for k, n := range count {
		if n > 1 {
			t.Fatalf("key %s has %d versions outside the active segment", k, n)
		}
	}
}

func mustClean(t testing.TB, l *Log, o CleanOptions) CleanResult {
	t.Helper()
	o.Force = true
	res, err := l.Clean(o)
	if err != nil {
		t.Fatalf("clean: %v", err)
	}
	if !res.Cleaned {
		t.Fatalf("nothing cleaned: %+v", res)
	}
	return res
}

func TestCleanKeepsLatestValueAtItsOffset(t *testing.T) {
	for _, codec := range []int{codecNone, codecGzip, codecSnappy, codecLz4, codecZstd} {
		t.Run(fmt.Sprintf("codec%d", codec), func(t *testing.T) {
			dir := t.TempDir()
			cfg := compactConfig()
			l := openTest(t, dir, cfg, nil)
			s := plainKeyed()
			s.codec = codec
			want := history(t, l, s, 12, 8, map[int]bool{3: true, 7: true})
			before := l.Size()
			res := mustClean(t, l, CleanOptions{})
			if res.BytesAfter >= res.BytesBefore || l.Size() >= before {
				t.Fatalf("nothing reclaimed: %+v, size %d -> %d", res, before, l.Size())
			}
			checkCompacted(t, l, want, false)
			st := l.CleanerStats()
			if st.Runs != 1 || st.BytesReclaimed != res.BytesBefore-res.BytesAfter {
				t.Fatalf("stats %+v after %+v", st, res)
			}
			// Past delete.retention.ms after the cleaning that kept them,
			// the tombstones go.
			later := time.Now().Add(time.Duration(cfg.DeleteRetentionMs+1) * time.Millisecond)
			mustClean(t, l, CleanOptions{Now: later})
			checkCompacted(t, l, want, true)
			// Reopened (recovery reads the cleaned segments), same answer.
			l.Close()
			os.Remove(filepath.Join(dir, checkpointFile)) // verify every segment
			l2 := openTest(t, dir, cfg, nil)
			checkCompacted(t, l2, want, true)
			mustAppend(t, l2, makeKeyed(t, plainKeyed(), kvs("k0", "after")))
		})
	}
}

func TestCleanRefusesKeylessProduce(t *testing.T) {
	l := openTest(t, t.TempDir(), compactConfig(), nil)
	for _, codec := range []int{codecNone, codecZstd} {
		s := plainKeyed()
		s.codec = codec
		_, _, err := l.Append(makeKeyed(t, s, []kv{{key: []byte("a"), value: []byte("1")}, {key: nil, value: []byte("2")}}), AppendOptions{})
		if !errors.Is(err, ErrInvalidRecord) || !errors.Is(err, ErrKeyless) {
			t.Fatalf("codec %d: keyless record to a compacted log: %v", codec, err)
		}
	}
	if l.LogEndOffset() != 0 {
		t.Fatal("a refused batch was appended")
	}
	if n := l.CleanerStats().KeylessRefused; n != 2 {
		t.Fatalf("%d keyless refusals counted, want 2", n)
	}
}

func TestCleanKeepsProducerSequences(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	l := openTest(t, dir, cfg, nil)
	idem := keyedSpec{pid: 7, epoch: 0, seq: 0}
	want := history(t, l, idem, 6, 5, nil)
	// The producer's last batch (k5) is superseded by a plain write, so
	// the cleaner keeps it only as an empty batch.
	lastIdem := makeKeyed(t, keyedSpec{pid: 7, epoch: 0, seq: 30}, kvs("k5", "idem-last"))
	orig := mustAppend(t, l, lastIdem).BaseOffset
	for i := 0; i < 20; i++ {
		r := mustAppend(t, l, makeKeyed(t, plainKeyed(), kvs("k5", fmt.Sprint("plain", i))))
		want["k5"] = seen{off: r.BaseOffset, key: "k5", value: []byte(fmt.Sprint("plain", i))}
	}
	mustClean(t, l, CleanOptions{})
	checkCompacted(t, l, want, false)
	retry := func(l *Log) {
		t.Helper()
		res, _, err := l.Append(makeKeyed(t, keyedSpec{pid: 7, epoch: 0, seq: 30}, kvs("k5", "idem-last")), AppendOptions{})
		if err != nil || !res.Duplicate || res.BaseOffset != orig {
			t.Fatalf("retry of the producer's last batch after cleaning: %+v %v (want duplicate of %d)", res, err, orig)
		}
		if _, _, err := l.Append(makeKeyed(t, keyedSpec{pid: 7, epoch: 0, seq: 33}, kvs("k0", "gap")), AppendOptions{}); !errors.Is(err, ErrOutOfOrderSequence) {
			t.Fatalf("sequence gap after cleaning: %v", err)
		}
	}
	retry(l)
	// Recovery that replays every header (no checkpoint) rebuilds the
	// producer from the kept empty batch.
	crash(l)
	os.Remove(filepath.Join(dir, checkpointFile))
	l2 := openTest(t, dir, cfg, nil)
	retry(l2)
	mustAppend(t, l2, makeKeyed(t, keyedSpec{pid: 7, epoch: 0, seq: 31}, kvs("k0", "next")))
}

// controlBatches counts the log's commit and abort markers.
func controlBatches(t testing.TB, l *Log) int {
	b := readAll(t, l, l.LogStartOffset())
	n := 0
	for _, h := range batchesOfCleaned(t, b) {
		if h.isControl() {
			n++
		}
	}
	return n
}

// batchesOfCleaned splits stored batches, accepting compacted ones.
func batchesOfCleaned(t testing.TB, b []byte) []batchHeader {
	var hs []batchHeader
	for len(b) > 0 {
		h := parseHeader(b)
		if crc32c(b[offAttributes:h.size()]) != h.crc {
			t.Fatalf("batch at %d: bad CRC", h.baseOffset)
		}
		hs = append(hs, h)
		b = b[h.size():]
	}
	return hs
}

func TestCleanRemovesAbortedTransactions(t *testing.T) {
	cfg := compactConfig()
	l := openTest(t, t.TempDir(), cfg, nil)
	txn := keyedSpec{pid: 9, epoch: 0, seq: 0, txn: true}
	mustAppend(t, l, makeKeyed(t, txn, kvs("a", "aborted", "b", "aborted")))
	mustAppendCtl(t, l, makeMarker(t, 9, 0, 0))
	txn.seq = 2
	c := mustAppend(t, l, makeKeyed(t, txn, kvs("a", "committed")))
	mustAppendCtl(t, l, makeMarker(t, 9, 0, 1))
	want := map[string]seen{"a": {off: c.BaseOffset, key: "a", value: []byte("committed")}}
	for k, v := range history(t, l, plainKeyed(), 10, 3, nil) {
		want[k] = v
	}
	if n := len(l.AbortedTransactions(0, l.HighWatermark())); n != 1 {
		t.Fatalf("%d aborted transactions before cleaning", n)
	}
	mustClean(t, l, CleanOptions{})
	for _, r := range readRecords(t, l) {
		if string(r.value) == "aborted" {
			t.Fatalf("aborted record at %d survived cleaning", r.off)
		}
	}
	checkCompacted(t, l, want, false)
	if n := controlBatches(t, l); n != 2 {
		t.Fatalf("%d markers after the first cleaning, want both kept", n)
	}
	// Second run: the abort marker has nothing left before it and gets a
	// delete horizon; past it, a third run removes it (and its entry).
	now := time.Now()
	mustClean(t, l, CleanOptions{Now: now})
	mustClean(t, l, CleanOptions{Now: now.Add(time.Duration(cfg.DeleteRetentionMs+1) * time.Millisecond)})
	if n := controlBatches(t, l); n != 1 {
		t.Fatalf("%d markers after delete.retention.ms, want the commit marker only", n)
	}
	if n := len(l.AbortedTransactions(0, l.HighWatermark())); n != 0 {
		t.Fatalf("%d aborted transactions listed after their marker went", n)
	}
	checkCompacted(t, l, want, false)
}

func mustAppendCtl(t testing.TB, l *Log, b []byte) {
	t.Helper()
	if _, _, err := l.Append(b, AppendOptions{AllowControl: true}); err != nil {
		t.Fatalf("append marker: %v", err)
	}
}

func TestCleanSkipsOpenTransactionsAndActiveSegment(t *testing.T) {
	cfg := compactConfig()
	l := openTest(t, t.TempDir(), cfg, nil)
	history(t, l, plainKeyed(), 4, 3, nil)
	open := keyedSpec{pid: 11, epoch: 0, seq: 0, txn: true}
	first := mustAppend(t, l, makeKeyed(t, open, kvs("k0", "open"))).BaseOffset
	history(t, l, plainKeyed(), 4, 6, nil)
	if _, err := l.Clean(CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	var opens, dupK1 int
	for _, r := range readRecords(t, l) {
		if string(r.value) == "open" {
			opens++
		}
		if r.key == "k1" && r.off > first {
			dupK1++
		}
	}
	if opens != 1 {
		t.Fatalf("record of the open transaction: %d copies", opens)
	}
	if dupK1 < 2 {
		t.Fatalf("records past the last stable offset were compacted (%d versions of k1 left)", dupK1)
	}
}

func TestCleanBoundedOffsetMapTakesSeveralRuns(t *testing.T) {
	cfg := compactConfig()
	l := openTest(t, t.TempDir(), cfg, nil)
	var recs []kv
	for i := 0; i < 1500; i++ {
		recs = append(recs, kv{key: []byte(fmt.Sprint("key", i)), value: []byte("x")})
	}
	want := map[string]seen{}
	for v := 0; v < 3; v++ {
		for i := 0; i < len(recs); i += 100 {
			res := mustAppend(t, l, makeKeyed(t, plainKeyed(), recs[i:i+100]))
			for j := 0; j < 100; j++ {
				want[string(recs[i+j].key)] = seen{off: res.BaseOffset + int64(j), key: string(recs[i+j].key), value: []byte("x")}
			}
		}
	}
	budget := int64(minMapSlots * mapSlotSize) // room for 921 keys
	runs := 0
	for ; runs < 20; runs++ {
		res, err := l.Clean(CleanOptions{DedupeBufferBytes: budget})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Cleaned {
			break
		}
	}
	if runs < 2 {
		t.Fatalf("a %d-byte map cleaned 4500 keyed records in %d run(s)", budget, runs)
	}
	checkCompacted(t, l, want, false)
}

// TestCleanWhileReadingAndAppending: reads that hold old segments across
// a swap still read them whole; appends and new reads go on during
// cleaning; ListOffsets by time and retention work on cleaned segments.
func TestCleanWhileReadingAndAppending(t *testing.T) {
	cfg := compactConfig()
	l := openTest(t, t.TempDir(), cfg, nil)
	base := time.Now().Add(-time.Hour).UnixMilli()
	s := plainKeyed()
	want := map[string]seen{}
	for i := 0; i < 80; i++ {
		s.ts = base + int64(i)*1000
		key := fmt.Sprint("k", i%8)
		r := mustAppend(t, l, makeKeyed(t, s, kvs(key, fmt.Sprint("v", i))))
		want[key] = seen{off: r.BaseOffset, key: key, value: []byte(fmt.Sprint("v", i))}
	}
	held, err := l.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	heldBytes, err := held.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 30; i++ {
			if _, _, err := l.Append(makeKeyed(t, plainKeyed(), kvs(fmt.Sprint("new", i), "x")), AppendOptions{}); err != nil {
				done <- err
				return
			}
			r, err := l.Read(l.LogStartOffset(), 4096)
			if err != nil {
				done <- err
				return
			}
			r.Release()
		}
		done <- nil
	}()
	mustClean(t, l, CleanOptions{})
	if err := <-done; err != nil {
		t.Fatalf("append or read during cleaning: %v", err)
	}
	again, err := held.AppendTo(nil)
	held.Release()
	if err != nil || string(again) != string(heldBytes) {
		t.Fatalf("a read held across the swap changed: %v", err)
	}
	checkLatest(t, l, want)
	// What was active when the run began was not cleaned; the next run
	// takes it.
	mustClean(t, l, CleanOptions{})
	checkCompacted(t, l, want, false)
	// ListOffsets by timestamp: the first kept record at or after ts.
	off, ts, err := l.OffsetForTimestamp(base + 75*1000)
	if err != nil || off != 75 || ts != base+75*1000 {
		t.Fatalf("offset for timestamp after cleaning: %d %d %v, want 75", off, ts, err)
	}
	// compact,delete: retention still removes whole cleaned segments.
	cfg.RetentionBytes = 1
	l.SetConfig(cfg)
	if err := l.ApplyRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	n := len(l.segs)
	l.mu.RUnlock()
	if n != 1 || l.LogStartOffset() != activeBase(l) {
		t.Fatalf("retention over cleaned segments left %d segments, start %d", n, l.LogStartOffset())
	}
}

func TestCleanStoppedLeavesTheLogAlone(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, compactConfig(), nil)
	history(t, l, plainKeyed(), 8, 5, nil)
	before := dirFiles(t, dir)
	stop := make(chan struct{})
	close(stop)
	res, err := l.Clean(CleanOptions{Force: true, Stop: stop})
	if err != nil || res.Cleaned {
		t.Fatalf("a stopped run: %+v %v", res, err)
	}
	sameSegments(t, "stopped", dirFiles(t, dir), before)
	// A hook failing after the cleaned files are written: same.
	l.cleanHook = func(stage string) error {
		if stage == "cleaned" {
			return errors.New("injected")
		}
		return nil
	}
	if _, err := l.Clean(CleanOptions{Force: true}); err == nil {
		t.Fatal("the injected failure was not reported")
	}
	sameSegments(t, "failed", dirFiles(t, dir), before)
	l.cleanHook = nil
	mustClean(t, l, CleanOptions{})
}

// TestCleanHonoursRatioAndLags: min.cleanable.dirty.ratio,
// min.compaction.lag.ms and max.compaction.lag.ms decide whether a run
// cleans.
func TestCleanHonoursRatioAndLags(t *testing.T) {
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0.99
	l := openTest(t, t.TempDir(), cfg, nil)
	s := plainKeyed()
	s.ts = time.Now().Add(-time.Hour).UnixMilli()
	history(t, l, s, 8, 4, nil)
	// First run: everything is dirty (ratio 1 > 0.99).
	if res, err := l.Clean(CleanOptions{}); err != nil || !res.Cleaned {
		t.Fatalf("dirty ratio 1 did not clean: %+v %v", res, err)
	}
	history(t, l, s, 8, 1, nil)
	if res, err := l.Clean(CleanOptions{}); err != nil || res.Cleaned || res.DirtyRatio <= 0 || res.DirtyRatio > 0.99 {
		t.Fatalf("a little new data below the ratio cleaned: %+v %v", res, err)
	}
	// max.compaction.lag.ms: the dirty records are an hour old.
	cfg.MaxCompactionLagMs = 60_000
	l.SetConfig(cfg)
	if res, err := l.Clean(CleanOptions{}); err != nil || !res.Cleaned {
		t.Fatalf("max.compaction.lag.ms exceeded did not clean: %+v %v", res, err)
	}
	// min.compaction.lag.ms: records younger than two hours stay dirty.
	cfg.MaxCompactionLagMs, cfg.MinCleanableDirtyRatio, cfg.MinCompactionLagMs = 0, 0, 2*3600_000
	l.SetConfig(cfg)
	history(t, l, s, 8, 3, nil)
	if res, err := l.Clean(CleanOptions{}); err != nil || res.Cleaned {
		t.Fatalf("records within min.compaction.lag.ms were cleaned: %+v %v", res, err)
	}
}

// TestCleanThenCrashBeforeCheckpoint: the cleaner merges the segment the
// last recovery checkpoint points into, and the process dies before a new
// checkpoint is written. Recovery must still replay the producer batches
// written after that checkpoint, which now live in the merged segment.
func TestCleanThenCrashBeforeCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	l := openTest(t, dir, cfg, nil)
	idem := keyedSpec{pid: 5, epoch: 0, seq: 0}
	history(t, l, idem, 4, 2, nil) // seq 0..7
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if err != nil {
		t.Fatal(err)
	}
	idem.seq = 8
	want := history(t, l, idem, 4, 6, nil) // seq 8..31, rolls several segments
	last := makeKeyed(t, keyedSpec{pid: 5, epoch: 0, seq: 32}, kvs("k0", "last"))
	lastOff := mustAppend(t, l, last).BaseOffset
	want["k0"] = seen{off: lastOff, key: "k0", value: []byte("last")}
	for i := 0; i < 30; i++ { // roll the idempotent writes out of the active segment
		mustAppend(t, l, makeKeyed(t, plainKeyed(), kvs(fmt.Sprint("filler", i), "x")))
	}
	merging := cfg
	merging.SegmentBytes = 1 << 20 // the cleaner merges every cleanable segment into one
	l.SetConfig(merging)
	mustClean(t, l, CleanOptions{})
	crash(l)
	if err := os.WriteFile(filepath.Join(dir, checkpointFile), old, 0o644); err != nil {
		t.Fatal(err)
	}
	l2 := openTest(t, dir, cfg, nil)
	checkLatest(t, l2, map[string]seen{"k0": want["k0"]})
	res, _, err := l2.Append(makeKeyed(t, keyedSpec{pid: 5, epoch: 0, seq: 32}, kvs("k0", "last")), AppendOptions{})
	if err != nil || !res.Duplicate || res.BaseOffset != lastOff {
		t.Fatalf("retry of the producer's last batch after recovery: %+v %v", res, err)
	}
	mustAppend(t, l2, makeKeyed(t, keyedSpec{pid: 5, epoch: 0, seq: 33}, kvs("k1", "next")))
}
