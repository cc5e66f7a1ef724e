package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestProduceConsume: an idempotent kgo producer and a consumer through the
// gateway in front of 3 brokers; every record arrives with key and headers,
// in order per partition, and no upstream address reaches the client.
func TestProduceConsume(t *testing.T) { forEachBackend(t, testProduceConsume) }

func testProduceConsume(t *testing.T, b backend) {
	srv, noLeak := b.start(t, 6, "orders")
	rec := &recorder{}
	cl := newClient(t, srv, rec, kgo.DefaultProduceTopic("orders"))
	ctx := ctxT(t, 30*time.Second)

	const n = 600
	for i := range n {
		r := &kgo.Record{
			Key:     []byte("k" + strconv.Itoa(i%17)),
			Value:   []byte(fmt.Sprintf("value-%d", i)),
			Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(i))}},
		}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	cons := newClient(t, srv, rec, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	lastSeq := map[int32]int{}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(seen), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Headers) != 1 || r.Headers[0].Key != "seq" {
				t.Fatalf("headers lost: %v", r.Headers)
			}
			seq, _ := strconv.Atoi(string(r.Headers[0].Value))
			if want := fmt.Sprintf("value-%d", seq); string(r.Value) != want {
				t.Fatalf("value %q, want %q", r.Value, want)
			}
			if last, ok := lastSeq[r.Partition]; ok && seq <= last {
				t.Fatalf("partition %d out of order: %d after %d", r.Partition, seq, last)
			}
			lastSeq[r.Partition] = seq
			seen[string(r.Value)] = true
		})
	}
	noLeak(t, rec)
}

// TestAdmin: topic administration, configs and cluster description through
// the gateway; DescribeCluster answers name only gateway addresses.
func TestAdmin(t *testing.T) {
	c := startUpstream(t, 3)
	srv := startGateway(t, c)
	rec := &recorder{}
	adm := kadm.NewClient(newClient(t, srv, rec))
	ctx := ctxT(t, 30*time.Second)

	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, "admin-t"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "admin-t")
	if err != nil {
		t.Fatal(err)
	}
	v, err := rc.On("admin-t", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cfg := range v.Configs {
		if cfg.Key == "retention.ms" && cfg.MaybeValue() == "3600000" {
			found = true
		}
	}
	if !found {
		t.Errorf("retention.ms=3600000 not described: %+v", v.Configs)
	}
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Brokers) != 3 {
		t.Fatalf("brokers %v, want 3", meta.Brokers)
	}
	for _, b := range meta.Brokers {
		if b.Host != "127.0.0.1" {
			t.Errorf("broker %d advertised as %s:%d", b.NodeID, b.Host, b.Port)
		}
		if a, ok := srv.BrokerAddr(0, b.NodeID); !ok || a.String() != fmt.Sprintf("127.0.0.1:%d", b.Port) {
			t.Errorf("broker %d at port %d, gateway serves it at %v", b.NodeID, b.Port, a)
		}
	}
	if _, err := adm.DeleteTopic(ctx, "admin-t"); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	rec.assertNoLeak(t, c)
}
