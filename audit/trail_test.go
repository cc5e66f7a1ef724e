package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
)

// countHooks counts what the trail reports.
type countHooks struct {
	written atomic.Int64
	mu      sync.Mutex
	dropped map[string]int
}

func (h *countHooks) AuditWritten() { h.written.Add(1) }
func (h *countHooks) AuditDropped(reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dropped == nil {
		h.dropped = map[string]int{}
	}
	h.dropped[reason]++
}
func (h *countHooks) drops(reason string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropped[reason]
}

// checkFor polls cond until it holds or the deadline passes.
func checkFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func auditCfg(level, mode string, queue int) configs.Audit {
	c := configs.Default().Audit
	c.Level, c.Mode, c.Queue = level, mode, queue
	return c
}

func reqRecord(i int) *Record {
	acks := int16(-1)
	return &Record{
		Time: time.Unix(1700000000, int64(i)*1000), Event: EventRequest, ConnID: uint64(i), Listener: "default",
		ClientAddr: "127.0.0.1:5000", ClientID: "console-producer", API: "Produce", Key: 0, Version: 9, Correlation: int32(i),
		Topics:   []Topic{{Name: "orders", Partitions: []Partition{{Partition: 0, Records: 1, Bytes: 27, Offset: int64(i)}}}},
		Decision: Forwarded, LatencyMs: 1.25, BytesIn: 100, BytesOut: 50, Backend: "0", Acks: &acks,
	}
}

// syncBuf is a concurrency-safe bytes.Buffer.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuf) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSuffix(s.b.String(), "\n"), "\n")
}

