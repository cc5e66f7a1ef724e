package proxy_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// testVirtual is the single-port tests' virtual node id: not 0, so a
// real kfake node id (0, 1, 2) leaking through is never mistaken for it.
const testVirtual = 7

// startSinglePort starts a 3-broker kfake whose partitions of topic lead
// on all three brokers, and a single-port gateway in front of it.
func startSinglePort(t *testing.T, topic string, partitions int, mod ...func(*proxy.Options)) (*kfake.Cluster, *proxy.Server, *nodeScanner) {
	t.Helper()
	c := startUpstream(t, 3, kfake.SeedTopics(int32(partitions), topic))
	spreadLeaders(t, c, topic, partitions, 3)
	mod = append([]func(*proxy.Options){func(o *proxy.Options) {
		o.Listeners[0].SinglePort = &proxy.SinglePortOptions{VirtualNode: testVirtual}
	}}, mod...)
	srv := startGateway(t, c, mod...)
	return c, srv, &nodeScanner{virtual: testVirtual, addr: srv.Addr(0).String()}
}

func (s *nodeScanner) assertClean(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bad {
		t.Error(b)
	}
	if s.seen == 0 {
		t.Error("the node scanner decoded no response: it checked nothing")
	}
}

// TestSinglePortProduceConsume: an idempotent kgo producer and a classic
// consumer group through the one port reach all three brokers, and no
// response names a real node or address.
func TestSinglePortProduceConsume(t *testing.T) {
	const topic, parts, n = "sp", 6, 120
	c, srv, scan := startSinglePort(t, topic, parts)
	ctx := ctxT(t, 60*time.Second)
	nodes := countNodes(c, kmsg.Produce, kmsg.Fetch)
	prod := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("v%03d", i))}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	perPart := map[int32]int{}
	cons := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.ConsumeTopics(topic), kgo.ConsumerGroup("sp-group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s[%d]: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { perPart[r.Partition]++; got++ })
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	for p := range int32(parts) {
		if perPart[p] != n/parts {
			t.Errorf("partition %d: %d records, want %d", p, perPart[p], n/parts)
		}
	}
	if b := prod.DiscoveredBrokers(); len(b) != 1 {
		t.Errorf("client discovered %d brokers, want only the virtual node", len(b))
	}
	adm := kadm.NewClient(cons)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].NodeID != testVirtual || md.Controller != testVirtual {
		t.Errorf("metadata brokers %+v controller %d, want only the virtual node", md.Brokers, md.Controller)
	}
	for _, p := range md.Topics[topic].Partitions {
		if p.Leader != testVirtual {
			t.Errorf("partition %d led by %d", p.Partition, p.Leader)
		}
	}
	offs, err := adm.FetchOffsets(ctx, "sp-group")
	if err != nil || offs.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, offs.Error())
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != n {
		t.Errorf("committed offsets sum to %d, want %d", committed, n)
	}
	nodes.assertAll(t, 3)
	scan.assertClean(t)
}

// nodeCounter counts, per key, the upstream nodes that served requests.
type nodeCounter struct {
	mu   sync.Mutex
	seen map[int16]map[int32]int
}

// countNodes records which kfake node answers each request of keys.
func countNodes(c *kfake.Cluster, keys ...kmsg.Key) *nodeCounter {
	nc := &nodeCounter{seen: map[int16]map[int32]int{}}
	for _, k := range keys {
		c.ControlKey(int16(k), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			nc.mu.Lock()
			defer nc.mu.Unlock()
			if nc.seen[req.Key()] == nil {
				nc.seen[req.Key()] = map[int32]int{}
			}
			nc.seen[req.Key()][c.CurrentNode()]++
			return nil, nil, false
		})
	}
	return nc
}

func (nc *nodeCounter) assertAll(t *testing.T, brokers int) {
	t.Helper()
	nc.mu.Lock()
	defer nc.mu.Unlock()
	for k, m := range nc.seen {
		if len(m) != brokers {
			t.Errorf("%s reached nodes %v, want all %d", kmsg.NameForKey(k), m, brokers)
		}
	}
	if len(nc.seen) == 0 {
		t.Error("no counted request reached the upstream")
	}
}
