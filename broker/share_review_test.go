package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareRequestsDoNotConvertCommitterGroup: a group holding offsets
// committed by a standalone consumer (generation -1, no protocol type) is
// not a share group; every share request naming it is GROUP_ID_NOT_FOUND
// and the committer keeps committing.
func TestShareRequestsDoNotConvertCommitterGroup(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "etlt", 1, nil)
	adm := kadm.NewClient(newClient(t, srv.addr()))
	commit := func(at int64) {
		t.Helper()
		var os kadm.Offsets
		os.AddOffset("etlt", 0, at, -1)
		resp, err := adm.CommitOffsets(testCtx(t), "etl", os)
		if err != nil || resp.Error() != nil {
			t.Fatalf("standalone commit: %v %v", err, resp.Error())
		}
	}
	commit(1)
	c := b.NewConn("test")
	defer c.Close()
	const member = "member-0000000000000000000000000001"
	sh := kmsg.NewPtrShareGroupHeartbeatRequest()
	sh.Version, sh.GroupID, sh.MemberID, sh.SubscribedTopicNames = 1, "etl", member, []string{"etlt"}
	if r := mustCall[*kmsg.ShareGroupHeartbeatResponse](t, c, sh); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share join of a committer's group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareConnFetch(t, c, "etl", member, 0, b.lookup("etlt").id, nil); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share fetch on a committer's group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	alt := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alt.GroupID = "etl"
	at := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	at.Topic = "etlt"
	at.Partitions = []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 0}}
	alt.Topics = append(alt.Topics, at)
	if r := mustCall[*kmsg.AlterShareGroupOffsetsResponse](t, c, alt); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("alter share offsets of a committer's group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	commit(2)
	got, err := adm.FetchOffsets(testCtx(t), "etl")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("etlt", 0); !ok || o.At != 2 || o.Err != nil {
		t.Fatalf("committed offset after share requests: %+v", o)
	}
}

// TestShareFailedFetchLeavesNoGroup: a ShareFetch that fails (no session)
// or whose session only names unknown partitions leaves no group behind.
func TestShareFailedFetchLeavesNoGroup(t *testing.T) {
	b, _ := newBroker(t)
	c := b.NewConn("test")
	const member = "member-0000000000000000000000000001"
	if r := shareConnFetch(t, c, "ghost", member, 5, [16]byte{1}, nil); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("fetch without a session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if g := b.groups.lock("ghost", false); g != nil {
		g.mu.Unlock()
		t.Fatal("a failed ShareFetch left group ghost behind")
	}
	r := shareConnFetch(t, c, "ghost2", member, 0, [16]byte{2}, nil)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("session on an unknown topic: %v %+v", kerr.ErrorForCode(r.ErrorCode), r.Topics)
	}
	c.Close() // ends the session
	if g := b.groups.lock("ghost2", false); g != nil {
		g.mu.Unlock()
		t.Fatal("a closed session on unknown partitions left group ghost2 behind")
	}
}

// TestShareSessionKeepsOnlyKnownPartitions: a ShareFetch naming 200,000
// partitions of an unknown topic id and an out-of-range partition gets
// each answered once with its error; the session keeps only the real
// partition, so the next fetch answers that one alone.
func TestShareSessionKeepsOnlyKnownPartitions(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "known", 1, nil)
	tid := b.lookup("known").id
	c := b.NewConn("test")
	defer c.Close()
	const member = "member-0000000000000000000000000001"
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 2
	req.GroupID, req.MemberID = kmsg.StringPtr("kp"), kmsg.StringPtr(member)
	req.MaxRecords, req.MaxBytes = 100, 1<<20
	bogus := kmsg.NewShareFetchRequestTopic()
	bogus.TopicID = [16]byte{9, 9, 9}
	for p := range int32(200000) {
		bogus.Partitions = append(bogus.Partitions, kmsg.ShareFetchRequestTopicPartition{Partition: p})
	}
	real := kmsg.NewShareFetchRequestTopic()
	real.TopicID = tid
	real.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}, {Partition: 7}}
	req.Topics = []kmsg.ShareFetchRequestTopic{bogus, real}
	r := mustCall[*kmsg.ShareFetchResponse](t, c, req)
	codes := map[int16]int{}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			codes[rp.ErrorCode]++
		}
	}
	if r.ErrorCode != 0 || codes[kerr.UnknownTopicID.Code] != 200000 || codes[kerr.UnknownTopicOrPartition.Code] != 1 || codes[0] != 1 {
		t.Fatalf("opening fetch: %v, partition codes %v", kerr.ErrorForCode(r.ErrorCode), codes)
	}
	g := b.groups.lock("kp", false)
	size := g.sg.sessions[member].size
	g.mu.Unlock()
	if size != 1 {
		t.Fatalf("session holds %d partitions, want 1", size)
	}
	req.ShareSessionEpoch, req.Topics = 1, nil
	r = mustCall[*kmsg.ShareFetchResponse](t, c, req)
	for _, rt := range r.Topics {
		if rt.TopicID != tid {
			t.Fatalf("next fetch answers topic %x again", rt.TopicID)
		}
	}
}