func TestTrailWritesFilteredRecords(t *testing.T) {
	var out syncBuf
	h := &countHooks{}
	cfg := auditCfg(configs.AuditFull, configs.AuditBestEffort, 100)
	cfg.Filter.APINot = []string{"Metadata"}
	tr, err := New(cfg, h, WithSink(&out))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := tr.Log(reqRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	md := reqRecord(99)
	md.API, md.Key = "Metadata", 3
	tr.Log(md)
	tr.Log(&Record{Time: time.Now(), Event: EventDisconnect, Listener: "default", CloseReason: "eof"})
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	lines := out.lines()
	if len(lines) != 6 || h.written.Load() != 6 {
		t.Fatalf("wrote %d lines, %d counted; want 6:\n%s", len(lines), h.written.Load(), strings.Join(lines, "\n"))
	}
	var got Record
	if err := json.Unmarshal([]byte(lines[2]), &got); err != nil {
		t.Fatal(err)
	}
	if got.Correlation != 2 || got.Topics[0].Partitions[0].Offset != 2 || got.API != "Produce" {
		t.Fatalf("third line = %s", lines[2])
	}
	if !strings.Contains(lines[5], `"close_reason":"eof"`) || strings.Contains(lines[5], `"key"`) {
		t.Fatalf("disconnect line = %s", lines[5])
	}
}

func TestTrailSummaryLeavesOutDetails(t *testing.T) {
	var out syncBuf
	tr, err := New(auditCfg(configs.AuditSummary, configs.AuditBestEffort, 10), nil, WithSink(&out))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Level() != Summary {
		t.Fatalf("level = %v", tr.Level())
	}
	tr.Log(reqRecord(1))
	tr.Close()
	line := out.lines()[0]
	if strings.Contains(line, "topics") || strings.Contains(line, "acks") || !strings.Contains(line, `"api":"Produce"`) {
		t.Fatalf("summary line = %s", line)
	}
}

// blockingWriter blocks every Write until released.
type blockingWriter struct {
	release chan struct{}
	n       atomic.Int64
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	<-w.release
	w.n.Add(1)
	return len(p), nil
}

func TestBestEffortNeverBlocksOnStuckSink(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	h := &countHooks{}
	tr, err := New(auditCfg(configs.AuditFull, configs.AuditBestEffort, 8), h, WithSink(w))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10000 {
			tr.Log(reqRecord(i))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Log blocked on a stuck sink in best-effort mode")
	}
	// At most the queue plus the batch the writer holds can be accepted.
	if d := h.drops(DropQueueFull); d < 10000-8-maxWriteBytes/100 {
		t.Fatalf("dropped %d of 10000 with a queue of 8", d)
	}
	close(w.release)
	tr.Close()
	if got := h.written.Load() + int64(h.drops(DropQueueFull)); got != 10000 {
		t.Fatalf("written %d + dropped %d != 10000", h.written.Load(), h.drops(DropQueueFull))
	}
}

// failingWriter fails while fail is set.
type failingWriter struct {
	fail atomic.Bool
	buf  syncBuf
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.fail.Load() {
		return 0, errors.New("no space left on device")
	}
	return w.buf.Write(p)
}

func TestBestEffortSinkFailureCountsDrops(t *testing.T) {
	w := &failingWriter{}
	w.fail.Store(true)
	h := &countHooks{}
	tr, err := New(auditCfg(configs.AuditFull, configs.AuditBestEffort, 100), h, WithSink(w))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Healthy(); !errors.Is(err, ErrSinkFailed) {
		t.Fatalf("Healthy = %v, want ErrSinkFailed (the open probe failed)", err)
	}
	for i := range 20 {
		if err := tr.Log(reqRecord(i)); err != nil {
			t.Fatalf("best-effort Log returned %v", err)
		}
	}
	checkFor(t, 5*time.Second, "20 sink_error drops", func() bool { return h.drops(DropSinkError) == 20 })
	w.fail.Store(false)
	tr.Log(reqRecord(21))
	checkFor(t, 5*time.Second, "recovery", func() bool { return h.written.Load() == 1 && tr.Healthy() == nil })
}

func TestStrictRefusesWhileSinkFails(t *testing.T) {
	w := &failingWriter{}
	h := &countHooks{}
	tr, err := New(auditCfg(configs.AuditFull, configs.AuditStrict, 100), h, WithSink(w), WithRetryInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Log(reqRecord(1)); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 5*time.Second, "first record written", func() bool { return h.written.Load() == 1 })
	w.fail.Store(true)
	// The writer may see the failure before Log returns: either answer
	// is right, and the record is queued in both cases.
	if err := tr.Log(reqRecord(2)); err != nil && !errors.Is(err, ErrSinkFailed) {
		t.Fatalf("Log as the sink fails: %v", err)
	}
	checkFor(t, 5*time.Second, "the failure to show", func() bool { return tr.Healthy() != nil })
	if err := tr.Healthy(); !errors.Is(err, ErrSinkFailed) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Healthy = %v", err)
	}
	// A record logged while failing (its request was already forwarded)
	// is queued, and the caller is told to refuse what comes next.
	if err := tr.Log(reqRecord(3)); !errors.Is(err, ErrSinkFailed) {
		t.Fatalf("strict Log while failing = %v, want ErrSinkFailed", err)
	}
	// Records accepted before and during the failure are retried, not lost.
	w.fail.Store(false)
	checkFor(t, 5*time.Second, "retry and recovery", func() bool { return tr.Healthy() == nil && h.written.Load() == 3 })
	if err := tr.Log(reqRecord(4)); err != nil {
		t.Fatalf("Log after recovery: %v", err)
	}
	checkFor(t, 5*time.Second, "record 4", func() bool { return strings.Contains(w.buf.String(), `"correlation":4`) })
	for _, c := range []string{`"correlation":2,`, `"correlation":3,`} {
		if strings.Count(w.buf.String(), c) != 1 {
			t.Fatalf("%s written %d times, want once:\n%s", c, strings.Count(w.buf.String(), c), w.buf.String())
		}
	}
	if h.drops(DropSinkError) != 0 {
		t.Fatalf("strict mode dropped %d records", h.drops(DropSinkError))
	}
}

func TestStrictUnwritablePathRecovers(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "notadir")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := auditCfg(configs.AuditSummary, configs.AuditStrict, 10)
	cfg.Sink.File = filepath.Join(blocker, "audit.jsonl") // a file where a directory must be
	tr, err := New(cfg, nil, WithRetryInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Healthy(); !errors.Is(err, ErrSinkFailed) {
		t.Fatalf("Healthy with an unwritable path = %v, want ErrSinkFailed", err)
	}
	os.Remove(blocker)
	checkFor(t, 5*time.Second, "the probe to find the path writable", func() bool { return tr.Healthy() == nil })
	if err := tr.Log(reqRecord(2)); err != nil {
		t.Fatal(err)
	}
}

