package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(10 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t testing.TB, addr, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	resp, err := adm.CreateTopic(testCtx(t), partitions, 1, configs, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", name, err, resp.Err)
	}
}

// consumeN reads n records from the start of topic with a direct consumer.
func consumeN(t testing.TB, addr, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr, append([]kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, opts...)...)
	ctx := testCtx(t)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timeout", len(out), n)
		}
		fs.EachError(func(tp string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", tp, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}

func TestKgoProduceConsumeCodecs(t *testing.T) {
	_, srv := newBroker(t)
	mb := "3000000"
	createTopic(t, srv.addr(), "codecs", 3, map[string]*string{"max.message.bytes": &mb})

	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	var want []string
	for i, codec := range codecs {
		cl := newClient(t, srv.addr(), kgo.ProducerBatchCompression(codec), kgo.ProducerBatchMaxBytes(4<<20))
		var recs []*kgo.Record
		for j := 0; j < 50; j++ {
			v := fmt.Sprintf("codec%d-rec%d-%s", i, j, strings.Repeat("x", j))
			want = append(want, v)
			recs = append(recs, &kgo.Record{
				Topic: "codecs", Key: []byte(fmt.Sprint(j)), Value: []byte(v),
				Headers: []kgo.RecordHeader{{Key: "codec", Value: []byte(fmt.Sprint(i))}},
			})
		}
		if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
			t.Fatalf("produce with codec %d: %v", i, err)
		}
	}
	// One 1 MiB record: larger than a fetch's default partition limit, so
	// it also exercises the at-least-one-batch rule (KIP-74).
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	cl := newClient(t, srv.addr(), kgo.ProducerBatchMaxBytes(4<<20))
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "codecs", Partition: 0, Value: big}).FirstErr(); err != nil {
		t.Fatalf("produce 1 MiB record: %v", err)
	}

	got := consumeN(t, srv.addr(), "codecs", len(want)+1, kgo.FetchMaxPartitionBytes(64<<10))
	seen := map[string]bool{}
	sawBig := false
	for _, r := range got {
		if bytes.Equal(r.Value, big) {
			sawBig = true
			continue
		}
		seen[string(r.Value)] = true
		if len(r.Headers) != 1 || r.Headers[0].Key != "codec" {
			t.Fatalf("record %q lost its header: %v", r.Value, r.Headers)
		}
	}
	for _, v := range want {
		if !seen[v] {
			t.Fatalf("record %q not consumed", v)
		}
	}
	if !sawBig {
		t.Fatal("1 MiB record not consumed")
	}
}

func TestKgoIdempotentOrdering(t *testing.T) {
	// fsync=always: every acknowledgement waits for group-commit fsync.
	_, srv := newBroker(t, func(c *Config) { c.Fsync = storage.FsyncAlways })
	createTopic(t, srv.addr(), "idem", 1, nil)
	// Idempotence is kgo's default; small batches force many pipelined
	// produce requests per partition.
	cl := newClient(t, srv.addr(), kgo.ProducerBatchMaxBytes(1024))
	const n = 2000
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: "idem", Value: []byte(fmt.Sprintf("%06d", i))})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consumeN(t, srv.addr(), "idem", n)
	for i, r := range got[:n] {
		if string(r.Value) != fmt.Sprintf("%06d", i) || r.Offset != int64(i) {
			t.Fatalf("record %d: value %q offset %d", i, r.Value, r.Offset)
		}
		if r.ProducerID < 0 {
			t.Fatalf("record %d has no producer id: kgo did not produce idempotently", i)
		}
	}
}

