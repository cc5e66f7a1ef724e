package broker

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/twmb/franz-go/pkg/kgo"
)

// countingObserver records what the broker reports.
type countingObserver struct {
	fsyncs, fsyncNanos, produce, fetch atomic.Int64
}

func (o *countingObserver) FsyncObserved(d time.Duration) {
	o.fsyncs.Add(1)
	o.fsyncNanos.Add(int64(d))
}

func (o *countingObserver) BrokerBytes(produce, fetch int) {
	o.produce.Add(int64(produce))
	o.fetch.Add(int64(fetch))
}

// TestStatsMatchClients checks the metrics-facing stats against what kgo
// clients produced and consumed: partition offsets and sizes, the bytes
// the Observer saw, fsyncs under fsync=always, group lag and members, and
// open transactions.
func TestStatsMatchClients(t *testing.T) {
	obs := &countingObserver{}
	b := groupBroker(t, t.TempDir(), func(c *Config) {
		c.Fsync, c.Observer = storage.FsyncAlways, obs
	})
	addr := startGateway(t, b)
	createTopic(t, addr, "st", 2, nil)
	const n = 200
	prod := newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceValues(t, prod, "st", "s", 0, n)

	stats := b.PartitionStats()
	var leo, size int64
	var got []int32
	for _, s := range stats {
		if s.Topic != "st" {
			continue
		}
		got = append(got, s.Partition)
		if s.LogStartOffset != 0 || s.LogEndOffset <= 0 || s.SizeBytes <= 0 {
			t.Fatalf("partition stat %+v", s)
		}
		leo += s.LogEndOffset
		size += s.SizeBytes
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 1 || leo != n {
		t.Fatalf("partitions %v with %d records in all, want [0 1] and %d", got, leo, n)
	}
	// The segment files hold exactly the batches produced.
	if p := obs.produce.Load(); p != size {
		t.Fatalf("observer saw %d produced bytes, logs hold %d", p, size)
	}
	if obs.fsyncs.Load() == 0 || obs.fsyncNanos.Load() <= 0 {
		t.Fatalf("no fsync observed under fsync=always")
	}

	// A group member consumes everything and commits: lag 0, one member.
	s := &seen{m: map[string]bool{}}
	m := startMember(t, addr, "st-g", "st", s)
	checkFor(t, func() bool {
		if s.len() < n {
			return false
		}
		var committed int64
		for _, l := range b.GroupLag() {
			if l.Group == "st-g" && l.Lag == 0 && l.Members == 1 {
				committed += l.Committed
			}
		}
		return committed == n
	})
	if f := obs.fetch.Load(); f < size {
		t.Fatalf("observer saw %d fetched bytes, the consumer read %d", f, size)
	}
	// More records: the lag shows them.
	produceValues(t, prod, "st", "s", n, n+10)
	m.leave()
	ends := map[int32]int64{}
	for _, s := range b.PartitionStats() {
		if s.Topic == "st" {
			ends[s.Partition] = s.LogEndOffset
		}
	}
	var lag, committed int64
	for _, l := range b.GroupLag() {
		if l.Group != "st-g" {
			continue
		}
		if l.Members != 0 || l.End != ends[l.Partition] || l.Lag != l.End-l.Committed {
			t.Fatalf("after the member left: %+v, partition end %d", l, ends[l.Partition])
		}
		lag += l.Lag
		committed += l.Committed
	}
	if lag+committed != n+10 {
		t.Fatalf("lag %d + committed %d, want %d records", lag, committed, n+10)
	}

	// A transaction counts while open.
	if a := b.ActiveTransactions(); a != 0 {
		t.Fatalf("%d active transactions before any", a)
	}
	tx := newClient(t, addr, kgo.TransactionalID("st-tx"), kgo.DefaultProduceTopic("st"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("t")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if a := b.ActiveTransactions(); a != 1 {
		t.Fatalf("%d active transactions with one open", a)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	checkFor(t, func() bool { return b.ActiveTransactions() == 0 })
}
