package broker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// compactedTopic creates a one-partition compacted topic with small
// segments and an eager cleaner.
func compactedTopic(t *testing.T, addr, name string, extra map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "2048",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "60000",
	} {
		cfg[k] = kadm.StringPtr(v)
	}
	for k, v := range extra {
		cfg[k] = kadm.StringPtr(v)
	}
	createTopic(t, addr, name, 1, cfg)
}

// readToEnd reads partition 0 of topic from offset from to the log end
// with a fresh kgo consumer (read_committed when asked).
func readToEnd(t *testing.T, addr, topic string, from int64, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	ctx := testCtx(t)
	cl := newClient(t, addr)
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := ends[topic][0].Offset
	c := newClient(t, addr, append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, opts...)...)
	var out []*kgo.Record
	for len(out) == 0 || out[len(out)-1].Offset < end-1 {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records, never reached offset %d", len(out), end-1)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// produced is a key's latest write: offset and value (nil: tombstone).
type produced struct {
	off   int64
	value []byte
}

func produceHistory(t *testing.T, cl *kgo.Client, topic string, keys, versions int, dead map[int]bool) map[string]produced {
	t.Helper()
	want := map[string]produced{}
	for v := 0; v < versions; v++ {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("key-%d", k)
			val := []byte(fmt.Sprintf("%s-version-%d-%040d", key, v, 0))
			if v == versions-1 && dead[k] {
				val = nil
			}
			r, err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Key: []byte(key), Value: val}).First()
			if err != nil {
				t.Fatal(err)
			}
			want[key] = produced{r.Offset, val}
		}
	}
	return want
}

// fill writes n records of unique keys so the history rolls out of the
// active segment.
func fill(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint("filler-", time.Now().UnixNano(), i)), Value: make([]byte, 100)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkLatest: every history key appears once, with its latest value at
// its original offset; a tombstoned key appears at most as its tombstone
// (not at all when gone).
func checkLatest(t *testing.T, recs []*kgo.Record, want map[string]produced, tombstonesGone bool) {
	t.Helper()
	got := map[string][]*kgo.Record{}
	for _, r := range recs {
		got[string(r.Key)] = append(got[string(r.Key)], r)
	}
	for k, w := range want {
		rs := got[k]
		switch {
		case w.value == nil && tombstonesGone && len(rs) != 0:
			t.Fatalf("key %s: tombstone still read after delete.retention.ms: %d records", k, len(rs))
		case w.value == nil && len(rs) > 1:
			t.Fatalf("key %s: deleted, yet %d records are read", k, len(rs))
		case w.value == nil:
		case len(rs) != 1:
			t.Fatalf("key %s: %d versions read after compaction, want 1", k, len(rs))
		case rs[0].Offset != w.off || string(rs[0].Value) != string(w.value):
			t.Fatalf("key %s: read %q at %d, want %q at %d", k, rs[0].Value, rs[0].Offset, w.value, w.off)
		}
	}
}

func TestKgoCompaction(t *testing.T) {
	codecs := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			b, srv := newBroker(t, manualCleaner)
			topic := "compact-" + name
			compactedTopic(t, srv.addr(), topic, nil)
			cl := newClient(t, srv.addr(), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(codec))
			want := produceHistory(t, cl, topic, 15, 8, map[int]bool{4: true, 9: true})
			fill(t, cl, topic, 30)
			now := time.Now()
			if n := b.cleanAll(now, false); n != 1 {
				t.Fatalf("cleaner cleaned %d partitions, want 1", n)
			}
			checkLatest(t, readToEnd(t, srv.addr(), topic, 0), want, false)
			st := partitionStat(t, b, topic, 0)
			if !st.Compacted || st.CleanerRuns != 1 || st.CleanerReclaim <= 0 {
				t.Fatalf("partition stats after a cleaning: %+v", st)
			}
			// The idempotent producer goes on after the cleaning.
			fill(t, cl, topic, 5)
			// Past delete.retention.ms the cleaner comes back for the
			// tombstones on its own (no new dirty data needed).
			if n := b.cleanAll(now.Add(61*time.Second), false); n != 1 {
				t.Fatalf("cleaner cleaned %d partitions past the delete horizon, want 1", n)
			}
			checkLatest(t, readToEnd(t, srv.addr(), topic, 0), want, true)
			// A fetch from an offset compaction removed starts at the next
			// record kept.
			gone := want["key-0"].off - 1
			if recs := readToEnd(t, srv.addr(), topic, gone); recs[0].Offset <= gone {
				t.Fatalf("fetch from removed offset %d returned offset %d", gone, recs[0].Offset)
			}
		})
	}
}

