package proxy_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkSessionProduce is one Produce request (acks=1, 64 records of
// 1 KiB: a frame larger than the session's read buffer, so forwarded as
// its head and a splice of the rest) and its response through the
// gateway to a kfake broker, per op. allocs/op counts the client's and
// kfake's too; the gateway's own are read from a memory profile:
//
//	go test -run XXX -bench SessionProduce -benchtime 2000x -memprofile mem.out -memprofilerate 1 ./proxy/
//	go tool pprof -sample_index=alloc_objects -focus 'tollgate/proxy\.' -top proxy.test mem.out
//
// (the total over b.N).
func BenchmarkSessionProduce(b *testing.B) {
	c := startUpstream(b, 1, kfake.SeedTopics(1, "bench"))
	srv := startGateway(b, c)
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(0).String()), kgo.DefaultProduceTopic("bench"),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ManualFlushing(),
		kgo.MaxBufferedRecords(1<<16), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	value := bytes.Repeat([]byte("x"), 1024)
	recs := make([]*kgo.Record, 64)
	var failed error
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed = err
		}
	}
	produce := func() { // one batch, so one request: Flush sends it
		for i := range recs {
			recs[i] = &kgo.Record{Value: value}
			cl.Produce(ctx, recs[i], promise)
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if failed != nil {
			b.Fatal(failed)
		}
	}
	produce() // metadata, connections
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		produce()
	}
}
