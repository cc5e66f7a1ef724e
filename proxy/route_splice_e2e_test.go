package proxy_test

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestSinglePortSplicedRecordsRoundTrip: records of many sizes, most
// batches well over the splice threshold, produced through the one port
// (Produce parts written with the client's record bytes spliced) and
// consumed back (merged Fetch answers written from the parts' record
// bytes) are the records sent, byte for byte. With TLS on both sides the
// Produce parts are copied (one TLS record per write) and the answers'
// pieces are coalesced before they are encrypted; the records are the
// same.
func TestSinglePortSplicedRecordsRoundTrip(t *testing.T) {
	const topic, parts = "splice", 6
	t.Run("plaintext", func(t *testing.T) {
		_, srv, scan := startSinglePort(t, topic, parts)
		roundTripRecords(t, srv, topic, kgo.Dialer(scan.dial))
		scan.assertClean(t)
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
		roundTripRecords(t, srv, topic, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.pool, ServerName: "kafka.test", MinVersion: tls.VersionTLS12}))
	})
}

func roundTripRecords(t *testing.T, srv *proxy.Server, topic string, dial kgo.Opt) {
	const n = 300
	ctx := ctxT(t, 60*time.Second)
	rng := rand.New(rand.NewPCG(5, 6))
	want := map[string][]byte{}
	prod := newClient(t, srv, nil, dial, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
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
	cons := newClient(t, srv, nil, dial, kgo.ConsumeTopics(topic),
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
}