func TestFileSinkRotates(t *testing.T) {
	dir := t.TempDir()
	cfg := auditCfg(configs.AuditFull, configs.AuditStrict, 1000)
	cfg.Sink = configs.AuditSink{File: filepath.Join(dir, "audit.jsonl"), MaxSize: configs.MiB, Keep: 2}
	h := &countHooks{}
	tr, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	// About 3.5 MiB of records: at least three rotations at 1 MiB.
	rec := reqRecord(0)
	rec.ClientID = strings.Repeat("x", 700)
	n := 3_500_000 / len(rec.AppendJSON(nil, true))
	for i := range n {
		r := *rec
		r.Correlation = int32(i)
		if err := tr.Log(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if h.written.Load() != int64(n) {
		t.Fatalf("written %d of %d", h.written.Load(), n)
	}
	checkFor(t, 5*time.Second, "lumberjack to remove old backups", func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "audit*.jsonl"))
		return len(files) == 3
	})
	files, _ := filepath.Glob(filepath.Join(dir, "audit*.jsonl"))
	last := -1
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > int64(configs.MiB) {
			t.Fatalf("%s is %d bytes, above max_size", f, fi.Size())
		}
		if filepath.Base(f) == "audit.jsonl" {
			last = lastCorrelation(t, f)
		}
	}
	if last != n-1 {
		t.Fatalf("current file ends with correlation %d, want %d", last, n-1)
	}
}

func lastCorrelation(t *testing.T, path string) int {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var r Record
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: bad line %q: %v", path, sc.Text(), err)
		}
	}
	return int(r.Correlation)
}