// TestShareSessionPartitionCap: a session holds at most
// maxShareSessionPartitions partitions.
func TestShareSessionPartitionCap(t *testing.T) {
	s := &shareSession{parts: map[[16]byte]map[int32]bool{}}
	for p := range int32(maxShareSessionPartitions) {
		if !s.add([16]byte{1}, p) {
			t.Fatalf("partition %d refused", p)
		}
	}
	if s.add([16]byte{2}, 0) || !s.add([16]byte{1}, 0) {
		t.Fatal("full session: a new partition must be refused, a present one accepted")
	}
	s.forget([16]byte{1}, 0)
	if !s.add([16]byte{2}, 0) || s.size != maxShareSessionPartitions {
		t.Fatalf("after forgetting one: size %d", s.size)
	}
}

// TestShareFetchReadFollowsRecordBudget: a one-record ShareFetch with
// MaxBytes 0 on a 16 MiB backlog of 512 KiB batches returns exactly one
// batch and reads about one chunk, not the backlog (measured as bytes the
// process allocated while serving it).
func TestShareFetchReadFollowsRecordBudget(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "big", 1, nil)
	setGroupConfigs(t, newClient(t, srv.addr()), "bigg", "share.auto.offset.reset", "earliest")
	prod := newClient(t, srv.addr(), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const batches, size = 32, 512 << 10
	for i := range batches {
		rec := &kgo.Record{Topic: "big", Key: []byte(strconv.Itoa(i)), Value: bytes.Repeat([]byte{'x'}, size)}
		if err := prod.ProduceSync(testCtx(t), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c := b.NewConn("test")
	defer c.Close()
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 2
	req.GroupID, req.MemberID = kmsg.StringPtr("bigg"), kmsg.StringPtr("member-0000000000000000000000000001")
	req.MaxRecords, req.MaxBytes = 1, 0
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = b.lookup("big").id
	rt.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}
	req.Topics = append(req.Topics, rt)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := mustCall[*kmsg.ShareFetchResponse](t, c, req)
	runtime.ReadMemStats(&after)
	p := r.Topics[0].Partitions[0]
	if got := acquiredRanges(p.AcquiredRecords).count(); p.ErrorCode != 0 || got != 1 || len(splitBatches(p.Records)) != 1 {
		t.Fatalf("acquired %d records in %d batches (%v), want 1 in 1", got, len(splitBatches(p.Records)), kerr.ErrorForCode(p.ErrorCode))
	}
	// The response itself holds one 512 KiB batch (encoded, then decoded
	// by the test); the old code copied all 16 MiB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > batches*size/2 {
		t.Fatalf("serving a one-record fetch allocated %d bytes; the backlog is %d", alloc, batches*size)
	}
}

