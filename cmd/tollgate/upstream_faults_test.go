//go:build linux

package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/gateway"
)

// startGatewayTo runs an in-process gateway at its default configuration
// (ports from the kernel, a short metadata refresh) in front of upstream.
func startGatewayTo(t *testing.T, upstream string, logs *syncLog) *gateway.Gateway {
	t.Helper()
	cfg := configs.Default()
	cfg.Listeners[0].Listen = "127.0.0.1:0"
	zero := 0
	cfg.Listeners[0].BrokerPortBase = &zero
	cfg.Upstream = configs.NewUpstream(upstream)
	cfg.Upstream.MetadataRefresh = configs.Duration(500 * time.Millisecond)
	cfg.Upstream.DialTimeout = configs.Duration(2 * time.Second)
	cfg.Admin.Listen = configs.AdminOff
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Close(ctx)
	})
	return g
}

type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestGatewayUpstreamKill9: the upstream (the real tollgate binary with
// its built-in broker) is killed with SIGKILL and restarted on the same
// port, three times, while two idempotent acks=all producers, a
// two-member classic consumer group and a KIP-848 group run through a
// gateway. No client is
// restarted. Afterwards: every acknowledged record is in the log exactly
// once (idempotence held across the gateway's reconnects), both groups
// consumed every acknowledged record, no record failed (every error the
// gateway passed on was retriable), and the gateway's broker port for
// node 0 never moved.
func TestGatewayUpstreamKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary through three kill -9 cycles")
	}
	const (
		topic      = "faults"
		partitions = 4
		cycles     = 3
	)
	bin := tollgateBinary(t)
	dir := t.TempDir()
	up, err := startTollgate(t, bin, dir, "127.0.0.1:0", "--fsync", "always")
	if err != nil {
		t.Fatal(err)
	}
	upAddr := up.addr
	// Killed after the clients and the gateway closed (cleanups run last
	// in, first out), so the members can leave their groups.
	t.Cleanup(func() { up.kill() })
	createTestTopic(t, upAddr, topic, partitions)

	logs := &syncLog{}
	gw := startGatewayTo(t, upAddr, logs)
	gwAddr := gw.Server.Addr(0).String()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Producers: idempotent, acks=all, retrying through the outages.
	type producer struct {
		cl    *kgo.Client
		mu    sync.Mutex
		acked []string
		fails map[string]int
	}
	prods := make([]*producer, 2)
	stop := make(chan struct{})     // producers
	stopCons := make(chan struct{}) // group members
	var wg, consWG sync.WaitGroup
	for i := range prods {
		p := &producer{fails: map[string]int{}}
		p.cl = testClient(t, gwAddr,
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
			kgo.RetryTimeout(2*time.Minute),
			kgo.MaxBufferedRecords(200),
			kgo.ProduceRequestTimeout(5*time.Second),
			kgo.MetadataMinAge(100*time.Millisecond))
		prods[i] = p
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("%d:%d", i, seq)
				p.cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}, func(_ *kgo.Record, err error) {
					p.mu.Lock()
					defer p.mu.Unlock()
					if err != nil {
						p.fails[err.Error()]++
						return
					}
					p.acked = append(p.acked, v)
				})
				time.Sleep(time.Millisecond)
			}
		}()
	}

	// The groups: a classic one with two members and a KIP-848 one with
	// one, autocommitting, reading from the start.
	var seenMu sync.Mutex
	seen := map[string]map[string]int{"faults-g": {}, "faults-848": {}}
	groups := []string{"faults-g", "faults-g", "faults-848"}
	members := make([]*kgo.Client, len(groups))
	for i := range members {
		var extra []kgo.Opt
		if groups[i] == "faults-848" {
			extra = append(extra, kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
		}
		group := groups[i]
		members[i] = testClient(t, gwAddr, append(extra,
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
			kgo.FetchMaxWait(200*time.Millisecond), kgo.RetryTimeout(2*time.Minute),
			kgo.MetadataMinAge(100*time.Millisecond))...)
		cl := members[i]
		consWG.Add(1)
		go func() {
			defer consWG.Done()
			for {
				select {
				case <-stopCons:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				fs := cl.PollFetches(pctx)
				pcancel()
				seenMu.Lock()
				fs.EachRecord(func(r *kgo.Record) { seen[group][string(r.Value)]++ })
				seenMu.Unlock()
			}
		}()
	}
	ackedCount := func() int {
		n := 0
		for _, p := range prods {
			p.mu.Lock()
			n += len(p.acked)
			p.mu.Unlock()
		}
		return n
	}
	waitAcked := func(n int, why string) {
		for ackedCount() < n {
			if ctx.Err() != nil {
				t.Fatalf("%s: %d records acknowledged, want %d\ngateway log:\n%s", why, ackedCount(), n, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	port0 := func() string {
		a, ok := gw.Server.BrokerAddr(0, 0)
		if !ok {
			return ""
		}
		return a.String()
	}

	waitAcked(200, "before the first kill")
	firstPort := port0()
	if firstPort == "" {
		t.Fatal("the gateway serves no port for node 0")
	}
	for cycle := 0; cycle < cycles; cycle++ {
		before := ackedCount()
		up.kill()
		time.Sleep(time.Duration(300+700*cycle) * time.Millisecond) // the upstream stays away for a while
		up = restartOn(t, bin, dir, upAddr, "--fsync", "always")
		waitAcked(before+200, fmt.Sprintf("after restart %d", cycle+1))
		if p := port0(); p != firstPort {
			t.Fatalf("after restart %d node 0 is served at %s, was %s", cycle+1, p, firstPort)
		}
	}
	close(stop)
	for _, p := range prods {
		if err := p.cl.Flush(ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
	wg.Wait()

	// Every acknowledged record is in the log once.
	inLog := map[string]int{}
	for _, recs := range readAll(t, gwAddr, topic, partitions) {
		for _, r := range recs {
			inLog[string(r.Value)]++
		}
	}
	var acked []string
	for _, p := range prods {
		acked = append(acked, p.acked...)
		if len(p.fails) > 0 {
			// Every error the gateway passes on while the upstream is
			// away must be retriable, so no record fails within the
			// retry timeout.
			t.Errorf("records failed through the outages: %v", p.fails)
		}
	}
	for _, v := range acked {
		switch n := inLog[v]; {
		case n == 0:
			t.Fatalf("acknowledged record %s is not in the log", v)
		case n > 1:
			t.Fatalf("idempotent record %s is in the log %d times", v, n)
		}
	}
	// The group consumes every acknowledged record without its members
	// being restarted (at least once: a kill may lose progress that was
	// not yet committed, which a Kafka group re-reads too).
	unseen := func() int {
		seenMu.Lock()
		defer seenMu.Unlock()
		n := 0
		for _, g := range seen {
			for _, v := range acked {
				if g[v] == 0 {
					n++
				}
			}
		}
		return n
	}
	for unseen() > 0 {
		if ctx.Err() != nil {
			seenMu.Lock()
			per := map[string]int{}
			for g, m := range seen {
				per[g] = len(m)
			}
			seenMu.Unlock()
			t.Fatalf("the groups did not resume: %d of %d acknowledged records never consumed (distinct records seen per group: %v)\ngateway log:\n%s", unseen(), len(acked), per, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stopCons)
	consWG.Wait()
	t.Logf("%d acknowledged records over %d upstream kills, %d in the log", len(acked), cycles, len(inLog))
}
