package broker

import (
	"sort"
	"time"
)

// Observer receives the broker's storage and traffic measurements (the
// metrics layer adapts itself to it; package broker imports no metrics).
// Its methods are called from request and fsync goroutines, with no broker
// lock held, and must be quick and safe for concurrent use.
type Observer interface {
	// FsyncObserved is one fdatasync of a partition's segment file.
	FsyncObserved(d time.Duration)
	// BrokerBytes counts record bytes: appended by a Produce, and handed to
	// a Fetch or ShareFetch response.
	BrokerBytes(produce, fetch int)
}

// observeBytes reports record bytes to the configured Observer, if any.
func (b *Broker) observeBytes(produce, fetch int) {
	if b.cfg.Observer != nil && (produce > 0 || fetch > 0) {
		b.cfg.Observer.BrokerBytes(produce, fetch)
	}
}

// PartitionStat is one partition's log, for metrics.
type PartitionStat struct {
	Topic          string
	Partition      int32
	LogStartOffset int64
	LogEndOffset   int64 // the offset the next append gets
	SizeBytes      int64 // bytes of all its segment files
	// Compaction (cleanup.policy includes compact; cleaner.go): Compacted
	// says whether the rest means anything.
	Compacted      bool
	DirtyRatio     float64 // uncleaned share of the cleanable log
	CleanerRuns    int64   // cleanings since the broker opened
	CleanerReclaim int64   // bytes those cleanings removed
	KeylessRefused int64   // produces refused for a record without a key
}

// PartitionStats returns every partition's offsets and size, sorted by
// topic and partition. It holds the registry lock only to list the
// partitions.
func (b *Broker) PartitionStats() []PartitionStat {
	ps := b.allPartitions()
	out := make([]PartitionStat, 0, len(ps))
	for _, p := range ps {
		st := PartitionStat{
			Topic:          p.t.name,
			Partition:      p.idx,
			LogStartOffset: p.log.LogStartOffset(),
			LogEndOffset:   p.log.LogEndOffset(),
			SizeBytes:      p.log.Size(),
			Compacted:      p.log.Compacted(),
		}
		if st.Compacted {
			cs := p.log.CleanerStats()
			st.DirtyRatio, st.CleanerRuns, st.CleanerReclaim = cs.DirtyRatio, cs.Runs, cs.BytesReclaimed
			st.KeylessRefused = cs.KeylessRefused
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// ActiveTransactions is how many transactions have begun and not yet
// finished committing or aborting (Ongoing, PrepareCommit, PrepareAbort).
func (b *Broker) ActiveTransactions() int {
	n := 0
	for _, t := range b.txns.all() {
		t.mu.Lock()
		switch t.state {
		case txnOngoing, txnPrepareCommit, txnPrepareAbort:
			n++
		}
		t.mu.Unlock()
	}
	return n
}