func TestSubscribersNeverBlock(t *testing.T) {
	h := &countHooks{}
	tr, err := New(auditCfg(configs.AuditOff, configs.AuditBestEffort, 10), h)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.Level() != Off || tr.Wants("default", 0, "x") {
		t.Fatal("an off trail with no subscriber wants records")
	}
	f, _ := FilterFromQuery(map[string][]string{"topic": {"orders"}})
	stuck, cancelStuck := tr.Subscribe(nil) // never read
	defer cancelStuck()
	live, cancel := tr.Subscribe(f)
	if tr.Level() != Full || !tr.Wants("default", 0, "x") {
		t.Fatal("a subscriber must raise the level to full")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 3 * subscriberBuffer {
			r := reqRecord(i)
			if i%2 == 1 {
				r.Topics[0].Name = "other"
			}
			tr.Log(r)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Log blocked on a subscriber that never reads")
	}
	got := 0
	for len(live) > 0 {
		r := <-live
		if r.Topics[0].Name != "orders" {
			t.Fatalf("filtered subscriber got topic %q", r.Topics[0].Name)
		}
		got++
	}
	if got != subscriberBuffer || len(stuck) != subscriberBuffer {
		t.Fatalf("live got %d, stuck holds %d; want %d each", got, len(stuck), subscriberBuffer)
	}
	if d := h.drops(DropTapSlow); d != 3*subscriberBuffer-subscriberBuffer+(3*subscriberBuffer/2-subscriberBuffer) {
		t.Fatalf("tap_slow drops = %d", d)
	}
	cancel()
	cancel() // twice is fine
	if _, ok := <-live; ok {
		t.Fatal("channel still open after cancel")
	}
}

func TestCloseEndsSubscribersAndStrictLog(t *testing.T) {
	tr, err := New(auditCfg(configs.AuditFull, configs.AuditStrict, 10), nil, WithSink(&syncBuf{}))
	if err != nil {
		t.Fatal(err)
	}
	ch, cancel := tr.Subscribe(nil)
	defer cancel()
	tr.Close()
	if _, ok := <-ch; ok {
		t.Fatal("subscriber channel open after Close")
	}
	if err := tr.Log(reqRecord(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("strict Log after Close = %v", err)
	}
	var nilTrail *Trail
	if nilTrail.Log(reqRecord(1)) != nil || nilTrail.Level() != Off || nilTrail.Close() != nil || nilTrail.Healthy() != nil || nilTrail.Wants("a", 0, "") {
		t.Fatal("nil trail misbehaves")
	}
	if ch, _ := nilTrail.Subscribe(nil); ch == nil {
		t.Fatal("nil trail Subscribe returned a nil channel")
	} else if _, ok := <-ch; ok {
		t.Fatal("nil trail Subscribe channel is open")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	r := reqRecord(7)
	r.ClientID = "evil\"\\\n\x01<tag>&\u2028\xff"
	r.TLSSubject = "CN=client,O=Ünïcode"
	r.ErrorCodes = []int16{6, 3}
	r.Resources = []string{"topic:a"}
	r.ThrottleMs = 120
	r.UpstreamNodes = []int32{0, 2, 5}
	b := r.AppendJSON(nil, true)
	if !json.Valid(b) {
		t.Fatalf("invalid JSON: %s", b)
	}
	var got Record
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := *r
	want.ClientID = "evil\"\\\n\x01<tag>&\u2028\ufffd" // invalid UTF-8 becomes U+FFFD, as with encoding/json
	want.Time = want.Time.UTC()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\ngot  %+v\nwant %+v", got, want)
	}
	// Key 0 and partition 0 are real values: they must be written.
	if !strings.Contains(string(b), `"key":0`) || !strings.Contains(string(b), `"partition":0`) {
		t.Fatalf("zero key or partition left out: %s", b)
	}
	// And encoding/json agrees on the string escaping.
	std, _ := json.Marshal(r.ClientID)
	if !strings.Contains(string(b), `"client_id":`+string(std)) {
		t.Fatalf("escaping differs from encoding/json: %s vs %s", b, std)
	}
}

// In strict mode a full queue blocks Log instead of dropping.
func TestStrictBlocksOnFullQueue(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	h := &countHooks{}
	tr, err := New(auditCfg(configs.AuditFull, configs.AuditStrict, 2), h, WithSink(w))
	if err != nil {
		t.Fatal(err)
	}
	var logged atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			if err := tr.Log(reqRecord(i)); err != nil {
				t.Errorf("Log: %v", err)
			}
			logged.Add(1)
		}
	}()
	// The writer holds what it took before the sink stuck, the queue holds
	// 2 more; the rest waits.
	checkFor(t, 5*time.Second, "Log to block", func() bool {
		n := logged.Load()
		time.Sleep(20 * time.Millisecond)
		return n == logged.Load() && n < 50
	})
	if h.drops(DropQueueFull) != 0 {
		t.Fatal("strict mode dropped records")
	}
	close(w.release)
	<-done
	tr.Close()
	if h.written.Load() != 50 {
		t.Fatalf("written %d of 50", h.written.Load())
	}
}

func TestPartitionWithoutOffset(t *testing.T) {
	r := &Record{Event: EventRequest, API: "Fetch", Key: 1, Topics: []Topic{{Name: "t", Partitions: []Partition{{Partition: 0, Offset: NoOffset}, {Partition: 1, Offset: 0}}}}}
	b := r.AppendJSON(nil, true)
	if strings.Count(string(b), `"offset"`) != 1 {
		t.Fatalf("offset written for NoOffset, or not for offset 0: %s", b)
	}
	var got Record
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Topics[0].Partitions[0].Offset != NoOffset || got.Topics[0].Partitions[1].Offset != 0 {
		t.Fatalf("decoded offsets %+v", got.Topics[0].Partitions)
	}
}

// A file sink at a path that cannot be created: best-effort keeps
// accepting records and counts them as dropped.
func TestBestEffortUnwritablePath(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "notadir")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := auditCfg(configs.AuditFull, configs.AuditBestEffort, 100)
	cfg.Sink.File = filepath.Join(blocker, "audit.jsonl")
	h := &countHooks{}
	tr, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if !errors.Is(tr.Healthy(), ErrSinkFailed) {
		t.Fatalf("Healthy = %v", tr.Healthy())
	}
	for i := range 10 {
		if err := tr.Log(reqRecord(i)); err != nil {
			t.Fatalf("best-effort Log = %v", err)
		}
	}
	checkFor(t, 5*time.Second, "10 sink_error drops", func() bool { return h.drops(DropSinkError) == 10 })
	if h.written.Load() != 0 {
		t.Fatalf("written %d to an unwritable path", h.written.Load())
	}
}
