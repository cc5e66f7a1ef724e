package broker

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share-partition state, as Kafka's SharePartition: for one (share group,
// topic, partition), the share-partition start offset (SPSO: every offset
// below it is done) and the in-flight window [spso, end) of records that
// have been read for the group. Offsets at or past end have never been
// delivered and are available.
//
// Record states (Kafka's RecordState):
//
//	available --acquire (delivery count +1)--> acquired
//	acquired --accept--> acknowledged   (done)
//	acquired --reject, or gap--> archived (done)
//	acquired --release, lock expiry, member leaves--> available,
//	          or archived once the delivery count reached the limit
//	acquired --renew (KIP-1222)--> acquired with a fresh lock
//
// The window is a slice with one entry per offset (win[i] is offset
// spso+i), so acquisitions and acknowledgements, which work on offset
// ranges, cost no map operation or allocation per record (issue 22: the
// map of one heap object per record made ShareFetch 11x the broker CPU of
// Fetch). An entry in state recDone is done (acknowledged, archived, a
// control record, or a hole left by compaction). The SPSO moves up past
// done offsets at once, so win[0], if any, is not done.
//
// Durability: after every change the partition's state is written to the
// coordinator journal (one record per partition, key "s NUL group NUL
// topic NUL partition"; value shareStateRecord), acquired records as
// available with their delivery count, as Kafka's share coordinator
// persists them. An acknowledgement is answered once the journal has it
// durable (per the broker's fsync policy), so an acknowledged record is
// never delivered again; a record acquired before a crash is available
// again after it (at-least-once).
//
// Guarded by the owning group's mu.

// recState is a record's delivery state.
type recState uint8

const (
	recAvailable recState = iota
	recAcquired
	recDone
)

// maxShareHole is the largest run of missing offsets (a hole compaction
// left) kept as done entries inside a non-empty window; past a larger one
// acquisition stops until the window empties, and then jumps it.
const maxShareHole = defaultShareMaxRecordLocks

// Acknowledge types (Kafka's AcknowledgeType; 0 is a gap, KIP-932; 4 is
// renew, KIP-1222).
const (
	ackGap     int8 = 0
	ackAccept  int8 = 1
	ackRelease int8 = 2
	ackReject  int8 = 3
	ackRenew   int8 = 4
)

// shareRecord is one in-flight record.
type shareRecord struct {
	state      recState
	deliveries int16
	owner      string // member id while acquired
	deadline   time.Time
}

// sharePartition is one share-partition's state.
type sharePartition struct {
	tid         [16]byte // topic id the state is for (zero: written before ids were kept)
	spso, end   int64
	win         []shareRecord // offsets [spso, end); len(win) == end-spso
	live        int           // entries not done (available or acquired)
	acquired    int           // records in recAcquired
	minDeadline time.Time     // no acquisition lock ends before this
	dirty       bool          // changed since last written to the journal
	counters    *shareCounters
	undoBuf     []undoRec // reused by undoFor
}

func newSharePartition(start int64, counters *shareCounters) *sharePartition {
	return &sharePartition{spso: start, end: start, counters: counters}
}

// rec is the in-flight record at o, nil when o is done or outside the
// window. The pointer is valid until the window next grows or advances.
func (sp *sharePartition) rec(o int64) *shareRecord {
	if o < sp.spso || o >= sp.end {
		return nil
	}
	if r := &sp.win[o-sp.spso]; r.state != recDone {
		return r
	}
	return nil
}

// done marks o's record done (it must be in flight and not acquired).
func (sp *sharePartition) done(o int64) {
	sp.win[o-sp.spso] = shareRecord{state: recDone}
	sp.live--
}

// extendTo grows the window to end at end, the new offsets done.
func (sp *sharePartition) extendTo(end int64) {
	if end <= sp.end {
		return
	}
	if sp.spso == sp.end {
		sp.win = sp.win[:0]
		sp.spso, sp.end = end, end
		return
	}
	for range end - sp.end {
		sp.win = append(sp.win, shareRecord{state: recDone})
	}
	sp.end = end
}

// push appends o (== sp.end) as a new available record and returns it.
func (sp *sharePartition) push(deliveries int16) *shareRecord {
	sp.win = append(sp.win, shareRecord{deliveries: deliveries})
	sp.end++
	sp.live++
	return &sp.win[len(sp.win)-1]
}

