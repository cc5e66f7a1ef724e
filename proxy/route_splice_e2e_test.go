package proxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestSinglePortSplicedRecordsRoundTrip: records of many sizes, most
// batches well over the splice threshold, produced through the one port
// (Produce parts written with the client's record bytes spliced) and
// consumed back (merged Fetch answers written from the parts' record
// bytes) are the records sent, byte for byte. In plaintext the large
// record sets of the answers travel upstream socket -> pipe -> client
// socket (pipe_records.go): the test fails if none did, or if a pipe is
// still in use once the clients are gone. The other cases take the
// other paths: record sets larger than their pipes (the rest in memory), no
// pipe free (parts read into memory), clients that drop their
// connection mid-answer (the pipes closed, not reused). With TLS on both
// sides the Produce parts are copied (one TLS record per write), the
// answers are read into memory and their pieces coalesced before they
// are encrypted; the records are the same.
func TestSinglePortSplicedRecordsRoundTrip(t *testing.T) {
	const topic, parts = "splice", 6
	small := roundTrip{n: 300, maxValue: 40 << 10}
	t.Run("plaintext", func(t *testing.T) {
		piped, _, _ := proxy.PipeStatsForTest()
		pipesReleasedAtEnd(t)
		_, srv, scan := startSinglePort(t, topic, parts)
		roundTripRecords(t, srv, topic, small, kgo.Dialer(scan.dial))
		scan.assertClean(t)
		if now, _, _ := proxy.PipeStatsForTest(); now == piped {
			t.Error("no record set went through a pipe: only the memory path was tested")
		}
	})
	t.Run("plaintext-larger-than-its-pipes", func(t *testing.T) {
		_, spilled, _ := proxy.PipeStatsForTest()
		pipesReleasedAtEnd(t)
		_, srv, scan := startSinglePort(t, topic, parts)
		// ~8.5 MiB a partition, all of it in one answer's record set:
		// more than the four pipes a set may take (4 MiB at most).
		big := roundTrip{n: 400, maxValue: 256 << 10, consume: []kgo.Opt{kgo.FetchMaxPartitionBytes(32 << 20), kgo.FetchMaxBytes(64 << 20)}}
		roundTripRecords(t, srv, topic, big, kgo.Dialer(scan.dial))
		if _, now, _ := proxy.PipeStatsForTest(); now == spilled {
			t.Error("no record set was larger than its pipes: the spill path was not tested")
		}
	})
	t.Run("plaintext-frames-off-heap", func(t *testing.T) {
		// Produce requests of several 1 MiB partitions are read whole
		// into frames mapped outside the Go heap (frame_mem.go); the
		// records read back are the records sent.
		mapped, restore := proxy.FramesOffHeapForTest()
		t.Cleanup(restore) // runs after the gateway's cleanup
		before := mapped()
		_, srv, scan := startSinglePort(t, topic, parts)
		big := roundTrip{n: 100, maxValue: 256 << 10}
		roundTripRecords(t, srv, topic, big, kgo.Dialer(scan.dial))
		if !proxy.MapsFramesForTest {
			t.Skip("this platform maps no frames: the heap path was tested")
		}
		if mapped() == before {
			t.Error("no request frame was mapped: only the heap path was tested")
		}
	})
	t.Run("plaintext-no-pipe-free", func(t *testing.T) {
		give := proxy.HoldRecordPipesForTest()
		defer give()
		piped, _, _ := proxy.PipeStatsForTest()
		_, srv, scan := startSinglePort(t, topic, parts)
		roundTripRecords(t, srv, topic, small, kgo.Dialer(scan.dial))
		if now, _, _ := proxy.PipeStatsForTest(); now != piped {
			t.Errorf("%d record sets went through pipes with none free", now-piped)
		}
	})
	t.Run("plaintext-full-audit", func(t *testing.T) {
		// A full audit record is made from the whole answer, which then
		// goes out through a buffer (materialize): the piped records are
		// read out of their pipes.
		piped, _, _ := proxy.PipeStatsForTest()
		pipesReleasedAtEnd(t)
		trail, err := audit.New(configs.Audit{Level: "full", Mode: "best-effort", Queue: 10000}, nil, audit.WithSink(&syncBuffer{}))
		if err != nil {
			t.Fatal(err)
		}
		_, srv, scan := startSinglePort(t, topic, parts, func(o *proxy.Options) { o.Audit = trail })
		roundTripRecords(t, srv, topic, small, kgo.Dialer(scan.dial))
		if now, _, _ := proxy.PipeStatsForTest(); now == piped {
			t.Error("no record set went through a pipe: only the memory path was tested")
		}
	})
	t.Run("plaintext-client-drops-mid-answer", func(t *testing.T) {
		pipesReleasedAtEnd(t)
		_, srv, scan := startSinglePort(t, topic, parts)
		// The consumer's first connections are cut after 200 KB of
		// answers; kgo reconnects and fetches again.
		var cuts atomic.Int32
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := scan.dial(ctx, network, addr)
			if err != nil || cuts.Add(1) > 3 {
				return c, err
			}
			return &cutConn{Conn: c, left: 200_000}, nil
		}
		roundTripRecords(t, srv, topic, roundTrip{n: 300, maxValue: 40 << 10, consumeDial: dial}, kgo.Dialer(scan.dial))
	})
	t.Run("tls", func(t *testing.T) {
		ca := newTestCA(t)
		cert := ca.issue(t, "kafka.test", net.ParseIP(upstreamHost))
		c := startUpstream(t, 3, kfake.SeedTopics(parts, topic),
			kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
		spreadLeaders(t, c, topic, parts, 3)
		srv := startGateway(t, c, func(o *proxy.Options) {
			o.Listeners[0].SinglePort = &proxy.SinglePortOptions{VirtualNode: testVirtual}
			o.Listeners[0].TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
			o.UpstreamTLS = &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
		})
		piped, _, _ := proxy.PipeStatsForTest()
		roundTripRecords(t, srv, topic, small, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.pool, ServerName: "kafka.test", MinVersion: tls.VersionTLS12}))
		if now, _, _ := proxy.PipeStatsForTest(); now != piped {
			t.Errorf("%d record sets went through pipes on TLS connections", now-piped)
		}
	})
}

// pipesReleasedAtEnd checks, after the test's clients and gateway have
// stopped (a cleanup registered first runs last), that every record
// pipe is free or closed again.
func pipesReleasedAtEnd(t *testing.T) {
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, _, inUse := proxy.PipeStatsForTest()
			if inUse == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d record pipes still in use after the test", inUse)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// cutConn closes its connection once left bytes have been read.
type cutConn struct {
	net.Conn
	left int
}

func (c *cutConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}

// roundTrip is what roundTripRecords produces and how it consumes.
type roundTrip struct {
	n, maxValue int
	consume     []kgo.Opt
	// consumeDial, if set, is the consumer's dialer.
	consumeDial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func roundTripRecords(t *testing.T, srv *proxy.Server, topic string, rt roundTrip, dial kgo.Opt) {
	n := rt.n
	ctx := ctxT(t, 60*time.Second)
	rng := rand.New(rand.NewPCG(5, 6))
	want := map[string][]byte{}
	prod := newClient(t, srv, nil, dial, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(20*time.Millisecond))
	for i := range n {
		v := make([]byte, 1+rng.IntN(rt.maxValue))
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
	cdial := dial
	if rt.consumeDial != nil {
		cdial = kgo.Dialer(rt.consumeDial)
	}
	cons := newClient(t, srv, nil, append([]kgo.Opt{cdial, kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500 * time.Millisecond)}, rt.consume...)...)
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
}
