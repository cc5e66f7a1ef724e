package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkRebalance measures how long 10 kgo members (cooperative-sticky,
// kgo's default) of a new group take from their first JoinGroup until every
// member owns its 10 of the topic's 100 partitions and every partition's
// record has been consumed, through the gateway.
func BenchmarkRebalance(b *testing.B) {
	br := groupBroker(b, b.TempDir())
	addr := startGateway(b, br)
	createTopic(b, addr, "reb", 100, nil)
	produceValues(b, newClient(b, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "reb", "r", 0, 100)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		group := fmt.Sprint("reb-", i)
		var mu sync.Mutex
		parts := map[int32]bool{}
		owned := make([]int, 10)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		clients := make([]*kgo.Client, 10)
		for m := range clients {
			count := func(delta int) func(context.Context, *kgo.Client, map[string][]int32) {
				return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
					mu.Lock()
					owned[m] += delta * len(ps["reb"])
					mu.Unlock()
				}
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics("reb"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
				kgo.HeartbeatInterval(100*time.Millisecond),
				kgo.OnPartitionsAssigned(count(1)), kgo.OnPartitionsRevoked(count(-1)), kgo.OnPartitionsLost(count(-1)))
			if err != nil {
				b.Fatal(err)
			}
			clients[m] = cl
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
						mu.Lock()
						parts[r.Partition] = true
						mu.Unlock()
					})
				}
			}()
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			mu.Lock()
			all := len(parts) == 100
			for _, n := range owned {
				all = all && n == 10
			}
			mu.Unlock()
			if all {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("group %s: %d partitions consumed after 60s", group, len(parts))
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.StopTimer()
		cancel()
		wg.Wait()
		for _, cl := range clients {
			cl.Close()
		}
		b.StartTimer()
	}
}

// BenchmarkTxnProduce compares idempotent and transactional produce of 1 KiB
// records (transactions of 1000 records), fsync=never, through the gateway.
func BenchmarkTxnProduce(b *testing.B) {
	for _, mode := range []string{"idempotent", "transactional"} {
		b.Run(mode, func(b *testing.B) {
			br := groupBroker(b, b.TempDir())
			addr := startGateway(b, br)
			createTopic(b, addr, "tp", 4, nil)
			opts := []kgo.Opt{kgo.DefaultProduceTopic("tp"), kgo.ProducerLinger(time.Millisecond)}
			if mode == "transactional" {
				opts = append(opts, kgo.TransactionalID("bench"))
			}
			cl := newClient(b, addr, opts...)
			value := make([]byte, 1024)
			ctx := context.Background()
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(1000, b.N-done)
				if mode == "transactional" {
					if err := cl.BeginTransaction(); err != nil {
						b.Fatal(err)
					}
				}
				var wg sync.WaitGroup
				var errMu sync.Mutex
				var firstErr error
				for j := 0; j < n; j++ {
					wg.Add(1)
					cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
						if err != nil {
							errMu.Lock()
							firstErr = err
							errMu.Unlock()
						}
						wg.Done()
					})
				}
				wg.Wait()
				if firstErr != nil {
					b.Fatal(firstErr)
				}
				if mode == "transactional" {
					if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
						b.Fatal(err)
					}
				}
				done += n
			}
		})
	}
}
