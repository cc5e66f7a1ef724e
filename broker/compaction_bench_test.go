package broker

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkCompactedProduce measures what the log cleaner costs producers:
// each iteration produces the same keyed workload (128 MiB of 1 KiB records
// over 4096 keys, random values, kgo idempotent, acks=all, linger 5 ms,
// fsync=never; uncompressed and snappy, kgo's default) to a
// cleanup.policy=delete topic and to a compact topic whose cleaner runs
// every 50 ms meanwhile, alternately, and reports the throughput ratio
// compact/delete and how many cleanings ran during the compact runs.
//
//	go test ./broker -run '^$' -bench CompactedProduce -benchtime 3x
func BenchmarkCompactedProduce(b *testing.B) {
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"snappy", kgo.SnappyCompression()}} {
		b.Run(c.name, func(b *testing.B) { benchCompactedProduce(b, c.codec) })
	}
}

func benchCompactedProduce(b *testing.B, codec kgo.CompressionCodec) {
	var wall = map[string]time.Duration{}
	var runs, reclaimed int64
	const total, recSize, keys = 128 << 20, 1024, 4096
	for i := 0; i < b.N; i++ {
		for _, policy := range []string{"delete", "compact"} {
			d, st := produceKeyed(b, policy, codec, total/recSize, recSize, keys)
			wall[policy] += d
			runs += st.CleanerRuns
			reclaimed += st.CleanerReclaim
		}
	}
	mbps := func(p string) float64 { return float64(total*b.N) / (1 << 20) / wall[p].Seconds() }
	b.ReportMetric(mbps("delete"), "delete-MB/s")
	b.ReportMetric(mbps("compact"), "compact-MB/s")
	b.ReportMetric(mbps("compact")/mbps("delete"), "compact/delete")
	b.ReportMetric(float64(runs)/float64(b.N), "cleanings/run")
	b.ReportMetric(float64(reclaimed)/float64(b.N)/(1<<20), "reclaimed-MB/run")
}

// produceKeyed produces n records of size bytes over keys keys to a fresh
// broker's topic with the given cleanup.policy and returns the wall time
// and the partition's stats at the end.
func produceKeyed(b *testing.B, policy string, codec kgo.CompressionCodec, n, size, keys int) (time.Duration, PartitionStat) {
	b.Helper()
	br, srv := newBroker(b, func(c *Config) { c.CleanerBackoff = 50 * time.Millisecond })
	createTopic(b, srv.addr(), "t", 1, map[string]*string{
		"cleanup.policy": kadm.StringPtr(policy), "segment.bytes": kadm.StringPtr("1048576"),
		"retention.ms": kadm.StringPtr("-1"),
	})
	cl := newClient(b, srv.addr(), kgo.ProducerLinger(5*time.Millisecond), kgo.DefaultProduceTopic("t"), kgo.ProducerBatchCompression(codec))
	// Values are random (about as compressible as real payloads after
	// serialization); an all-zero value compresses 20:1, which would make
	// every decompression, not the cleaning, the cost measured.
	pool := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(pool)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		off := (i * 7919) % (len(pool) - size)
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(fmt.Sprintf("key-%08d", i%keys)), Value: pool[off : off+size-16]}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	d := time.Since(start)
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	st := partitionStat(b, br, "t", 0)
	return d, st
}
