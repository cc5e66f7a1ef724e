package storage

import (
	"fmt"
	"math"
)

// Idempotent and transactional producer state, per partition, as Kafka's
// ProducerStateEntry keeps it: the producer's epoch and the sequence ranges
// and offsets of its last five batches (NUM_BATCHES_TO_RETAIN), enough to
// recognise a retry of any batch a client with max.in.flight <= 5 may
// resend. The state is a pure function of the batch headers in the log, so
// recovery rebuilds it by replaying headers after the last checkpoint.

const retainedBatches = 5

type seqBatch struct {
	firstSeq, lastSeq int32
	base              int64
}

type producerEntry struct {
	epoch      int16
	batches    []seqBatch // oldest first, at most retainedBatches
	lastOffset int64      // last offset this producer wrote
	txnFirst   int64      // first offset of its open transaction, -1 if none
}

// AbortedTxn is an aborted transaction's range in this partition, for the
// AbortedTransactions of a read_committed Fetch response.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64 // offset of the abort marker
}

// producerState is guarded by Log.mu.
type producerState struct {
	entries map[int64]*producerEntry
	aborted []AbortedTxn // ordered by LastOffset
}

func newProducerState() producerState {
	return producerState{entries: map[int64]*producerEntry{}}
}

// check decides whether batch h may be appended. neverWritten is true when
// the log has never held a record. It returns the original base offset of a
// duplicate.
func (ps *producerState) check(h *batchHeader, neverWritten bool) (dupBase int64, dup bool, err error) {
	if h.producerID < 0 {
		return 0, false, nil
	}
	e := ps.entries[h.producerID]
	if h.isControl() {
		// Markers come from the coordinator; only a fenced epoch is refused.
		if e != nil && h.producerEpoch < e.epoch {
			return 0, false, fmt.Errorf("%w: marker epoch %d, current %d", ErrInvalidProducerEpoch, h.producerEpoch, e.epoch)
		}
		return 0, false, nil
	}
	first, last := h.baseSequence, h.lastSequence()
	if e == nil {
		// Kafka 2.5+ (KIP-360, ProducerAppendInfo.checkSequence): no state
		// means the producer's records may have been removed with the log
		// prefix, so any first sequence is accepted -- except on a partition
		// that never held a record (KAFKA-15591), where a non-zero first
		// sequence means an earlier in-flight batch went missing.
		if neverWritten && first != 0 {
			return 0, false, fmt.Errorf("%w: producer %d starts at sequence %d on an empty partition", ErrOutOfOrderSequence, h.producerID, first)
		}
		return 0, false, nil
	}
	switch {
	case h.producerEpoch < e.epoch:
		return 0, false, fmt.Errorf("%w: producer %d epoch %d, current %d", ErrInvalidProducerEpoch, h.producerID, h.producerEpoch, e.epoch)
	case h.producerEpoch > e.epoch:
		if first != 0 {
			return 0, false, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d", ErrOutOfOrderSequence, h.producerID, h.producerEpoch, first)
		}
		return 0, false, nil
	}
	for _, b := range e.batches {
		if b.firstSeq == first && b.lastSeq == last {
			return b.base, true, nil
		}
	}
	if len(e.batches) == 0 {
		// Only a marker was written in this epoch, so the next sequence is
		// unknown; Kafka requires 0.
		if first != 0 {
			return 0, false, fmt.Errorf("%w: producer %d sequence %d, expected 0", ErrOutOfOrderSequence, h.producerID, first)
		}
		return 0, false, nil
	}
	if want := incSeq(e.batches[len(e.batches)-1].lastSeq, 1); first != want {
		return 0, false, fmt.Errorf("%w: producer %d sequence %d, expected %d", ErrOutOfOrderSequence, h.producerID, first, want)
	}
	return 0, false, nil
}

// update records an appended batch (offsets assigned). ctl is the control
// record type of a marker (0 abort, 1 commit) or -1.
func (ps *producerState) update(h *batchHeader, ctl int16) {
	if h.producerID < 0 {
		return
	}
	e := ps.entries[h.producerID]
	if e == nil {
		e = &producerEntry{epoch: h.producerEpoch, txnFirst: -1}
		ps.entries[h.producerID] = e
	}
	if h.producerEpoch != e.epoch {
		e.epoch = h.producerEpoch
		e.batches = e.batches[:0]
	}
	e.lastOffset = h.lastOffset()
	if h.isControl() {
		if ctl == 0 && e.txnFirst >= 0 {
			ps.aborted = append(ps.aborted, AbortedTxn{ProducerID: h.producerID, FirstOffset: e.txnFirst, LastOffset: h.baseOffset})
		}
		e.txnFirst = -1
		return
	}
	if h.isTxn() && e.txnFirst < 0 {
		e.txnFirst = h.baseOffset
	}
	if len(e.batches) == retainedBatches {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:retainedBatches-1]
	}
	e.batches = append(e.batches, seqBatch{firstSeq: h.baseSequence, lastSeq: h.lastSequence(), base: h.baseOffset})
}

// firstUnstable is the first offset of the oldest open transaction, or
// MaxInt64.
func (ps *producerState) firstUnstable() int64 {
	m := int64(math.MaxInt64)
	for _, e := range ps.entries {
		if e.txnFirst >= 0 && e.txnFirst < m {
			m = e.txnFirst
		}
	}
	return m
}

// truncateHead forgets producers whose records are all below logStart, as
// Kafka's ProducerStateManager.truncateHead does, and aborted ranges that
// ended before it.
func (ps *producerState) truncateHead(logStart int64) {
	for pid, e := range ps.entries {
		if e.lastOffset < logStart && e.txnFirst < 0 {
			delete(ps.entries, pid)
		}
	}
	i := 0
	for i < len(ps.aborted) && ps.aborted[i].LastOffset < logStart {
		i++
	}
	ps.aborted = append([]AbortedTxn(nil), ps.aborted[i:]...)
}

func (ps *producerState) clone() producerState {
	c := producerState{entries: make(map[int64]*producerEntry, len(ps.entries)), aborted: append([]AbortedTxn(nil), ps.aborted...)}
	for pid, e := range ps.entries {
		ce := *e
		ce.batches = append([]seqBatch(nil), e.batches...)
		c.entries[pid] = &ce
	}
	return c
}

// lastDataOffsets maps every tracked producer to the last offset of its
// last data batch (the batch the cleaner keeps, maybe empty, so the
// producer's sequence survives; Kafka's lastRecordsOfActiveProducers).
func (ps *producerState) lastDataOffsets() map[int64]int64 {
	out := make(map[int64]int64, len(ps.entries))
	for pid, e := range ps.entries {
		if n := len(e.batches); n > 0 {
			b := e.batches[n-1]
			delta := int64(b.lastSeq) - int64(b.firstSeq)
			if delta < 0 { // the sequence wrapped past MaxInt32
				delta += math.MaxInt32 + 1
			}
			out[pid] = b.base + delta
		}
	}
	return out
}
