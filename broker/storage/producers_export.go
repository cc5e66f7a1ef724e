package storage

import "sort"

// ProducerInfo is one idempotent or transactional producer's state in a
// partition, as DescribeProducers (KIP-664) reports it.
type ProducerInfo struct {
	ProducerID int64
	Epoch      int16
	// LastSequence is the last sequence number written in the current
	// epoch, -1 if only markers were written.
	LastSequence int32
	// TxnStartOffset is the first offset of the producer's open
	// transaction, -1 if none.
	TxnStartOffset int64
}

// Producers returns the partition's producer states, by producer id.
func (l *Log) Producers() []ProducerInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]ProducerInfo, 0, len(l.ps.entries))
	for pid, e := range l.ps.entries {
		pi := ProducerInfo{ProducerID: pid, Epoch: e.epoch, LastSequence: -1, TxnStartOffset: e.txnFirst}
		if n := len(e.batches); n > 0 {
			pi.LastSequence = e.batches[n-1].lastSeq
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
