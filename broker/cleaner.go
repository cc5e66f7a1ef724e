package broker

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
)

// The log cleaner: one goroutine (Kafka's log.cleaner.threads=1) that, every
// CleanerBackoff, cleans each compacted partition whose dirty ratio,
// max.compaction.lag.ms or an expired tombstone horizon calls for it,
// filthiest first. The work itself is storage's (Log.Clean) and runs with no
// broker lock held; produce and fetch go on meanwhile.

// cleanerBackoff is CleanerBackoff (Open fills a zero one from the
// defaults table, configs.DefaultCleanerBackoff).
func (b *Broker) cleanerBackoff() time.Duration { return b.cfg.CleanerBackoff }

// cleanerLoop runs cleaning passes until the broker closes.
func (b *Broker) cleanerLoop() {
	defer b.bg.Done()
	t := time.NewTicker(b.cleanerBackoff())
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			b.cleanAll(now, false)
		}
	}
}

// cleanAll cleans every compacted partition that is due (all of them when
// force), filthiest first, stopping early when the broker closes. It returns
// how many partitions were cleaned.
func (b *Broker) cleanAll(now time.Time, force bool) int {
	type cand struct {
		p     *partition
		ratio float64
	}
	var cands []cand
	for _, p := range b.allPartitions() {
		if p.log.Compacted() {
			cands = append(cands, cand{p, p.log.CleanerStats().DirtyRatio})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].ratio > cands[j].ratio })
	cleaned := 0
	for _, c := range cands {
		select {
		case <-b.stop:
			return cleaned
		default:
		}
		res, err := c.p.log.Clean(storage.CleanOptions{Now: now, DedupeBufferBytes: b.cfg.CleanerDedupeBufferBytes, Force: force, Stop: b.stop})
		if err != nil {
			b.log.Warn("log cleaner", "partition", c.p.dirName(), "err", err)
			continue
		}
		if res.Cleaned {
			cleaned++
		}
	}
	return cleaned
}

// everySecond lets one event through per second (rate-limited logs of
// what clients can trigger at will). The zero value is ready.
type everySecond struct{ last atomic.Int64 }

func (e *everySecond) allow(now time.Time) bool {
	last := e.last.Load()
	return now.UnixNano()-last >= int64(time.Second) && e.last.CompareAndSwap(last, now.UnixNano())
}