// sharePart returns the state of tp for g, creating it at the offset
// share.auto.offset.reset names. Caller holds g.mu.
func (g *group) sharePart(tp tpKey, p *partition) *sharePartition {
	// State of an earlier topic of that name (deleted and created again,
	// so another topic id) is dropped: the new topic starts fresh. State
	// journaled without a topic id is kept unless its window is past the
	// high watermark.
	if sp := g.sg.parts[tp]; sp != nil && sp.sameTopic(p) {
		if sp.tid != p.t.id {
			sp.tid, sp.dirty = p.t.id, true
		}
		sp.fixStart(p.log.LogStartOffset())
		return sp
	}
	start := p.log.HighWatermark()
	switch reset := g.c.shareConfig(g.name).autoReset; {
	case reset == "earliest":
		start = p.log.LogStartOffset()
	case strings.HasPrefix(reset, "by_duration:"):
		d, _ := parseISODuration(reset[len("by_duration:"):])
		if off, _, err := p.log.OffsetForTimestamp(time.Now().Add(-d).UnixMilli()); err == nil && off >= 0 {
			start = off
		}
	}
	sp := newSharePartition(start, &g.c.share)
	sp.tid, sp.dirty = p.t.id, true
	g.sg.parts[tp] = sp
	return sp
}

// sameTopic reports whether sp is state of p's topic (not of a deleted
// topic of the same name).
func (sp *sharePartition) sameTopic(p *partition) bool {
	if sp.tid == ([16]byte{}) {
		return sp.end <= p.log.HighWatermark()
	}
	return sp.tid == p.t.id
}

// fixStart moves the SPSO up to the log start offset after retention or
// DeleteRecords removed records (they can no longer be delivered).
func (sp *sharePartition) fixStart(logStart int64) {
	if sp.spso >= logStart {
		return
	}
	n := min(logStart, sp.end) - sp.spso
	for i := range n {
		switch sp.win[i].state {
		case recAcquired:
			sp.acquired--
			sp.live--
		case recAvailable:
			sp.live--
		}
	}
	sp.win = sp.win[n:]
	sp.spso += n
	if sp.spso < logStart {
		sp.win = sp.win[:0]
		sp.spso, sp.end = logStart, logStart
	}
	sp.dirty = true
	sp.advance()
}

// advance moves the SPSO past done offsets.
func (sp *sharePartition) advance() {
	n := 0
	for n < len(sp.win) && sp.win[n].state == recDone {
		n++
	}
	if n == len(sp.win) {
		sp.win = sp.win[:0] // keep the array for the next records
	} else {
		sp.win = sp.win[n:]
	}
	sp.spso += int64(n)
}

// acquireOne acquires offset o (whose record is available) for member,
// or archives it if it reached the delivery limit. It reports whether the
// record was acquired.
func (sp *sharePartition) acquireOne(o int64, r *shareRecord, member string, deadline time.Time, limit int16) bool {
	if r.deliveries >= limit {
		sp.done(o)
		sp.counters.archivedAtLimit()
		return false
	}
	r.state, r.owner, r.deadline = recAcquired, member, deadline
	r.deliveries++
	sp.acquired++
	if sp.minDeadline.IsZero() || deadline.Before(sp.minDeadline) {
		sp.minDeadline = deadline
	}
	return true
}

// acquiredRanges collects acquired offsets into AcquiredRecords entries.
type acquiredRanges []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord

func (a *acquiredRanges) add(o int64, deliveries int16) {
	if n := len(*a); n > 0 {
		last := &(*a)[n-1]
		if last.LastOffset == o-1 && last.DeliveryCount == deliveries {
			last.LastOffset = o
			return
		}
	}
	ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
	ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = o, o, deliveries
	*a = append(*a, ar)
}

func (a acquiredRanges) count() int32 {
	var n int64
	for _, r := range a {
		n += r.LastOffset - r.FirstOffset + 1
	}
	return int32(n)
}

// acquireAvailable acquires up to budget available records of the
// window, lowest offset first.
func (sp *sharePartition) acquireAvailable(member string, budget int32, deadline time.Time, limit int16) acquiredRanges {
	var out acquiredRanges
	if sp.live == sp.acquired {
		return nil
	}
	n := int32(0)
	for o := sp.spso; o < sp.end && n < budget; o++ {
		r := &sp.win[o-sp.spso]
		if r.state != recAvailable {
			continue
		}
		if sp.acquireOne(o, r, member, deadline, limit) {
			out.add(o, r.deliveries)
			n++
		}
		sp.dirty = true
	}
	sp.advance()
	return out
}

