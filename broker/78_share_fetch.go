package broker

import (
	"bytes"
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareFetch: v1-2 (KIP-932, KIP-1206, KIP-1222)
//
// Behavior (share_partition.go has the record model, share_session.go the
// sessions):
// * Acquires available records of the session's partitions for the
//   member under an acquisition lock (share.record.lock.duration.ms) and
//   returns their batches with AcquiredRecords (offset ranges and delivery
//   counts). Released records are delivered again first, lowest offset
//   first; then records past the in-flight window, which holds at most
//   group.share.partition.max.record.locks (2000) offsets.
// * MaxRecords bounds the records acquired (0: 500); in BATCH_OPTIMIZED
//   mode (ShareAcquireMode 0) whole batches are acquired, so it may be
//   exceeded up to a batch boundary; RECORD_LIMIT (1, v2) acquires exactly
//   up to it. MaxBytes, capped at fetch.max.bytes (55 MiB) as Kafka's
//   KafkaApis does, bounds the bytes returned, except that the first
//   partition with records returns at least one batch (KIP-74; MaxBytes 0
//   returns one). New records are read in 1 MiB steps while the record
//   budget lasts, with the group's lock released.
// * Session partitions: an unknown topic id or partition is answered with
//   UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION once and not kept; a
//   session holds at most 10000 partitions (more: INVALID_REQUEST on the
//   partition).
// * Piggybacked AcknowledgementBatches are applied first (per partition,
//   all or nothing: AcknowledgeErrorCode INVALID_RECORD_STATE if any
//   offset is not acquired by this member, INVALID_REQUEST for a bad
//   batch; COORDINATOR_NOT_AVAILABLE, nothing applied, if the journal
//   write fails); the response waits until they are durable in the
//   coordinator journal. Acquisitions are written too but not waited for (a crash may
//   leave a delivery uncounted; the record is delivered again). Acknowledgements in a request opening a session (epoch 0)
//   are INVALID_REQUEST.
// * IsRenewAck (v2): acknowledgements only, renew (type 4) allowed; any
//   fetch limit set or a partition without acknowledgements is
//   INVALID_REQUEST; nothing is fetched.
// * Long polling: when nothing was acquired and MaxWaitMillis > 0, the
//   answer waits until a session partition's high watermark moves, records
//   of the group become available again (release, lock expiry, a member
//   leaving), the wait ends or the connection closes.
// * read_committed (share.isolation.level): records up to the last stable
//   offset; aborted transactional batches are archived, never delivered.
// * A group id in use by a classic or consumer group, or holding
//   committed offsets, is GROUP_ID_NOT_FOUND. A request that fails leaves
//   no new group behind.
// * At most 2000 share sessions are open (group.share.max.share.sessions);
//   opening one more is SHARE_SESSION_LIMIT_REACHED.
//
// Version notes:
// * v0 (Kafka 4.0 early access) was removed in Kafka 4.1.
// * v1: MaxRecords, BatchSize, AcquisitionLockTimeoutMillis; no
//   PartitionMaxBytes
// * v2: ShareAcquireMode, IsRenewAck, renew acknowledgements (KIP-1222)

func init() { regKey(int16(kmsg.ShareFetch), 1, 2, handleShareFetch) }

// partID names a partition by topic id, as share requests do.
type partID struct {
	tid [16]byte
	p   int32
}

// shareFetch is one ShareFetch in progress.
type shareFetch struct {
	c      *Conn
	req    *kmsg.ShareFetchRequest
	resp   *kmsg.ShareFetchResponse
	member string
	cfg    shareSettings
	parts  map[partID]*kmsg.ShareFetchResponseTopicPartition
	recs   map[partID]*shareRecs // each partition's batches, sent from the segment files
	order  []partID
	sess   *shareSession
	waits  []<-chan error
}

func handleShareFetch(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	group, member := deref(req.GroupID), deref(req.MemberID)
	sf := &shareFetch{c: c, req: req, resp: resp, member: member, cfg: c.b.groups.shareConfig(group),
		parts: map[partID]*kmsg.ShareFetchResponseTopicPartition{}, recs: map[partID]*shareRecs{}}
	resp.AcquisitionLockTimeoutMillis = int32(sf.cfg.lockDuration.Milliseconds())
	if code := sf.check(group); code != 0 {
		resp.ErrorCode = code
		r(encode(resp), nil)
		return
	}
	g := c.b.groups.lock(group, true)
	if g.sg == nil && !g.becomeShare() {
		g.mu.Unlock()
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		resp.ErrorMessage = kmsg.StringPtr("group " + group + " is not a share group")
		r(encode(resp), nil)
		return
	}
	if code := sf.session(g); code != 0 {
		g.dropIfUnusedShare()
		g.mu.Unlock()
		resp.ErrorCode = code
		r(encode(resp), nil)
		return
	}
	sf.applyAcks(g)
	total, canWait := int32(0), false
	if sf.sess != nil {
		if !req.IsRenewAck {
			total = sf.acquire(g)
			canWait = len(sf.sess.parts) > 0
		}
		sf.sess.bump()
	}
	durable := g.persistShareParts()
	if req.ShareSessionEpoch == -1 {
		// Only acknowledgements (applyAcks waits for their own writes)
		// and a close's releases are promised durable; a crash after an
		// acquisition at worst delivers the record again without
		// counting that delivery.
		sf.waits = append(sf.waits, durable)
	}
	g.mu.Unlock()
	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if total > 0 || maxWait <= 0 || !canWait {
		sf.reply(r)
		return
	}
	go sf.longPoll(g, maxWait, r)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// check validates the request before any state is touched.
func (sf *shareFetch) check(group string) int16 {
	req := sf.req
	switch {
	case strings.TrimSpace(group) == "":
		return kerr.InvalidGroupID.Code
	case sf.member == "" || len(sf.member) > shareMemberIDMaxLen:
		return kerr.InvalidRequest.Code
	case req.ShareSessionEpoch == 0 && hasShareFetchAcks(req):
		return kerr.InvalidRequest.Code
	}
	if req.IsRenewAck {
		if req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0 {
			return kerr.InvalidRequest.Code
		}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if len(p.AcknowledgementBatches) == 0 {
					return kerr.InvalidRequest.Code
				}
			}
		}
	}
	return 0
}

