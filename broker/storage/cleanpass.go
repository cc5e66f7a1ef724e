package storage

import (
	"fmt"
	"math"
)

// One cleaning pass over the log from its start: which batches and
// records survive (Kafka's LogCleaner.cleanInto / MemoryRecords.filterTo).
// A cleanPass is owned by one run and walks batches in offset order.

// txnTracker follows transactions through a pass in offset order, as
// Kafka's CleanedTransactionMetadata: the aborted transactions (from the
// producer state) become "ongoing" when the pass reaches their first
// offset, and a marker learns whether any batch of its transaction was
// seen before it in this pass.
type txnTracker struct {
	aborted   []AbortedTxn // by FirstOffset, not yet reached
	ongoing   map[int64]*abortedSeen
	committed map[int64]bool // producers with a committed-transaction batch seen
}

type abortedSeen struct {
	first int64
	seen  bool // a batch of the transaction was read in this pass
}

func newTxnTracker(aborted []AbortedTxn) *txnTracker {
	return &txnTracker{aborted: aborted, ongoing: map[int64]*abortedSeen{}, committed: map[int64]bool{}}
}

// reach makes every aborted transaction starting at or before off ongoing.
func (t *txnTracker) reach(off int64) {
	for len(t.aborted) > 0 && t.aborted[0].FirstOffset <= off {
		a := t.aborted[0]
		t.ongoing[a.ProducerID] = &abortedSeen{first: a.FirstOffset}
		t.aborted = t.aborted[1:]
	}
}

// isAborted reports whether a transactional batch of pid at off belongs
// to an aborted transaction (used by the offset map, which does not
// track markers: it checks the ranges directly).
func (t *txnTracker) isAborted(pid, off int64) bool {
	for _, a := range t.aborted {
		if a.ProducerID == pid && a.FirstOffset <= off && off < a.LastOffset {
			return true
		}
	}
	return false
}

// onData reads a data batch and reports whether it may be discarded (it
// belongs to an aborted transaction).
func (t *txnTracker) onData(h *batchHeader) bool {
	t.reach(h.lastOffset())
	if !h.isTxn() {
		return false
	}
	if a := t.ongoing[h.producerID]; a != nil {
		a.seen = true
		return true
	}
	t.committed[h.producerID] = true
	return false
}

// onMarker reads a control batch of type ctl (0 abort, 1 commit) and
// reports whether it may be discarded: no batch of its transaction is
// left before it.
func (t *txnTracker) onMarker(h *batchHeader, ctl int16) bool {
	t.reach(h.lastOffset())
	pid := h.producerID
	switch ctl {
	case 0:
		a := t.ongoing[pid]
		delete(t.ongoing, pid)
		return a == nil || !a.seen
	case 1:
		had := t.committed[pid]
		delete(t.committed, pid)
		return !had
	}
	return false
}

// cleanPass decides the fate of every batch of one run.
type cleanPass struct {
	now       int64 // ms
	retention int64 // delete.retention.ms
	m         *offsetMap
	end       int64 // records at or past it are kept as they are
	lastData  map[int64]int64
	txns      *txnTracker
	// horizonNext is the earliest future delete horizon of a kept
	// tombstone or removable marker (0: none): when a run must come back.
	horizonNext int64
	// droppedMarkers are the offsets of abort markers removed, whose
	// AbortedTxn entries go with them.
	droppedMarkers map[int64]bool
}

func newCleanPass(p *cleanPlan, m *offsetMap, end, now int64) *cleanPass {
	return &cleanPass{
		now: now, retention: p.cfg.DeleteRetentionMs, m: m, end: end, lastData: p.lastData,
		txns: newTxnTracker(append([]AbortedTxn(nil), p.aborted...)), droppedMarkers: map[int64]bool{},
	}
}

func (c *cleanPass) noteHorizon(h int64) {
	if h > c.now && (c.horizonNext == 0 || h < c.horizonNext) {
		c.horizonNext = h
	}
}

// isLastOfProducer: the batch is its producer's last data batch, kept
// (empty if need be) so the producer's sequence survives.
func (c *cleanPass) isLastOfProducer(h *batchHeader) bool {
	if h.producerID < 0 {
		return false
	}
	last, ok := c.lastData[h.producerID]
	return ok && last == h.lastOffset()
}

// filterBatch returns the bytes to write for the batch in buf: buf itself,
// a rewritten batch, or nil to drop it.
func (c *cleanPass) filterBatch(buf []byte, h batchHeader) ([]byte, error) {
	if h.isControl() {
		return c.filterMarker(buf, h)
	}
	if c.txns.onData(&h) {
		return c.emptyOrNil(h)
	}
	return c.filterRecords(buf, h)
}