// batchInfo is one record batch's header, as read from a log.
type batchInfo struct {
	base, last int64
	pid        int64
	control    bool
	txn        bool
	start, end int // byte range in the read buffer
}

// Record batch v2 header offsets (Kafka's DefaultRecordBatch).
const (
	batchLenOff        = 8
	batchAttrOff       = 21
	batchLastDeltaOff  = 23
	batchPIDOff        = 43
	batchHeaderLen     = 61
	batchAttrTxn       = 0x10
	batchAttrControl   = 0x20
	batchLogOverhead   = 12
	shareReadChunk     = 1 << 20 // bytes per read when re-reading released records
	shareReadMaxChunks = 64      // bound on re-read loops for one partition
)

// splitBatches parses whole batches from b (a partition read).
func splitBatches(b []byte) []batchInfo {
	var out []batchInfo
	for pos := 0; len(b)-pos >= batchHeaderLen; {
		size := batchLogOverhead + int(int32(binary.BigEndian.Uint32(b[pos+batchLenOff:])))
		if size < batchHeaderLen || pos+size > len(b) {
			break
		}
		base := int64(binary.BigEndian.Uint64(b[pos:]))
		attr := binary.BigEndian.Uint16(b[pos+batchAttrOff:])
		delta := int64(int32(binary.BigEndian.Uint32(b[pos+batchLastDeltaOff:])))
		out = append(out, batchInfo{base: base, last: base + delta, pid: int64(binary.BigEndian.Uint64(b[pos+batchPIDOff:])),
			control: attr&batchAttrControl != 0, txn: attr&batchAttrTxn != 0, start: pos, end: pos + size})
		pos += size
	}
	return out
}

// aborted reports whether batch bi belongs to an aborted transaction.
func abortedBatch(bi batchInfo, aborted []storage.AbortedTxn) bool {
	if !bi.txn {
		return false
	}
	for _, a := range aborted {
		if a.ProducerID == bi.pid && bi.base >= a.FirstOffset && bi.base <= a.LastOffset {
			return true
		}
	}
	return false
}

// acquireNew acquires records past the window from the batches read at
// sp.end: whole batches while fewer than budget records are acquired
// (BATCH_OPTIMIZED), or exactly budget records when strict (RECORD_LIMIT,
// KIP-1206). Control batches, aborted transactional batches (read_committed)
// and holes become done offsets. It returns the acquired ranges and the
// byte length of the batches to send.
func (sp *sharePartition) acquireNew(bs []batchInfo, aborted []storage.AbortedTxn, member string, budget int32, strict bool, deadline time.Time, limit int16) (acquiredRanges, int) {
	var out acquiredRanges
	n, sendTo := int32(0), 0
	for _, bi := range bs {
		if bi.last < sp.end {
			continue
		}
		if n >= budget {
			break
		}
		if bi.base > sp.end && sp.spso < sp.end && bi.base-sp.end > maxShareHole {
			break // a large compaction hole: acquired once the window empties
		}
		from := max(bi.base, sp.end)
		if bi.control || abortedBatch(bi, aborted) {
			sp.extendTo(bi.last + 1)
			continue
		}
		sp.extendTo(from)
		for o := from; o <= bi.last; o++ {
			if strict && n >= budget {
				break
			}
			r := sp.push(0)
			sp.acquireOne(o, r, member, deadline, limit)
			out.add(o, r.deliveries)
			n++
			sp.end = o + 1
		}
		sendTo = bi.end
		sp.dirty = true
	}
	sp.advance()
	return out, sendTo
}

// ackBatch is one acknowledgement batch of a ShareFetch or ShareAcknowledge.
type ackBatch struct {
	first, last int64
	types       []int8
}