// TestShareStateDroppedWithTopic: deleting a topic drops every share
// group's state for it (memory and journal), so a recreated topic with
// more records than the old start offset is read from its own start.
func TestShareStateDroppedWithTopic(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "rt", 1, nil)
	admin := newClient(t, srv.addr())
	setGroupConfigs(t, admin, "rtg", "share.auto.offset.reset", "earliest")
	produceKeys(t, admin, "rt", 10)
	c := b.NewConn("test")
	const member = "member-0000000000000000000000000001"
	shareConnFetch(t, c, "rtg", member, 0, b.lookup("rt").id, nil)
	r := shareConnFetch(t, c, "rtg", member, 1, b.lookup("rt").id, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ackBatchOf(0, 9, 1)})
	if code := r.Topics[0].Partitions[0].AcknowledgeErrorCode; code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	c.Close()
	if err := b.deleteTopic(b.lookup("rt")); err != nil {
		t.Fatal(err)
	}
	g := b.groups.lock("rtg", false)
	n := -1
	if g != nil {
		n = len(g.sg.parts)
		g.mu.Unlock()
	}
	if n > 0 {
		t.Fatalf("share state of a deleted topic kept: %d partitions", n)
	}
	createTopic(t, srv.addr(), "rt", 1, nil)
	produceKeys(t, newClient(t, srv.addr()), "rt", 50) // past the old start offset 10
	c2 := b.NewConn("test2")
	defer c2.Close()
	r = shareConnFetch(t, c2, "rtg", member, 0, b.lookup("rt").id, nil)
	got := r.Topics[0].Partitions[0].AcquiredRecords
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 49 || got[0].DeliveryCount != 1 {
		t.Fatalf("recreated topic: acquired %+v, want offsets 0-49 at delivery 1", got)
	}
}

// TestShareStateOfOtherTopicIDIgnored: state journaled for another topic
// id of the same name (a deletion whose cleanup did not reach the
// journal) is not applied to the topic.
func TestShareStateOfOtherTopicIDIgnored(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "oi", 1, nil)
	produceKeys(t, newClient(t, srv.addr()), "oi", 20)
	setGroupConfigs(t, newClient(t, srv.addr()), "oig", "share.auto.offset.reset", "earliest")
	tp := b.lookup("oi")
	raw := []byte(`{"topic_id":"0102030405060708090a0b0c0d0e0f10","spso":5,"end":5}`)
	b.groups.mu.Lock()
	err := b.groups.loadSharePart(journalEntry{sharePartKey("oig", tpKey{"oi", 0}), raw})
	b.groups.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	c := b.NewConn("test")
	defer c.Close()
	r := shareConnFetch(t, c, "oig", "member-0000000000000000000000000001", 0, tp.id, nil)
	got := r.Topics[0].Partitions[0].AcquiredRecords
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 19 {
		t.Fatalf("acquired %+v, want offsets 0-19 (state of another topic id ignored)", got)
	}
}

// setJournalFault makes the coordinator journal's writes fail with err
// (nil: work again).
func setJournalFault(b *Broker, err error) {
	b.groups.j.mu.Lock()
	defer b.groups.j.mu.Unlock()
	if err == nil {
		b.groups.j.writeFault = nil
		return
	}
	b.groups.j.writeFault = func() error { return err }
}