func TestKadmAdmin(t *testing.T) {
	_, srv := newBroker(t)
	ctx := testCtx(t)
	cl := newClient(t, srv.addr())
	adm := kadm.NewClient(cl)

	// Create, with validation errors.
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "admin"); err != nil {
		t.Fatal(err)
	}
	r, _ := adm.CreateTopic(ctx, 2, 1, nil, "admin")
	if !errors.Is(r.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("second create: %v, want TOPIC_ALREADY_EXISTS", r.Err)
	}
	r, _ = adm.CreateTopic(ctx, 1, 3, nil, "rf3")
	if !errors.Is(r.Err, kerr.InvalidReplicationFactor) {
		t.Fatalf("replication 3: %v, want INVALID_REPLICATION_FACTOR", r.Err)
	}
	r, _ = adm.CreateTopic(ctx, 1, 1, nil, "bad/name")
	if !errors.Is(r.Err, kerr.InvalidTopicException) {
		t.Fatalf("bad name: %v, want INVALID_TOPIC_EXCEPTION", r.Err)
	}
	bogus := "1"
	r, _ = adm.CreateTopic(ctx, 1, 1, map[string]*string{"no.such.config": &bogus}, "cfg")
	if !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("unknown config: %v, want INVALID_CONFIG", r.Err)
	}

	// Partitions.
	if _, err := adm.CreatePartitions(ctx, 2, "admin"); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "admin")
	if err != nil || len(td["admin"].Partitions) != 4 {
		t.Fatalf("after adding partitions: %v %+v", err, td["admin"])
	}

	// Configs: incremental alter, describe.
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("3600000")}}, "admin"); err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("admin", nil)
	found := false
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			found = true
			if c.MaybeValue() != "3600000" || c.Source != 1 {
				t.Fatalf("retention.ms = %q source %v", c.MaybeValue(), c.Source)
			}
		}
	}
	if !found {
		t.Fatal("retention.ms not described")
	}
	bad, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("soon")}}, "admin")
	if err != nil || !errors.Is(bad[0].Err, kerr.InvalidConfig) {
		t.Fatalf("bad retention.ms: %v %v", err, bad)
	}
	brokerCfg, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil || len(brokerCfg) != 1 || len(brokerCfg[0].Configs) == 0 {
		t.Fatalf("describe broker configs: %v %+v", err, brokerCfg)
	}

	// Produce with timestamps, then list offsets by timestamp and delete records.
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := 0; i < 10; i++ {
		rec := &kgo.Record{Topic: "admin", Partition: 0, Timestamp: base.Add(time.Duration(i) * time.Minute), Value: []byte{byte(i)}}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	lo, err := adm.ListOffsetsAfterMilli(ctx, base.Add(5*time.Minute).UnixMilli(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != 10 {
		t.Fatalf("end offsets sum %d, want 10", total)
	}
	after := int64(0)
	lo.Each(func(o kadm.ListedOffset) {
		end, _ := ends.Lookup("admin", o.Partition)
		if o.Err != nil {
			t.Fatalf("list by time p%d: %v", o.Partition, o.Err)
		}
		after += end.Offset - o.Offset
	})
	if after != 5 {
		t.Fatalf("%d records at or after the timestamp, want 5", after)
	}

	// Log dirs.
	ld, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := ld[0]; !ok || !d.Ok() || d.Size() == 0 {
		t.Fatalf("describe log dirs: %+v", ld)
	}

	del := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) { del.AddOffset("admin", o.Partition, o.Offset, -1) })
	dr, err := adm.DeleteRecords(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	dr.Each(func(d kadm.DeleteRecordsResponse) {
		end, _ := ends.Lookup("admin", d.Partition)
		if d.Err != nil || d.LowWatermark != end.Offset {
			t.Fatalf("delete records p%d: low %d err %v, want %d", d.Partition, d.LowWatermark, d.Err, end.Offset)
		}
	})
	starts, _ := adm.ListStartOffsets(ctx, "admin")
	starts.Each(func(o kadm.ListedOffset) {
		end, _ := ends.Lookup("admin", o.Partition)
		if o.Offset != end.Offset {
			t.Fatalf("start offset p%d = %d after delete, want %d", o.Partition, o.Offset, end.Offset)
		}
	})

	// Delete.
	dt, err := adm.DeleteTopics(ctx, "admin")
	if err != nil || dt["admin"].Err != nil {
		t.Fatalf("delete: %v %v", err, dt)
	}
	dt, _ = adm.DeleteTopics(ctx, "admin")
	if !errors.Is(dt["admin"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("second delete: %v", dt["admin"].Err)
	}
}

func TestKgoAcksZero(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "fire", 1, nil)
	cl := newClient(t, srv.addr(), kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "fire", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := consumeN(t, srv.addr(), "fire", 10)
	if len(got) != 10 || b.partitionOf(b.lookup("fire"), 0).log.HighWatermark() != 10 {
		t.Fatalf("acks=0: %d records", len(got))
	}
}