// checkAckBatches validates the batches' shape (Kafka's
// validateAcknowledgementBatches): ordered, not overlapping, one type or
// one per offset, known types.
func checkAckBatches(bs []ackBatch, renew bool) int16 {
	prev := int64(-1)
	maxType := ackReject
	if renew {
		maxType = ackRenew
	}
	for _, b := range bs {
		switch {
		case b.first > b.last, b.first <= prev, len(b.types) == 0,
			len(b.types) > 1 && int64(len(b.types)) != b.last-b.first+1:
			return kerr.InvalidRequest.Code
		}
		for _, t := range b.types {
			if t < 0 || t > maxType {
				return kerr.InvalidRequest.Code
			}
		}
		prev = b.last
	}
	return 0
}

// ackType is the type that applies to offset o of b.
func (b ackBatch) ackType(o int64) int8 {
	if len(b.types) == 1 {
		return b.types[0]
	}
	return b.types[o-b.first]
}

// acknowledge applies member's acknowledgements, all or nothing: every
// offset (except gaps, and offsets below the SPSO, already done) must be a
// record member holds, else INVALID_RECORD_STATE and nothing changes. It
// reports whether records became available again.
func (sp *sharePartition) acknowledge(member string, bs []ackBatch, now time.Time, cfg shareSettings) (code int16, released bool) {
	for _, b := range bs {
		if b.last >= sp.end {
			return kerr.InvalidRecordState.Code, false
		}
		for o := max(b.first, sp.spso); o <= b.last; o++ {
			r := sp.rec(o)
			if r == nil && b.ackType(o) == ackGap {
				continue
			}
			if r == nil || r.state != recAcquired || r.owner != member {
				return kerr.InvalidRecordState.Code, false
			}
		}
	}
	for _, b := range bs {
		for o := max(b.first, sp.spso); o <= b.last; o++ {
			r := sp.rec(o)
			if r == nil {
				continue
			}
			switch b.ackType(o) {
			case ackRenew:
				r.deadline = now.Add(cfg.lockDuration)
				continue
			case ackRelease:
				released = sp.release(o, r, cfg.deliveryLimit) || released
			default: // accept, reject, gap: done
				sp.acquired--
				sp.done(o)
			}
		}
	}
	sp.dirty = true
	sp.advance()
	return 0, released
}

// release makes acquired record r at o available again, or archives it at
// the delivery limit. It reports whether it became available.
func (sp *sharePartition) release(o int64, r *shareRecord, limit int16) bool {
	sp.acquired--
	sp.dirty = true
	if r.deliveries >= limit {
		sp.done(o)
		sp.counters.archivedAtLimit()
		return false
	}
	r.state, r.owner, r.deadline = recAvailable, "", time.Time{}
	return true
}

// releaseWhere releases every acquired record for which match is true and
// reports whether any became available.
func (sp *sharePartition) releaseWhere(limit int16, match func(*shareRecord) bool) bool {
	if sp.acquired == 0 {
		return false
	}
	released := false
	for i := range sp.win {
		if r := &sp.win[i]; r.state == recAcquired && match(r) {
			released = sp.release(sp.spso+int64(i), r, limit) || released
		}
	}
	sp.advance()
	return released
}

// expire releases the records whose acquisition lock ended by now.
func (sp *sharePartition) expire(now time.Time, limit int16) bool {
	if sp.acquired == 0 || now.Before(sp.minDeadline) {
		return false
	}
	var next time.Time
	n := 0
	released := sp.releaseWhere(limit, func(r *shareRecord) bool {
		if !now.Before(r.deadline) {
			n++
			return true
		}
		if next.IsZero() || r.deadline.Before(next) {
			next = r.deadline
		}
		return false
	})
	sp.minDeadline = next
	sp.counters.expired(n)
	return released
}

// --- the lock sweep ---

// shareSweepLoop expires acquisition locks of every share group.
func (c *coordinator) shareSweepLoop(stop <-chan struct{}) {
	t := time.NewTicker(shareSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			c.sweepShareLocks(now)
		}
	}
}

func (c *coordinator) sweepShareLocks(now time.Time) {
	for _, g := range c.groups() {
		g.mu.Lock()
		if g.sg != nil && !g.dead {
			limit := g.c.shareConfig(g.name).deliveryLimit
			released := false
			for _, sp := range g.sg.parts {
				released = sp.expire(now, limit) || released
			}
			if released {
				g.sg.notify()
			}
			g.persistShareParts()
		}
		g.mu.Unlock()
	}
}

