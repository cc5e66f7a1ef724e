package proxy_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSinglePortSplicedRecordsRoundTrip: records of many sizes, most
// batches well over the splice threshold, produced through the one port
// (Produce parts written with the client's record bytes spliced) and
// consumed back (merged Fetch answers written from the parts' record
// bytes) are the records sent, byte for byte.
func TestSinglePortSplicedRecordsRoundTrip(t *testing.T) {
	const topic, parts, n = "splice", 6, 300
	_, srv, scan := startSinglePort(t, topic, parts)
	ctx := ctxT(t, 60*time.Second)
	rng := rand.New(rand.NewPCG(5, 6))
	want := map[string][]byte{}
	prod := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(20*time.Millisecond))
	for i := range n {
		v := make([]byte, 1+rng.IntN(40<<10))
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		k := fmt.Sprintf("k%04d", i)
		want[k] = v
		prod.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(k), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", k, err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Errorf("fetch %s[%d]: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if w, ok := want[string(r.Key)]; !ok || !bytes.Equal(w, r.Value) {
				t.Errorf("record %q (partition %d offset %d): %d bytes, not the %d sent", r.Key, r.Partition, r.Offset, len(r.Value), len(w))
			}
			delete(want, string(r.Key))
		})
	}
	if len(want) != 0 {
		t.Errorf("%d records not consumed back", len(want))
	}
	scan.assertClean(t)
}
