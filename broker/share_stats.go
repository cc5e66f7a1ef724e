package broker

import (
	"sort"
	"sync/atomic"
	"time"
)

// Share-group counters and per-partition state for metrics (the gateway
// exports them as tollgate_broker_share_*; README "Metrics").
// shareCounters are safe for concurrent use; a nil *shareCounters counts
// nothing (tests of the state machine alone).
type shareCounters struct {
	lockExpired   atomic.Int64 // acquisition locks that ran out
	archived      atomic.Int64 // records archived at the delivery-count limit
	ackErrors     atomic.Int64 // acknowledgements refused (INVALID_REQUEST, INVALID_RECORD_STATE, unknown partition)
	lastAckErrLog atomic.Int64 // unix nanos of the last ack-error log line
	lastWriteLog  atomic.Int64 // unix nanos of the last state-write-failure log line
}

func (sc *shareCounters) expired(n int) {
	if sc != nil {
		sc.lockExpired.Add(int64(n))
	}
}

func (sc *shareCounters) archivedAtLimit() {
	if sc != nil {
		sc.archived.Add(1)
	}
}

// shareAckErrLogEvery bounds the ack-error log to one line a second: a
// client can send bad acknowledgements at will.
const shareAckErrLogEvery = time.Second

// ackRefused counts a refused acknowledgement and reports whether to log
// it now.
func (sc *shareCounters) ackRefused(now time.Time) bool {
	sc.ackErrors.Add(1)
	last := sc.lastAckErrLog.Load()
	return now.UnixNano()-last >= int64(shareAckErrLogEvery) && sc.lastAckErrLog.CompareAndSwap(last, now.UnixNano())
}

// writeFailed reports whether to log a failed share-state write now (at
// most once a second: the lock sweep retries every 100 ms).
func (sc *shareCounters) writeFailed(now time.Time) bool {
	last := sc.lastWriteLog.Load()
	return now.UnixNano()-last >= int64(shareAckErrLogEvery) && sc.lastWriteLog.CompareAndSwap(last, now.UnixNano())
}

// ShareCounters are the built-in broker's share-group totals since start.
type ShareCounters struct {
	LockExpired, Archived, AckErrors int64
}

// ShareCounters returns the share-group totals.
func (b *Broker) ShareCounters() ShareCounters {
	sc := &b.groups.share
	return ShareCounters{LockExpired: sc.lockExpired.Load(), Archived: sc.archived.Load(), AckErrors: sc.ackErrors.Load()}
}

// ShareStat is one share-partition of one share group.
type ShareStat struct {
	Group     string
	Topic     string
	Partition int32
	// StartOffset is the share-partition start offset; Acquired the
	// records locked by a member now; Lag the records from the start
	// offset to the high watermark not yet acknowledged or archived.
	StartOffset, Acquired, Lag int64
}

// ShareStats returns every share-partition, sorted by group, topic and
// partition. It takes each group's lock in turn.
func (b *Broker) ShareStats() []ShareStat {
	var out []ShareStat
	type window struct {
		p             *partition
		end, inFlight int64
	}
	var ws []window
	for _, g := range b.groups.groups() {
		g.mu.Lock()
		if g.sg != nil {
			for tp, sp := range g.sg.parts {
				out = append(out, ShareStat{Group: g.name, Topic: tp.topic, Partition: tp.partition, StartOffset: sp.spso,
					Acquired: int64(sp.acquired)})
				ws = append(ws, window{b.partitionOf(b.lookup(tp.topic), tp.partition), sp.end, int64(sp.live)})
			}
		}
		g.mu.Unlock()
	}
	for i, w := range ws {
		if w.p != nil { // records never delivered lie between the window end and the high watermark
			out[i].Lag = max(0, w.p.log.HighWatermark()-w.end) + w.inFlight
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, c := out[i], out[j]
		if a.Group != c.Group {
			return a.Group < c.Group
		}
		if a.Topic != c.Topic {
			return a.Topic < c.Topic
		}
		return a.Partition < c.Partition
	})
	return out
}