// releaseMemberRecords releases every record member holds. Caller holds
// g.mu.
func (g *group) releaseMemberRecords(member string) {
	limit := g.c.shareConfig(g.name).deliveryLimit
	released := false
	for _, sp := range g.sg.parts {
		released = sp.releaseWhere(limit, func(r *shareRecord) bool { return r.owner == member }) || released
	}
	if released {
		g.sg.notify()
	}
	g.persistShareParts()
}

// --- persistence ---

// shareStateRecord is the journal document of one share-partition.
type shareStateRecord struct {
	TopicID string `json:"topic_id,omitempty"` // hex; absent in records of older versions
	SPSO    int64  `json:"spso"`
	End     int64  `json:"end"`
	// Runs are [first, last, delivery count] of in-flight records.
	Runs [][3]int64 `json:"runs,omitempty"`
}

func sharePartKey(group string, tp tpKey) string {
	return shareGroupPartitionKeyPrefix + group + journalKeySep + tp.topic + journalKeySep + strconv.Itoa(int(tp.partition))
}

func (sp *sharePartition) record() shareStateRecord {
	rec := shareStateRecord{SPSO: sp.spso, End: sp.end}
	if sp.tid != ([16]byte{}) {
		rec.TopicID = hex.EncodeToString(sp.tid[:])
	}
	for i := range sp.win {
		o, r := sp.spso+int64(i), &sp.win[i]
		if r.state == recDone {
			continue
		}
		if n := len(rec.Runs); n > 0 && rec.Runs[n-1][1] == o-1 && rec.Runs[n-1][2] == int64(r.deliveries) {
			rec.Runs[n-1][1] = o
			continue
		}
		rec.Runs = append(rec.Runs, [3]int64{o, o, int64(r.deliveries)})
	}
	return rec
}

// persistShareParts writes every changed share-partition of g to the
// journal (one write) and returns when it is durable. A partition stays
// dirty until a write of it succeeds, so a failed write is retried by the
// next change or sweep. Caller holds g.mu.
func (g *group) persistShareParts() <-chan error {
	if g.dead || g.sg == nil {
		return closedErrChan // deleted meanwhile (a ShareFetch read ran unlocked)
	}
	var es []journalEntry
	var written []*sharePartition
	for tp, sp := range g.sg.parts {
		if !sp.dirty {
			continue
		}
		es = append(es, journalEntry{sharePartKey(g.name, tp), sp.encode()})
		written = append(written, sp)
	}
	ch, err := g.c.j.write(es)
	if err != nil {
		if g.c.share.writeFailed(time.Now()) {
			g.c.b.log.Error("write share-partition state (kept pending and retried; logged at most once a second)", "group", g.name, "err", err)
		}
		return failedErrChan(err)
	}
	for _, sp := range written {
		sp.dirty = false
	}
	return ch
}

// encode is sp's journal value.
func (sp *sharePartition) encode() []byte {
	raw, _ := json.Marshal(sp.record()) // numbers and a hex string only: cannot fail
	return raw
}

// shareUndo is what an acknowledgement can change in a sharePartition:
// its scalar fields and the entries of the acknowledged ranges (an
// acknowledgement never moves end; the entries advance drops from the
// front are done ones, which restore puts back as done).
type shareUndo struct {
	spso, end      int64
	live, acquired int
	minDeadline    time.Time
	dirty          bool
	recs           []undoRec
}

type undoRec struct {
	o int64
	r shareRecord
}

// undoFor records the state that acknowledging bs may change, so that
// restore can put it back if the change cannot be written. The cost is the
// acknowledged records, not the window, and no allocation once the
// partition's buffer is large enough.
func (sp *sharePartition) undoFor(bs []ackBatch) shareUndo {
	u := shareUndo{spso: sp.spso, end: sp.end, live: sp.live, acquired: sp.acquired, minDeadline: sp.minDeadline, dirty: sp.dirty}
	n := int64(0)
	for _, b := range bs {
		n += max(min(b.last+1, sp.end)-max(b.first, sp.spso), 0)
	}
	// The buffer is the partition's own, reused: an undo lives only while
	// the caller holds g.mu (applyShareAcks).
	if int64(cap(sp.undoBuf)) < n {
		sp.undoBuf = make([]undoRec, 0, n)
	}
	u.recs = sp.undoBuf[:0]
	for _, b := range bs {
		for o := max(b.first, sp.spso); o <= b.last && o < sp.end; o++ {
			u.recs = append(u.recs, undoRec{o, sp.win[o-sp.spso]})
		}
	}
	return u
}