func TestKgoCompactedTopicRefusesKeylessRecords(t *testing.T) {
	b, srv := newBroker(t, manualCleaner)
	compactedTopic(t, srv.addr(), "keys", nil)
	cl := newClient(t, srv.addr(), kgo.ProducerLinger(0))
	err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "keys", Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record to a compacted topic: %v, want INVALID_RECORD", err)
	}
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "keys", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("keyed record after a refused one: %v", err)
	}
	if st := partitionStat(t, b, "keys", 0); st.KeylessRefused != 1 || st.LogEndOffset != 1 {
		t.Fatalf("after one refused keyless produce: %+v", st)
	}
}

func TestKgoCompactionTransactions(t *testing.T) {
	// fsync=always: the high watermark follows fsyncs, and the swap must
	// keep the segment it points into valid.
	b, srv := newBroker(t, manualCleaner, func(c *Config) { c.Fsync = storage.FsyncAlways })
	topic := "compact-txn"
	compactedTopic(t, srv.addr(), topic, nil)
	txn := newClient(t, srv.addr(), kgo.TransactionalID("compactor"), kgo.ProducerLinger(0), kgo.DefaultProduceTopic(topic))
	ctx := testCtx(t)
	runTxn := func(value string, commit bool) map[string]int64 {
		t.Helper()
		offs := map[string]int64{}
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 5; k++ {
			r, err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint("t", k)), Value: []byte(value)}).First()
			if err != nil {
				t.Fatal(err)
			}
			offs[string(r.Key)] = r.Offset
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		return offs
	}
	runTxn("aborted", false)
	committed := runTxn("committed", true)
	runTxn("aborted-again", false)
	plain := newClient(t, srv.addr(), kgo.ProducerLinger(0))
	fill(t, plain, topic, 40)
	if n := b.cleanAll(time.Now(), false); n != 1 {
		t.Fatalf("cleaned %d partitions", n)
	}
	for _, iso := range []kgo.IsolationLevel{kgo.ReadUncommitted(), kgo.ReadCommitted()} {
		recs := readToEnd(t, srv.addr(), topic, 0, kgo.FetchIsolationLevel(iso))
		for _, r := range recs {
			if v := string(r.Value); v == "aborted" || v == "aborted-again" {
				t.Fatalf("aborted record %s=%s at %d read after compaction", r.Key, v, r.Offset)
			}
		}
		want := map[string]produced{}
		for k, off := range committed {
			want[k] = produced{off, []byte("committed")}
		}
		checkLatest(t, recs, want, false)
	}
	// The transactional producer's sequences still hold after cleaning.
	runTxn("after-cleaning", true)
}

func TestDeleteRecordsOnCompactedTopic(t *testing.T) {
	_, srv := newBroker(t)
	compactedTopic(t, srv.addr(), "c-only", nil)
	compactedTopic(t, srv.addr(), "c-and-d", map[string]string{"cleanup.policy": "compact,delete"})
	cl := newClient(t, srv.addr(), kgo.ProducerLinger(0))
	for _, topic := range []string{"c-only", "c-and-d"} {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "c-only", Partition: 0, At: 1})
	offs.Add(kadm.Offset{Topic: "c-and-d", Partition: 0, At: 1})
	res, err := adm.DeleteRecords(testCtx(t), offs)
	if err != nil {
		t.Fatal(err)
	}
	if err := res["c-only"][0].Err; !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("DeleteRecords on a compact-only topic: %v, want POLICY_VIOLATION", err)
	}
	if r := res["c-and-d"][0]; r.Err != nil || r.LowWatermark != 1 {
		t.Fatalf("DeleteRecords on a compact,delete topic: %+v", r)
	}
}

// TestCompactionAcrossRestart: a cleaned partition reads the same after
// the broker restarts, and the cleaner remembers where it stopped (no
// new dirty data, no new cleaning).
func TestCompactionAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir, manualCleaner)
	srv := startServer(t, b)
	compactedTopic(t, srv.addr(), "durable-compact", nil)
	cl := newClient(t, srv.addr(), kgo.ProducerLinger(0))
	want := produceHistory(t, cl, "durable-compact", 10, 6, map[int]bool{1: true})
	fill(t, cl, "durable-compact", 30)
	if n := b.cleanAll(time.Now(), false); n != 1 {
		t.Fatalf("cleaned %d partitions", n)
	}
	cl.Close()
	srv.close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := openBroker(t, dir, manualCleaner)
	srv2 := startServer(t, b2)
	checkLatest(t, readToEnd(t, srv2.addr(), "durable-compact", 0), want, false)
	if n := b2.cleanAll(time.Now(), false); n != 0 {
		t.Fatalf("the cleaner ran again over clean data after a restart (%d partitions)", n)
	}
	cl2 := newClient(t, srv2.addr(), kgo.ProducerLinger(0))
	more := produceHistory(t, cl2, "durable-compact", 10, 2, nil)
	fill(t, cl2, "durable-compact", 30)
	if n := b2.cleanAll(time.Now(), false); n != 1 {
		t.Fatalf("new dirty data after a restart: cleaned %d partitions", n)
	}
	checkLatest(t, readToEnd(t, srv2.addr(), "durable-compact", 0), more, false)
}
