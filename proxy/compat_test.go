package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceN produces n records to topic and fails the test on any error.
func produceN(t testing.TB, ctx context.Context, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := from; i < from+n; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("produce %d: %v", i, err)
			}
		})
	}
	wg.Wait()
}

// TestConsumerGroupRebalance: two group members split six partitions
// through the gateway (JoinGroup/SyncGroup/Heartbeat/FindCoordinator all go
// through the coordinator's gateway port), a third joins mid-way, and every
// record is consumed.
func TestConsumerGroupRebalance(t *testing.T) {
	c := startUpstream(t, 3, kfake.SeedTopics(6, "events"))
	srv := startGateway(t, c)
	rec := &recorder{}
	ctx := ctxT(t, 60*time.Second)
	prod := newClient(t, srv, rec, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	const n = 300

	var mu sync.Mutex
	seen := map[string]int{}
	members := map[int]map[int32]bool{}
	consume := func(id int, stop <-chan struct{}) {
		cl := newClient(t, srv, rec,
			kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("events"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.Balancers(kgo.CooperativeStickyBalancer()))
		for {
			select {
			case <-stop:
				return
			default:
			}
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fs := cl.PollFetches(pctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)]++
				if members[id] == nil {
					members[id] = map[int32]bool{}
				}
				members[id][r.Partition] = true
				mu.Unlock()
			})
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				t.Logf("commit: %v", err)
			}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); consume(id, stop) }()
	}
	if _, err := c.WaitGroupStable(ctx, "g1", 2); err != nil {
		t.Fatalf("group of 2: %v", err)
	}
	produceN(t, ctx, prod, "events", 0, n)
	waitFor(t, ctx, "the first records", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == n })
	wg.Add(1)
	go func() { defer wg.Done(); consume(2, stop) }()
	if _, err := c.WaitGroupStable(ctx, "g1", 3); err != nil {
		t.Fatalf("group of 3: %v", err)
	}
	produceN(t, ctx, prod, "events", n, n)
	waitFor(t, ctx, "every record", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 2*n })
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(members) != 3 {
		t.Errorf("%d members consumed, want 3: the group did not split partitions: %v", len(members), members)
	}
	for v, k := range seen {
		if k > 1 {
			t.Logf("record %s consumed %d times (redelivery after rebalance is allowed)", v, k)
		}
	}
	rec.assertNoLeak(t, c)
}

// TestTransactions: a transactional producer commits one batch and aborts
// another through the gateway; a read_committed consumer sees exactly the
// committed records.
func TestTransactions(t *testing.T) {
	c := startUpstream(t, 3, kfake.SeedTopics(3, "txn"))
	srv := startGateway(t, c)
	rec := &recorder{}
	ctx := ctxT(t, 60*time.Second)
	prod := newClient(t, srv, rec, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("txn"))
	for round, commit := range []bool{true, false, true} {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("r%d-%d", round, i))).FirstErr(); err != nil {
				t.Fatalf("produce in txn: %v", err)
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end txn (commit=%v): %v", commit, err)
		}
	}
	cons := newClient(t, srv, rec, kgo.ConsumeTopics("txn"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]bool{}
	for len(got) < 20 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("got %d of 20 committed records", len(got))
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	for v := range got {
		if v[:2] == "r1" {
			t.Errorf("read_committed consumer saw aborted record %s", v)
		}
	}
	rec.assertNoLeak(t, c)
}

// TestBrokerChurn: leaders move, a broker joins after the gateway started
// and one leaves, while an idempotent producer keeps producing with acks=all;
// every acknowledged record is consumed afterwards and the new broker is
// served on a port of its own.
func TestBrokerChurn(t *testing.T) {
	c := startUpstream(t, 3, kfake.SeedTopics(6, "churn"))
	srv := startGateway(t, c, withRefresh(200*time.Millisecond))
	rec := &recorder{}
	ctx := ctxT(t, 90*time.Second)
	prod := newClient(t, srv, rec, kgo.DefaultProduceTopic("churn"), kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(250*time.Millisecond))

	var acked sync.Map
	var ackedN, next atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			i := next.Add(1)
			prod.Produce(ctx, kgo.StringRecord(strconv.FormatInt(i, 10)), func(r *kgo.Record, err error) {
				if err == nil {
					acked.Store(string(r.Value), true)
					ackedN.Add(1)
				}
			})
			time.Sleep(time.Millisecond)
		}
	}()
	progress := func(what string) {
		t.Helper()
		at := ackedN.Load()
		waitFor(t, ctx, what, func() bool { return ackedN.Load() > at+50 })
	}
	progress("initial produce")
	c.ShufflePartitionLeaders()
	progress("produce after leader shuffle")
	if err := c.MoveTopicPartition("churn", 0, 2); err != nil {
		t.Fatal(err)
	}
	progress("produce after partition move")
	node, _, err := c.AddNode(-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "a port for the new broker", func() bool { _, ok := srv.BrokerAddr(0, node); return ok })
	if err := c.MoveTopicPartition("churn", 1, node); err != nil {
		t.Fatal(err)
	}
	progress("produce to the new broker")
	if err := c.RemoveNode(0); err != nil {
		t.Fatal(err)
	}
	progress("produce after a broker left")
	close(stop)
	<-done
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	cons := newClient(t, srv, rec, kgo.ConsumeTopics("churn"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	want := ackedN.Load()
	got := map[string]bool{}
	for int64(len(got)) < want {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	missing := 0
	acked.Range(func(k, _ any) bool {
		if !got[k.(string)] {
			missing++
		}
		return true
	})
	if missing > 0 {
		t.Errorf("%d of %d acknowledged records never consumed", missing, want)
	}
	t.Logf("%d records acknowledged and consumed across leader moves, a join and a leave", want)
	rec.assertNoLeak(t, c)
}

func withRefresh(d time.Duration) func(*proxyOptions) {
	return func(o *proxyOptions) { o.MetadataRefresh = d }
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