func hasShareFetchAcks(req *kmsg.ShareFetchRequest) bool {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) > 0 {
				return true
			}
		}
	}
	return false
}

// session opens, updates or closes the member's share session. On close
// (-1) sf.sess stays nil once the acks are applied. Caller holds g.mu.
func (sf *shareFetch) session(g *group) int16 {
	req := sf.req
	cur := g.sg.sessions[sf.member]
	switch {
	case req.ShareSessionEpoch == -1:
		if cur == nil {
			return kerr.ShareSessionNotFound.Code
		}
		return 0
	case req.ShareSessionEpoch == 0:
		if sf.sess = g.openShareSession(sf.c, sf.member); sf.sess == nil {
			return kerr.ShareSessionLimitReached.Code
		}
	case cur == nil:
		return kerr.ShareSessionNotFound.Code
	case cur.epoch != req.ShareSessionEpoch:
		return kerr.InvalidShareSessionEpoch.Code
	default:
		sf.sess = cur
	}
	sf.addPartitions(req.Topics)
	for _, ft := range req.ForgottenTopicsData {
		for _, p := range ft.Partitions {
			sf.sess.forget(ft.TopicID, p)
		}
	}
	return 0
}

// addPartitions adds the request's partitions to the session. An unknown
// topic id or partition is answered with its error in this response and
// not kept (the session cannot grow with names that do not exist), as is a
// partition past maxShareSessionPartitions. Caller holds g.mu.
func (sf *shareFetch) addPartitions(ts []kmsg.ShareFetchRequestTopic) {
	for _, t := range ts {
		topic := sf.c.b.lookupID(t.TopicID)
		for _, p := range t.Partitions {
			switch {
			case topic == nil:
				sf.part(t.TopicID, p.Partition).ErrorCode = kerr.UnknownTopicID.Code
			case sf.c.b.partitionOf(topic, p.Partition) == nil:
				sf.part(t.TopicID, p.Partition).ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !sf.sess.add(t.TopicID, p.Partition):
				rp := sf.part(t.TopicID, p.Partition)
				rp.ErrorCode = kerr.InvalidRequest.Code
				rp.ErrorMessage = kmsg.StringPtr("a share session holds at most " + strconv.Itoa(maxShareSessionPartitions) + " partitions")
			}
		}
	}
}

