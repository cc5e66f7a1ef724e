package proxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// bulkValue is record i of partition p: size bytes that depend on both,
// so a record moved, cut or spliced wrongly does not compare equal.
func bulkValue(p int32, i, size int) []byte {
	r := rand.New(rand.NewPCG(uint64(p), uint64(i)))
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

// TestTLSBulkFraming moves large produce requests and large Fetch
// responses through a TLS listener with kgo on both ends: the paths
// where a TLS client connection gathers records into one write
// (tls_client.go: batchConn, ReadFrom for spliced record sets, copyTo for
// request bodies past the read buffer). Many partitions of records larger
// than a TLS record and than the stream's copy limit put several spliced
// record sets and their fields into every response; kgo checks each
// batch's CRC, and every value is compared, so a byte lost, duplicated or
// reordered in a batch fails the test.
func TestTLSBulkFraming(t *testing.T) {
	const (
		partitions = 16
		perPart    = 4
		size       = 100 << 10
		topic      = "tls-bulk"
	)
	c := startUpstream(t, 2)
	ca := newTestCA(t)
	serverCert := ca.issue(t, "gateway.test", net.IPv4(127, 0, 0, 1))
	srv := startGateway(t, c, func(o *proxy.Options) {
		o.Listeners[0].TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clientTLS := &tls.Config{RootCAs: ca.pool, ServerName: "gateway.test", MinVersion: tls.VersionTLS12}

	admin := kadm.NewClient(newClient(t, srv, nil, kgo.DialTLSConfig(clientTLS)))
	if _, err := admin.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	// Linger and a large batch limit put several records of every
	// partition into one produce request of a few MiB.
	producer := newClient(t, srv, nil, kgo.DialTLSConfig(clientTLS), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(50*time.Millisecond),
		kgo.ProducerBatchMaxBytes(8<<20), kgo.MaxBufferedBytes(64<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for i := range perPart {
		for p := range int32(partitions) {
			recs = append(recs, &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "%d/%d", p, i), Value: bulkValue(p, i, size)})
		}
	}
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce over TLS: %v", err)
	}

	// One Fetch can carry every partition: the responses are MiB large,
	// each partition's record set past the stream's copy limit.
	consumer := newClient(t, srv, nil, kgo.DialTLSConfig(clientTLS), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(8<<20))
	next := make(map[int32]int)
	got := 0
	for got < len(recs) {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, len(recs), err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d over TLS: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			i := next[r.Partition]
			if want := fmt.Sprintf("%d/%d", r.Partition, i); string(r.Key) != want {
				t.Fatalf("partition %d offset %d: key %q, want %q", r.Partition, r.Offset, r.Key, want)
			}
			if !bytes.Equal(r.Value, bulkValue(r.Partition, i, size)) {
				t.Fatalf("partition %d record %d: value differs (%d bytes)", r.Partition, i, len(r.Value))
			}
			next[r.Partition] = i + 1
			got++
		})
	}
	for p := range int32(partitions) {
		if next[p] != perPart {
			t.Errorf("partition %d: %d records, want %d", p, next[p], perPart)
		}
	}
}