// restore undoes the acknowledgement undoFor was taken for.
func (sp *sharePartition) restore(u shareUndo) {
	if k := sp.spso - u.spso; k > 0 {
		front := make([]shareRecord, k, k+int64(len(sp.win)))
		for i := range front {
			front[i].state = recDone
		}
		sp.win = append(front, sp.win...)
	}
	sp.spso, sp.end, sp.live, sp.acquired, sp.minDeadline, sp.dirty = u.spso, u.end, u.live, u.acquired, u.minDeadline, u.dirty
	for _, ur := range u.recs {
		sp.win[ur.o-sp.spso] = ur.r
	}
}

// failedErrChan yields err.
func failedErrChan(err error) <-chan error {
	ch := make(chan error, 1)
	ch <- err
	return ch
}

// dropShareTopic removes every share group's state for topic name with
// id (and state without an id) once the topic is deleted, as Kafka's share
// coordinator deletes the share-partition state of a deleted topic.
func (c *coordinator) dropShareTopic(name string, id [16]byte) {
	for _, g := range c.groups() {
		g.mu.Lock()
		if g.sg != nil && !g.dead {
			var es []journalEntry
			for tp, sp := range g.sg.parts {
				if tp.topic == name && (sp.tid == id || sp.tid == ([16]byte{})) {
					delete(g.sg.parts, tp)
					es = append(es, journalEntry{sharePartKey(g.name, tp), nil})
				}
			}
			if _, err := g.c.j.write(es); err != nil {
				// The topic id in the record still keeps a recreated
				// topic from using it.
				c.b.log.Warn("delete share state of a deleted topic", "group", g.name, "topic", name, "err", err)
			}
		}
		g.mu.Unlock()
	}
}

// deleteShareParts removes g's share-partition state for the topics in
// only (every topic if only is nil). Caller holds g.mu.
func (g *group) deleteShareParts(only map[string]bool) <-chan error {
	var es []journalEntry
	for tp := range g.sg.parts {
		if only == nil || only[tp.topic] {
			delete(g.sg.parts, tp)
			es = append(es, journalEntry{sharePartKey(g.name, tp), nil})
		}
	}
	return g.c.j.putMany(es)
}

// loadSharePart restores one journal entry: records acquired before the
// restart are available again.
func (c *coordinator) loadSharePart(e journalEntry) error {
	parts, ok := splitOffsetKey(shareToOffsetKey(e.key))
	if !ok {
		return fmt.Errorf("coordinator journal: bad share-partition key %q", e.key)
	}
	p, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil {
		return fmt.Errorf("coordinator journal: bad share-partition key %q: %w", e.key, err)
	}
	var rec shareStateRecord
	if err := json.Unmarshal(e.val, &rec); err != nil {
		return fmt.Errorf("coordinator journal: share-partition %q: %w", e.key, err)
	}
	g := c.gs[parts[0]]
	if g == nil {
		g = c.newGroup(parts[0])
		c.gs[parts[0]] = g
	}
	if !g.becomeShare() {
		return fmt.Errorf("coordinator journal: share-partition state for non-share group %q", parts[0])
	}
	sp := newSharePartition(rec.SPSO, &c.share)
	if rec.TopicID != "" {
		if n, err := hex.Decode(sp.tid[:], []byte(rec.TopicID)); err != nil || n != len(sp.tid) {
			return fmt.Errorf("coordinator journal: share-partition %q: bad topic id %q", e.key, rec.TopicID)
		}
	}
	for _, run := range rec.Runs {
		for o := max(run[0], sp.end); o <= run[1] && o < rec.End; o++ {
			sp.extendTo(o)
			sp.push(int16(run[2]))
		}
	}
	// Offsets past the last run are done: the window ends at rec.End.
	sp.extendTo(rec.End)
	sp.advance()
	g.sg.parts[tpKey{parts[1], int32(p)}] = sp
	return nil
}

// shareToOffsetKey maps a share-partition key onto the offset key shape
// so splitOffsetKey parses it.
func shareToOffsetKey(key string) string {
	return offsetKeyPrefix + key[len(shareGroupPartitionKeyPrefix):]
}