// part returns the response entry of (tid, p), adding it.
func (sf *shareFetch) part(tid [16]byte, p int32) *kmsg.ShareFetchResponseTopicPartition {
	k := partID{tid, p}
	if rp := sf.parts[k]; rp != nil {
		return rp
	}
	rp := kmsg.NewShareFetchResponseTopicPartition()
	rp.Partition = p
	rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
	sf.parts[k] = &rp
	sf.order = append(sf.order, k)
	return &rp
}

// applyAcks applies the piggybacked acknowledgements and, for a closing
// request, ends the session. Caller holds g.mu.
func (sf *shareFetch) applyAcks(g *group) {
	for _, t := range sf.req.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			bs := make([]ackBatch, 0, len(p.AcknowledgementBatches))
			for _, b := range p.AcknowledgementBatches {
				bs = append(bs, ackBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes})
			}
			rp := sf.part(t.TopicID, p.Partition)
			var durable <-chan error
			rp.AcknowledgeErrorCode, durable = g.ackShare(t.TopicID, p.Partition, sf.member, bs, sf.req.IsRenewAck, sf.cfg)
			if durable != nil {
				sf.waits = append(sf.waits, durable)
			}
		}
	}
	if sf.req.ShareSessionEpoch == -1 {
		g.closeShareSession(sf.member)
	}
}

// ackShare applies one partition's acknowledgements and returns the code
// and, when applied, the journal write's durability result to wait for.
// Caller holds g.mu.
func (g *group) ackShare(tid [16]byte, idx int32, member string, bs []ackBatch, renew bool, cfg shareSettings) (int16, <-chan error) {
	code, durable := g.applyShareAcks(tid, idx, member, bs, renew, cfg)
	if code != 0 && code != kerr.CoordinatorNotAvailable.Code && g.c.share.ackRefused(time.Now()) {
		g.c.b.log.Warn("share acknowledgement refused (logged at most once a second; counted in tollgate_broker_share_ack_errors_total)",
			"group", g.name, "member", member, "partition", idx, "error", kerr.ErrorForCode(code))
	}
	return code, durable
}