// TestShareAckWriteFailureAppliesNothing: a RELEASE whose journal write
// fails is COORDINATOR_NOT_AVAILABLE and changes nothing (the records stay
// with the member, no one else gets them); the retry succeeds, and the
// acquisition state written while the disk failed reaches the journal.
func TestShareAckWriteFailureAppliesNothing(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "wf", 1, nil)
	admin := newClient(t, srv.addr())
	setGroupConfigs(t, admin, "wfg", "share.auto.offset.reset", "earliest")
	produceKeys(t, admin, "wf", 5)
	tid := b.lookup("wf").id
	c := b.NewConn("test")
	defer c.Close()
	const member, other = "member-0000000000000000000000000001", "other-00000000000000000000000000001"
	setJournalFault(b, errors.New("no space left on device"))
	if r := shareConnFetch(t, c, "wfg", member, 0, tid, nil); acquiredRanges(r.Topics[0].Partitions[0].AcquiredRecords).count() != 5 {
		t.Fatalf("acquire: %+v", r.Topics)
	}
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.Version = 2
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = kmsg.StringPtr("wfg"), kmsg.StringPtr(member), 1
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = tid
	at.Partitions = []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0,
		AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 4, AcknowledgeTypes: []int8{ackRelease}}}}}
	ack.Topics = append(ack.Topics, at)
	if r := mustCall[*kmsg.ShareAcknowledgeResponse](t, c, ack); r.Topics[0].Partitions[0].ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("release while the journal fails: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	c2 := b.NewConn("other")
	defer c2.Close()
	if r := shareConnFetch(t, c2, "wfg", other, 0, tid, nil); len(r.Topics[0].Partitions[0].AcquiredRecords) != 0 {
		t.Fatalf("records of a failed release went to another member: %+v", r.Topics[0].Partitions[0].AcquiredRecords)
	}
	setJournalFault(b, nil)
	ack.ShareSessionEpoch = 2
	if r := mustCall[*kmsg.ShareAcknowledgeResponse](t, c, ack); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("retried release: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	r := shareConnFetch(t, c2, "wfg", other, 1, tid, nil)
	got := r.Topics[0].Partitions[0].AcquiredRecords
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 4 || got[0].DeliveryCount != 2 {
		t.Fatalf("after the retried release: %+v, want 0-4 at delivery 2", got)
	}
	b.groups.j.mu.Lock()
	raw := b.groups.j.live[sharePartKey("wfg", tpKey{"wf", 0})]
	b.groups.j.mu.Unlock()
	var rec shareStateRecord
	if err := json.Unmarshal(raw, &rec); err != nil || rec.End != 5 || len(rec.Runs) != 1 || rec.Runs[0] != [3]int64{0, 4, 2} {
		t.Fatalf("journaled state %s (%v), want end 5 and run 0-4 at 2", raw, err)
	}
}

// TestShareMembershipWriteRetried: a share-group membership record whose
// journal write failed is written by the next heartbeat.
func TestShareMembershipWriteRetried(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "mw", 1, nil)
	c := b.NewConn("test")
	defer c.Close()
	live := func() []byte {
		b.groups.j.mu.Lock()
		defer b.groups.j.mu.Unlock()
		return b.groups.j.live[shareGroupKeyPrefix+"mwg"]
	}
	setJournalFault(b, errors.New("input/output error"))
	sh := kmsg.NewPtrShareGroupHeartbeatRequest()
	sh.Version, sh.GroupID, sh.MemberID, sh.SubscribedTopicNames = 1, "mwg", "member-1", []string{"mw"}
	r := mustCall[*kmsg.ShareGroupHeartbeatResponse](t, c, sh)
	if r.ErrorCode != 0 || live() != nil {
		t.Fatalf("join while the journal fails: %v, record %s", kerr.ErrorForCode(r.ErrorCode), live())
	}
	setJournalFault(b, nil)
	sh.MemberEpoch, sh.SubscribedTopicNames = r.MemberEpoch, nil
	if r := mustCall[*kmsg.ShareGroupHeartbeatResponse](t, c, sh); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	var rec sgRecord
	if err := json.Unmarshal(live(), &rec); err != nil || len(rec.Members) != 1 || rec.Members[0].ID != "member-1" {
		t.Fatalf("membership after the heartbeat: %s (%v)", live(), err)
	}
}

// TestShareUndoRestoresState: restoring the undo of an acknowledgement
// (accepts, releases at and below the delivery limit, rejects) gives back
// exactly the state before it.
func TestShareUndoRestoresState(t *testing.T) {
	sp := newSharePartition(0, nil)
	now := time.Now()
	for o := range int64(10) {
		r := sp.push(int16(o % 3))
		sp.acquireOne(o, r, "m", now.Add(time.Minute), 5)
	}
	cfg := shareSettings{lockDuration: time.Minute, deliveryLimit: 2}
	before, acquired := sp.record(), sp.acquired
	bs := []ackBatch{{0, 2, []int8{ackAccept}}, {3, 5, []int8{ackRelease}}, {6, 6, []int8{ackReject}}, {8, 9, []int8{ackRelease, ackAccept}}}
	u := sp.undoFor(bs)
	if code, _ := sp.acknowledge("m", bs, now, cfg); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if reflect.DeepEqual(sp.record(), before) {
		t.Fatal("the acknowledgement changed nothing")
	}
	sp.restore(u)
	if got := sp.record(); !reflect.DeepEqual(got, before) || sp.acquired != acquired {
		t.Fatalf("restored %+v (acquired %d), want %+v (%d)", got, sp.acquired, before, acquired)
	}
	for o := range int64(10) {
		if r := sp.rec(o); r == nil || r.state != recAcquired || r.owner != "m" {
			t.Fatalf("offset %d after restore: %+v", o, r)
		}
	}
}