// filterMarker keeps a control batch until its transaction has nothing
// left before it and its delete horizon has passed.
func (c *cleanPass) filterMarker(buf []byte, h batchHeader) ([]byte, error) {
	ctl := controlType(buf, h)
	canDiscard := c.txns.onMarker(&h, ctl)
	hasHorizon := h.attributes&attrDeleteHorizon != 0
	switch {
	case canDiscard && hasHorizon && h.baseTimestamp <= c.now:
		if ctl == 0 {
			c.droppedMarkers[h.baseOffset] = true
		}
		return c.emptyOrNil(h)
	case canDiscard && !hasHorizon:
		horizon := c.now + c.retention
		c.noteHorizon(horizon)
		var recs []byte
		n := int32(0)
		if err := walkRecordsAs(buf, &h, true, func(r Record) error {
			recs, n = appendRecord(recs, &r), n+1
			return nil
		}); err != nil {
			return buf, nil // undecodable: kept as it is, never lost
		}
		return c.rebuild(h, recs, n, h.maxTimestamp, horizon)
	case canDiscard:
		c.noteHorizon(h.baseTimestamp)
	}
	return buf, nil
}

// emptyOrNil drops a batch, or keeps it empty when it is its producer's
// last (DefaultRecordBatch.writeEmptyHeader: no records, no compression,
// both timestamps the batch's MaxTimestamp).
func (c *cleanPass) emptyOrNil(h batchHeader) ([]byte, error) {
	if !c.isLastOfProducer(&h) {
		return nil, nil
	}
	attrs := h.attributes &^ (attrCompressionMask | attrDeleteHorizon)
	return newBatch(h, attrs, h.maxTimestamp, h.maxTimestamp, nil, 0)
}

// filterRecords keeps the records that are their key's latest (or past
// the map), dropping keyless records and tombstones past their horizon.
// Kept records are encoded as they are read (the walker's record bytes
// are valid only during its callback).
func (c *cleanPass) filterRecords(buf []byte, h batchHeader) ([]byte, error) {
	hasHorizon := h.attributes&attrDeleteHorizon != 0
	var kept []byte
	n := int32(0)
	all, tombstones := true, false
	maxTs := int64(math.MinInt64)
	err := walkRecordsAs(buf, &h, true, func(r Record) error {
		off := h.baseOffset + int64(r.OffsetDelta)
		keep := off >= c.end
		if !keep && r.Key != nil && off >= c.m.get(r.Key) {
			keep = r.Value != nil || !hasHorizon || c.now < h.baseTimestamp
		}
		if !keep {
			all = false
			return nil
		}
		kept, n = appendRecord(kept, &r), n+1
		tombstones = tombstones || r.Value == nil
		maxTs = max(maxTs, h.baseTimestamp+r.TimestampDelta)
		return nil
	})
	if err != nil {
		return buf, nil // undecodable: kept as it is, never lost
	}
	switch {
	case n == 0:
		return c.emptyOrNil(h)
	case tombstones && !hasHorizon:
		horizon := c.now + c.retention
		c.noteHorizon(horizon)
		return c.rebuild(h, kept, n, maxTs, horizon)
	case tombstones:
		c.noteHorizon(h.baseTimestamp)
	}
	if all {
		return buf, nil
	}
	return c.rebuild(h, kept, n, maxTs, -1)
}

// rebuild encodes a batch of h holding the n records recs (uncompressed,
// timestamp deltas from h's BaseTimestamp) with delete horizon horizon
// (-1: keep h's BaseTimestamp, and its horizon if it has one). A new
// horizon becomes the BaseTimestamp (KIP-534), so the record deltas are
// rebased on it and every record keeps its timestamp.
func (c *cleanPass) rebuild(h batchHeader, recs []byte, n int32, maxTs, horizon int64) ([]byte, error) {
	attrs, base := h.attributes, h.baseTimestamp
	if horizon >= 0 {
		attrs, base = attrs|attrDeleteHorizon, horizon
		var out []byte
		rh := h
		rh.numRecords = n
		err := walkSource(&sliceSource{b: recs}, &rh, true, func(r Record) error {
			r.TimestampDelta = h.baseTimestamp + r.TimestampDelta - horizon
			out = appendRecord(out, &r)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("rebase records of batch %d: %w", h.baseOffset, err)
		}
		recs = out
	}
	if h.attributes&attrLogAppendTime != 0 || n == 0 {
		maxTs = h.maxTimestamp
	}
	return newBatch(h, attrs, base, maxTs, recs, n)
}