// applyShareAcks validates and applies one partition's acknowledgements
// and writes the result to the journal; if the write fails the change is
// undone (COORDINATOR_NOT_AVAILABLE), so the client's retry finds its
// records still acquired. g.mu is held throughout: no one sees the state
// in between.
func (g *group) applyShareAcks(tid [16]byte, idx int32, member string, bs []ackBatch, renew bool, cfg shareSettings) (int16, <-chan error) {
	if code := checkAckBatches(bs, renew); code != 0 {
		return code, nil
	}
	t := g.c.b.lookupID(tid)
	if t == nil {
		return kerr.UnknownTopicID.Code, nil
	}
	p := g.c.b.partitionOf(t, idx)
	if p == nil {
		return kerr.UnknownTopicOrPartition.Code, nil
	}
	tp := tpKey{t.name, idx}
	sp := g.sharePart(tp, p)
	undo := sp.undoFor(bs)
	if code, _ := sp.acknowledge(member, bs, time.Now(), cfg); code != 0 {
		return code, nil
	}
	durable, err := g.c.j.write([]journalEntry{{sharePartKey(g.name, tp), sp.encode()}})
	if err != nil {
		sp.restore(undo)
		if g.c.share.writeFailed(time.Now()) {
			g.c.b.log.Error("share acknowledgements not written; nothing applied (logged at most once a second)", "group", g.name, "partition", idx, "err", err)
		}
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	sp.dirty = false
	// Released records are available again, and finished ones may have
	// made room in a full in-flight window.
	g.sg.notify()
	return 0, durable
}

// acquire acquires records on every session partition, starting at a
// rotating position for fairness, and fills the response. It returns the
// records acquired. Caller holds g.mu.
func (sf *shareFetch) acquire(g *group) int32 {
	budget := sf.req.MaxRecords
	if budget <= 0 {
		budget = defaultShareMaxRecords
	}
	// As Kafka's KafkaApis: min(MaxBytes, fetch.max.bytes); at 0 (or
	// less) the first partition with records still returns one batch
	// (KIP-74), and the loop below stops there.
	bytesLeft := int(min(sf.req.MaxBytes, shareFetchMaxBytes))
	ids := make([]partID, 0, sf.sess.size)
	for _, tid := range sf.sess.order {
		for p, needs := range sf.sess.parts[tid] {
			ids = append(ids, partID{tid, p})
			if needs {
				sf.part(tid, p)
			}
		}
	}
	slices.SortFunc(ids, comparePartIDs)
	total := int32(0)
	for i := range ids {
		id := ids[(i+int(sf.sess.epoch))%len(ids)]
		if budget-total <= 0 || (bytesLeft <= 0 && total > 0) {
			break
		}
		recs, ranges, code := g.shareAcquirePart(id, sf.member, budget-total, sf.req.ShareAcquireMode == 1, sf.cfg, max(bytesLeft, 1), sf.valid)
		if !sf.valid(g) {
			recs.release()
			break // the group or the session ended while a read ran unlocked
		}
		if code == 0 && len(ranges) == 0 {
			recs.release()
			continue
		}
		rp := sf.part(id.tid, id.p)
		rp.ErrorCode, rp.AcquiredRecords = code, ranges
		sf.recs[id].release()
		sf.recs[id] = recs
		total += acquiredRanges(ranges).count()
		if recs != nil {
			bytesLeft -= recs.size
		}
	}
	for _, k := range sf.order {
		ps := sf.sess.parts[k.tid]
		if _, ok := ps[k.p]; !ok {
			continue
		}
		switch code := sf.parts[k].ErrorCode; code {
		case kerr.UnknownTopicID.Code, kerr.UnknownTopicOrPartition.Code:
			// Deleted since it joined the session: answered once, then
			// dropped (Kafka's clients fetch again by topic id).
			sf.sess.forget(k.tid, k.p)
		default:
			ps[k.p] = code != 0
		}
	}
	return total
}

// comparePartIDs orders ids by topic id then partition.
func comparePartIDs(a, b partID) int {
	if c := bytes.Compare(a.tid[:], b.tid[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.p, b.p)
}

// valid reports whether the fetch's group and session are still in place
// (g.mu is released during reads). Caller holds g.mu.
func (sf *shareFetch) valid(g *group) bool {
	return !g.dead && g.sg != nil && g.sg.sessions[sf.member] == sf.sess
}

// unlocked runs fn with g.mu released: log reads and copies run there, so
// a large read never blocks the group's other members. Caller holds g.mu.
func (g *group) unlocked(fn func()) {
	g.mu.Unlock()
	defer g.mu.Lock()
	fn()
}

// shareAcquirePart acquires up to budget records of one partition for
// member and returns their batches, as read results of the segment files
// (sent with sendfile, as Fetch's; nothing is copied or decoded: the
// bookkeeping needs only the batch headers). Caller holds g.mu; the log
// reads run with it released (state is decided under the lock: records
// already acquired are re-read unlocked; new records are acquired only if
// the window did not move during their read).
func (g *group) shareAcquirePart(id partID, member string, budget int32, strict bool, cfg shareSettings, maxBytes int, valid func(*group) bool) (*shareRecs, acquiredRanges, int16) {
	t := g.c.b.lookupID(id.tid)
	if t == nil {
		return nil, nil, kerr.UnknownTopicID.Code
	}
	p := g.c.b.partitionOf(t, id.p)
	if p == nil {
		return nil, nil, kerr.UnknownTopicOrPartition.Code
	}
	tp := tpKey{t.name, id.p}
	sp := g.sharePart(tp, p)
	deadline := time.Now().Add(cfg.lockDuration)
	upTo := p.log.HighWatermark()
	if cfg.readCommitted {
		upTo = p.log.LastStableOffset()
	}
	r1 := sp.acquireAvailable(member, budget, deadline, cfg.deliveryLimit)
	out := &shareRecs{}
	if len(r1) > 0 {
		var err error
		g.unlocked(func() { err = readShareRange(p, r1[0].FirstOffset, r1[len(r1)-1].LastOffset, upTo, out) })
		if err != nil {
			g.c.b.log.Error("share fetch read", "partition", p.dirName(), "err", err)
		}
	}
	budget -= r1.count()
	ranges := r1
	// New records, read in shareReadChunk steps so that what is read
	// follows what the record budget and MaxBytes can use (a 1 GiB backlog
	// costs one chunk for a one-record fetch, not a 1 GiB read).
	for range shareReadMaxChunks {
		if !valid(g) || g.sg.parts[tp] != sp {
			break
		}
		room := defaultShareMaxRecordLocks - (sp.end - sp.spso)
		if budget <= 0 || sp.end >= upTo || room <= 0 || (maxBytes <= out.size && out.size > 0) {
			break
		}
		r2, chunk, moved, code := g.shareAcquireChunk(p, tp, sp, member, min(int64(budget), room), strict, cfg, deadline, upTo,
			max(min(maxBytes-out.size, shareReadChunk), 1), valid)
		if code != 0 {
			return out, ranges, code
		}
		if !moved {
			break
		}
		out.addNew(chunk)
		ranges = append(ranges, r2...)
		budget -= r2.count()
	}
	return out, ranges, 0
}

// shareChunk is a read result and its batch headers.
type shareChunk struct {
	rr *storage.ReadResult
	hs []storage.BatchHeader
}

// shareAcquireChunk reads up to maxBytes (at least one batch) at sp.end
// and acquires up to budget of its records. It returns the acquired
// ranges, the batches holding them and whether to read on (false:
// nothing more to read now). The read runs with g.mu released; if another
// fetch moved the window meanwhile, the read is dropped and the caller
// reads again from the new end.
func (g *group) shareAcquireChunk(p *partition, tp tpKey, sp *sharePartition, member string, budget int64, strict bool, cfg shareSettings,
	deadline time.Time, upTo int64, maxBytes int, valid func(*group) bool) (acquiredRanges, shareChunk, bool, int16) {
	from := sp.end
	var ch shareChunk
	var err error
	g.unlocked(func() { ch, err = readShareChunk(p, from, maxBytes, upTo) })
	if err != nil {
		if code := storageCode(err); code != kerr.KafkaStorageError.Code {
			return nil, shareChunk{}, false, code
		}
		g.c.b.log.Error("share fetch read", "partition", p.dirName(), "err", err)
		return nil, shareChunk{}, false, kerr.KafkaStorageError.Code
	}
	if !valid(g) || g.sg.parts[tp] != sp {
		ch.release()
		return nil, shareChunk{}, false, 0
	}
	if sp.end != from {
		ch.release()
		return nil, shareChunk{}, true, 0 // raced with another fetch: read again
	}
	bs := make([]batchInfo, len(ch.hs))
	for i, h := range ch.hs {
		bs[i] = batchInfo{base: h.BaseOffset, last: h.LastOffset, pid: h.ProducerID, control: h.Control, txn: h.Transactional, start: h.Pos, end: h.End}
	}
	var aborted []storage.AbortedTxn
	if cfg.readCommitted {
		aborted = p.log.AbortedTransactions(from, ch.rr.NextOffset)
	}
	r2, sendTo := sp.acquireNew(bs, aborted, member, int32(budget), strict, deadline, cfg.deliveryLimit)
	ch.cut(sendTo)
	return r2, ch, sp.end > from, 0
}

// readShareChunk reads up to maxBytes (at least one batch) of p's log
// from offset, below upTo, and its batch headers.
func readShareChunk(p *partition, from int64, maxBytes int, upTo int64) (shareChunk, error) {
	rr, err := p.log.ReadUpTo(from, int32(maxBytes), upTo)
	if err != nil {
		return shareChunk{}, err
	}
	hs, err := rr.Headers()
	if err != nil {
		rr.Release()
		return shareChunk{}, fmt.Errorf("share fetch read %s: %w", p.dirName(), err)
	}
	return shareChunk{rr, hs}, nil
}

func (ch *shareChunk) release() {
	if ch.rr != nil {
		ch.rr.Release()
		ch.rr, ch.hs = nil, nil
	}
}

// cut keeps the batches ending at or before byte n.
func (ch *shareChunk) cut(n int) {
	if ch.rr == nil {
		return
	}
	if n <= 0 {
		ch.release()
		return
	}
	ch.rr.Slice(0, n)
	k := 0
	for k < len(ch.hs) && ch.hs[k].End <= n {
		k++
	}
	ch.hs = ch.hs[:k]
}

// shareRecs is one partition's records of a ShareFetch answer: read
// results of the segment files, in offset order, each batch once.
type shareRecs struct {
	rrs  []*storage.ReadResult
	size int
	last int64 // base offset of the last batch held; -1: none
	has  bool
}

// addNew appends the batches of ch that start past the last batch held
// (a batch holding both redelivered and new records is sent once); ch
// moves into rs.
func (rs *shareRecs) addNew(ch shareChunk) {
	if ch.rr == nil {
		return
	}
	k := 0
	for rs.has && k < len(ch.hs) && ch.hs[k].BaseOffset <= rs.last {
		k++
	}
	if k == len(ch.hs) {
		ch.release()
		return
	}
	if k > 0 {
		ch.rr.Slice(ch.hs[k].Pos, ch.rr.Size)
	}
	rs.rrs = append(rs.rrs, ch.rr)
	rs.size += ch.rr.Size
	rs.last, rs.has = ch.hs[len(ch.hs)-1].BaseOffset, true
}

// release drops every read result held.
func (rs *shareRecs) release() {
	if rs == nil {
		return
	}
	for _, rr := range rs.rrs {
		rr.Release()
	}
	rs.rrs, rs.size = nil, 0
}

// readShareRange adds to out the batches holding offsets [lo, hi] (and
// none past hi: a read returns whole chunks, which may hold later batches
// no one acquired).
func readShareRange(p *partition, lo, hi, upTo int64, out *shareRecs) error {
	off := lo
	for range shareReadMaxChunks {
		ch, err := readShareChunk(p, off, shareReadChunk, upTo)
		if err != nil {
			return err
		}
		size, next := ch.rr.Size, ch.rr.NextOffset
		for _, h := range ch.hs {
			if h.BaseOffset > hi {
				ch.cut(h.Pos)
				next = h.BaseOffset
				break
			}
		}
		out.addNew(ch)
		if size == 0 || next > hi || next <= off {
			return nil
		}
		off = next
	}
	return nil
}

// longPoll waits for records, then acquires again and answers.
func (sf *shareFetch) longPoll(g *group, maxWait time.Duration, r reply) {
	deadline := time.NewTimer(maxWait)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		if g.dead || g.sg == nil || g.sg.sessions[sf.member] != sf.sess {
			g.mu.Unlock()
			sf.reply(r)
			return
		}
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(sf.c.done)},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(sf.c.b.stop)},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(g.sg.wake)},
		}
		for tid, ps := range sf.sess.parts {
			t := sf.c.b.lookupID(tid)
			for idx := range ps {
				if p := sf.c.b.partitionOf(t, idx); p != nil {
					cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.log.Wait(p.log.HighWatermark()))})
				}
			}
		}
		g.mu.Unlock()
		chosen, _, _ := reflect.Select(cases)
		switch chosen {
		case 1:
			sf.release()
			r(nil, ErrClosed)
			return
		case 0, 2:
			sf.reply(r)
			return
		}
		g.mu.Lock()
		total := int32(0)
		if !g.dead && g.sg != nil && g.sg.sessions[sf.member] == sf.sess {
			total = sf.acquire(g)
			g.persistShareParts() // acquisitions: not waited for (see handleShareFetch)
		}
		g.mu.Unlock()
		if total > 0 {
			sf.reply(r)
			return
		}
	}
}

// reply answers once the acknowledgements are durable.
func (sf *shareFetch) reply(r reply) {
	waitThen(sf.waits, func(err error) {
		if err != nil {
			sf.c.b.log.Error("share fetch acknowledgements not durable", "err", err)
			for _, rp := range sf.parts {
				if rp.AcknowledgeErrorCode == 0 {
					rp.AcknowledgeErrorCode = kerr.CoordinatorNotAvailable.Code
				}
			}
		}
		r(sf.encode(), nil)
	})
}

// release drops the read results of an answer that will not be sent.
func (sf *shareFetch) release() {
	for _, rs := range sf.recs {
		rs.release()
	}
}
