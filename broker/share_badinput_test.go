package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareConnFetch sends one ShareFetch on c.
func shareConnFetch(t *testing.T, c *Conn, group, member string, epoch int32, tid [16]byte, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 2
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr(member), epoch
	req.MaxRecords, req.MaxBytes = 100, 1<<20
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = tid
	rt.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}
	req.Topics = append(req.Topics, rt)
	return mustCall[*kmsg.ShareFetchResponse](t, c, req)
}

func ackBatchOf(first, last int64, types ...int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	return kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: types}
}

// TestShareBadInput: malformed, hostile and out-of-turn share requests get
// Kafka's error codes and change nothing; the records stay deliverable.
func TestShareBadInput(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "bq", 1, nil)
	admin := newClient(t, srv.addr())
	setGroupConfigs(t, admin, "bg", "share.auto.offset.reset", "earliest")
	produceKeys(t, admin, "bq", 10)
	tid := b.lookup("bq").id
	c := b.NewConn("test")
	defer c.Close()
	const member = "member-0000000000000000000000000001"

	// Session errors.
	if r := shareConnFetch(t, c, "bg", member, 5, tid, nil); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("no session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareConnFetch(t, c, "bg", member, 0, tid, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ackBatchOf(0, 0, 1)}); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("acks while opening a session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareConnFetch(t, c, "bg", "", 0, tid, nil); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("empty member id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareConnFetch(t, c, "bg", string(make([]byte, 37)), 0, tid, nil); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("37-byte member id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r := shareConnFetch(t, c, "bg", member, 0, tid, nil)
	if r.ErrorCode != 0 || acquiredRanges(r.Topics[0].Partitions[0].AcquiredRecords).count() != 10 {
		t.Fatalf("open session: %v %+v", kerr.ErrorForCode(r.ErrorCode), r.Topics)
	}
	if r := shareConnFetch(t, c, "bg", member, 7, tid, nil); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// Malformed acknowledgement batches: INVALID_REQUEST, nothing applied.
	// Offsets not acquired (past the window, or below it as another
	// member's): INVALID_RECORD_STATE.
	epoch := int32(1)
	for _, tc := range []struct {
		name string
		bs   []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
		want *kerr.Error
	}{
		{"first after last", []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ackBatchOf(5, 2, 1)}, kerr.InvalidRequest},
		{"no types", []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ackBatchOf(0, 2)}, kerr.InvalidRequest},
		{"types count", []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ackBatchOf(0, 2, 1, 1)}, kerr.InvalidRequest},
		{"unknown type", []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ackBatchOf(0, 0, 9)}, kerr.InvalidRequest},
		{"renew without IsRenewAck", []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ackBatchOf(0, 0, 4)}, kerr.InvalidRequest},
		{"overlapping", []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ackBatchOf(0, 3, 1), ackBatchOf(3, 4, 1)}, kerr.InvalidRequest},
		{"past the window", []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ackBatchOf(0, 1, 1), ackBatchOf(8, 1<<62, 1)}, kerr.InvalidRecordState},
	} {
		r := shareConnFetch(t, c, "bg", member, epoch, tid, tc.bs)
		if r.ErrorCode != 0 {
			t.Fatalf("%s: top-level %v", tc.name, kerr.ErrorForCode(r.ErrorCode))
		}
		epoch++
		if got := r.Topics[0].Partitions[0].AcknowledgeErrorCode; got != tc.want.Code {
			t.Fatalf("%s: %v, want %v", tc.name, kerr.ErrorForCode(got), tc.want)
		}
	}
	// Another member cannot acknowledge what this one holds.
	other := b.NewConn("other")
	defer other.Close()
	if r := shareConnFetch(t, other, "bg", "other-000000000000000000000000000001", 0, tid, nil); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.Version = 2
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = kmsg.StringPtr("bg"), kmsg.StringPtr("other-000000000000000000000000000001"), 1
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = tid
	at.Partitions = []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0, AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 9, AcknowledgeTypes: []int8{1}}}}}
	ack.Topics = append(ack.Topics, at)
	if r := mustCall[*kmsg.ShareAcknowledgeResponse](t, other, ack); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("acknowledging another member's records: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	// Nothing was applied: the holder still accepts all ten at once.
	r = shareConnFetch(t, c, "bg", member, epoch, tid, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ackBatchOf(0, 9, 1)})
	if got := r.Topics[0].Partitions[0].AcknowledgeErrorCode; got != 0 {
		t.Fatalf("valid acknowledgement after the bad ones: %v", kerr.ErrorForCode(got))
	}
	if start, _ := shareStart(t, admin, "bg", "bq"); start != 10 {
		t.Fatalf("start offset %d after accepting everything", start)
	}
	if c := b.ShareCounters(); c.AckErrors != 8 {
		t.Fatalf("refused acknowledgements counted %d, want 8", c.AckErrors)
	}
	// A share group id is not usable by the other protocols, nor the
	// reverse.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = 1, "bg", "x", 5000, []string{"bq"}
	if r := mustCall[*kmsg.ConsumerGroupHeartbeatResponse](t, c, hb); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer heartbeat to a share group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	sh := kmsg.NewPtrShareGroupHeartbeatRequest()
	sh.Version, sh.GroupID, sh.MemberID, sh.SubscribedTopicNames = 1, "classic-g", member, []string{"bq"}
	if r := mustCall[*kmsg.ShareGroupHeartbeatResponse](t, c, sh); r.ErrorCode != 0 {
		t.Fatalf("share join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	sh.MemberEpoch = 99
	if r := mustCall[*kmsg.ShareGroupHeartbeatResponse](t, c, sh); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("share heartbeat at a wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// FuzzShareAcknowledgements drives one share-partition with arbitrary
// acquisitions and acknowledgement batches; the bookkeeping must hold:
// SPSO <= end, the acquired and live counts match the records, and the
// window has one entry per offset and starts with a record in flight.
func FuzzShareAcknowledgements(f *testing.F) {
	f.Add([]byte{5, 0, 3, 1, 1, 2, 0, 9, 2})
	f.Add([]byte{20, 3, 4, 2, 0, 0, 3, 10, 19, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		sp := newSharePartition(0, nil)
		cfg := shareSettings{lockDuration: 1, deliveryLimit: 3}
		now := time.Unix(1700000000, 0)
		for len(in) >= 3 {
			op, a, b := in[0], int64(in[1]), int64(in[2])
			in = in[3:]
			switch op % 4 {
			case 0: // new batch of a+1 records
				sp.acquireNew([]batchInfo{{base: sp.end, last: sp.end + a%16}}, nil, "m", int32(b%32)+1, b%2 == 0, now, cfg.deliveryLimit)
			case 1: // redeliver
				sp.acquireAvailable("m", int32(a%32)+1, now, cfg.deliveryLimit)
			case 2: // acknowledge [a, a+b] with one type
				bs := []ackBatch{{first: a, last: a + b%8, types: []int8{int8(b % 5)}}}
				if checkAckBatches(bs, true) == 0 {
					sp.acknowledge("m", bs, now, cfg)
				}
			case 3:
				sp.expire(now.Add(2), cfg.deliveryLimit)
			}
			n, live := 0, 0
			if int64(len(sp.win)) != sp.end-sp.spso || (len(sp.win) > 0 && sp.win[0].state == recDone) {
				t.Fatalf("window of %d entries for [%d, %d)", len(sp.win), sp.spso, sp.end)
			}
			for _, r := range sp.win {
				if r.state == recAcquired {
					n++
				}
				if r.state != recDone {
					live++
				}
			}
			if n != sp.acquired || live != sp.live || sp.spso > sp.end {
				t.Fatalf("acquired %d counted %d, live %d counted %d; spso %d end %d", n, sp.acquired, live, sp.live, sp.spso, sp.end)
			}
		}
	})
}

// TestShareGroupIsNotForCommits: OffsetCommit to a share group's id is
// GROUP_ID_NOT_FOUND, and ListGroups reports the group as type share.
func TestShareGroupIsNotForCommits(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "nc", 1, nil)
	c := b.NewConn("test")
	defer c.Close()
	sh := kmsg.NewPtrShareGroupHeartbeatRequest()
	sh.Version, sh.GroupID, sh.MemberID, sh.SubscribedTopicNames = 1, "sgc", "member-1", []string{"nc"}
	if r := mustCall[*kmsg.ShareGroupHeartbeatResponse](t, c, sh); r.ErrorCode != 0 || r.Assignment == nil || len(r.Assignment.TopicPartitions) != 1 {
		t.Fatalf("share join: %v %+v", kerr.ErrorForCode(r.ErrorCode), r.Assignment)
	}
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.Generation = 8, "sgc", -1
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "nc"
	ot.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}
	oc.Topics = append(oc.Topics, ot)
	if r := mustCall[*kmsg.OffsetCommitResponse](t, c, oc); r.Topics[0].Partitions[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("commit to a share group: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version, lg.TypesFilter = 5, []string{"share"}
	r := mustCall[*kmsg.ListGroupsResponse](t, c, lg)
	if len(r.Groups) != 1 || r.Groups[0].Group != "sgc" || r.Groups[0].GroupType != "share" || r.Groups[0].GroupState != "Stable" {
		t.Fatalf("ListGroups types=share: %+v", r.Groups)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 5, []string{"sgc"}
	if g := mustCall[*kmsg.DescribeGroupsResponse](t, c, dg).Groups[0]; g.ErrorCode != 0 || g.ProtocolType != "share" || g.State != "Stable" {
		t.Fatalf("DescribeGroups of a share group: %+v", g)
	}
	d := kmsg.NewPtrShareGroupDescribeRequest()
	d.Version, d.GroupIDs = 1, []string{"sgc", "nope"}
	dr := mustCall[*kmsg.ShareGroupDescribeResponse](t, c, d)
	if g := dr.Groups[0]; g.ErrorCode != 0 || len(g.Members) != 1 || g.Members[0].MemberID != "member-1" || g.Assignor != "simple" ||
		len(g.Members[0].Assignment.TopicPartitions) != 1 || g.Members[0].Assignment.TopicPartitions[0].Topic != "nc" {
		t.Fatalf("describe: %+v", g)
	}
	if dr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe unknown: %v", kerr.ErrorForCode(dr.Groups[1].ErrorCode))
	}
}

// TestShareMembershipSurvivesRestart: share-group members keep their ids,
// epochs and assignments across a restart; their share sessions do not
// (SHARE_SESSION_NOT_FOUND, then a new session works).
func TestShareMembershipSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	s, _ := b.checkCreate("mr", 2, 1, nil)
	tp, err := b.createTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	c := b.NewConn("test")
	hb := func(c *Conn, member string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.Version, req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = 1, "msg", member, epoch, topics
		return mustCall[*kmsg.ShareGroupHeartbeatResponse](t, c, req)
	}
	epochs := map[string]int32{}
	for _, id := range []string{"m-a", "m-b"} {
		r := hb(c, id, 0, []string{"mr"})
		if r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
		epochs[id] = r.MemberEpoch
	}
	for id, e := range epochs { // settle both at the group epoch
		epochs[id] = hb(c, id, e, nil).MemberEpoch
	}
	if r := shareConnFetch(t, c, "msg", "m-a", 0, tp.id, nil); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	describe := func(b *Broker) string {
		g := b.groups.lock("msg", false)
		defer g.mu.Unlock()
		return fmt.Sprint(g.sg.epoch, g.sg.members["m-a"].assigned, g.sg.members["m-b"].assigned)
	}
	before := describe(b)
	c.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := openBroker(t, dir)
	c2 := b2.NewConn("test")
	defer c2.Close()
	if after := describe(b2); after != before {
		t.Fatalf("after restart %s, before %s", after, before)
	}
	for id, e := range epochs {
		if r := hb(c2, id, e, nil); r.ErrorCode != 0 || r.MemberEpoch != e || r.Assignment != nil {
			t.Fatalf("%s after restart: %v epoch %d (want %d), assignment %v", id, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, e, r.Assignment)
		}
	}
	if r := shareConnFetch(t, c2, "msg", "m-a", 1, tp.id, nil); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("old share session after restart: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareConnFetch(t, c2, "msg", "m-a", 0, tp.id, nil); r.ErrorCode != 0 {
		t.Fatalf("new share session after restart: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// shareFuzzKeys are the share-group keys FuzzShareRequests sends.
var shareFuzzKeys = []kmsg.Request{
	kmsg.NewPtrShareGroupHeartbeatRequest(), kmsg.NewPtrShareGroupDescribeRequest(), kmsg.NewPtrShareFetchRequest(),
	kmsg.NewPtrShareAcknowledgeRequest(), kmsg.NewPtrDescribeShareGroupOffsetsRequest(),
	kmsg.NewPtrAlterShareGroupOffsetsRequest(), kmsg.NewPtrDeleteShareGroupOffsetsRequest(),
	kmsg.NewPtrDescribeProducersRequest(), kmsg.NewPtrDescribeTopicPartitionsRequest(),
}

// FuzzShareRequests hands arbitrary bodies for the share-group keys,
// DescribeProducers and DescribeTopicPartitions to one broker: each is
// answered or closes the connection, never panics, and the broker keeps
// serving.
func FuzzShareRequests(f *testing.F) {
	b := openBroker(f, f.TempDir())
	s, _ := b.checkCreate("fz", 2, 1, nil)
	tp, err := b.createTopic(s)
	if err != nil {
		f.Fatal(err)
	}
	fetch := kmsg.NewPtrShareFetchRequest()
	fetch.Version, fetch.GroupID, fetch.MemberID = 2, kmsg.StringPtr("fg"), kmsg.StringPtr("m")
	fetch.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: tp.id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, "fg", "m", []string{"fz"}
	f.Add(uint8(2), int16(2), fetch.AppendTo(nil))
	f.Add(uint8(0), int16(1), hb.AppendTo(nil))
	f.Add(uint8(8), int16(0), kmsg.NewPtrDescribeTopicPartitionsRequest().AppendTo(nil))
	f.Fuzz(func(t *testing.T, which uint8, version int16, body []byte) {
		req := shareFuzzKeys[int(which)%len(shareFuzzKeys)]
		c := b.NewConn("fuzz")
		defer c.Close() // ends a long poll the body asked for
		c.Handle(&wire.Request{Key: req.Key(), Version: version, Body: body}, func(wire.Body, error) {})
	})
}

// TestShareSessionLimit: sessions past group.share.max.share.sessions are
// refused with SHARE_SESSION_LIMIT_REACHED; closing one makes room, and a
// member reopening its session does not use a second slot.
func TestShareSessionLimit(t *testing.T) {
	b := openBroker(t, t.TempDir())
	s, _ := b.checkCreate("sl", 1, 1, nil)
	tp, err := b.createTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	c := b.NewConn("test")
	for i := range maxShareSessions {
		if r := shareConnFetch(t, c, "slg", fmt.Sprint("m-", i), 0, tp.id, nil); r.ErrorCode != 0 {
			t.Fatalf("session %d: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if r := shareConnFetch(t, c, "slg", "m-0", 0, tp.id, nil); r.ErrorCode != 0 {
		t.Fatalf("reopening a session at the limit: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareConnFetch(t, c, "slg", "one-too-many", 0, tp.id, nil); r.ErrorCode != kerr.ShareSessionLimitReached.Code {
		t.Fatalf("session past the limit: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.Close() // ends all of them
	c2 := b.NewConn("test2")
	defer c2.Close()
	if r := shareConnFetch(t, c2, "slg", "one-too-many", 0, tp.id, nil); r.ErrorCode != 0 {
		t.Fatalf("after the connection closed: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestGroupConfigsBadInput: unknown names, bad values, list operations and
// empty group ids are refused with Kafka's codes and change nothing; a good
// change is described with source GROUP_CONFIG and survives a restart.
func TestGroupConfigsBadInput(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	c := b.NewConn("test")
	alter := func(c *Conn, group string, op kmsg.IncrementalAlterConfigOp, name string, value *string) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: name, Op: op, Value: value}}
		req.Resources = append(req.Resources, res)
		return mustCall[*kmsg.IncrementalAlterConfigsResponse](t, c, req).Resources[0].ErrorCode
	}
	set := kmsg.IncrementalAlterConfigOpSet
	for _, tc := range []struct {
		group, name string
		op          kmsg.IncrementalAlterConfigOp
		value       *string
		want        *kerr.Error
	}{
		{"g", "share.auto.offset.reset", set, kmsg.StringPtr("middle"), kerr.InvalidConfig},
		{"g", "share.auto.offset.reset", set, kmsg.StringPtr("by_duration:P1X"), kerr.InvalidConfig},
		{"g", "share.record.lock.duration.ms", set, kmsg.StringPtr("10"), kerr.InvalidConfig},
		{"g", "share.record.lock.duration.ms", set, kmsg.StringPtr("NaN"), kerr.InvalidConfig},
		{"g", "share.delivery.count.limit", set, kmsg.StringPtr("99"), kerr.InvalidConfig},
		{"g", "no.such.config", set, kmsg.StringPtr("1"), kerr.InvalidConfig},
		{"g", "share.isolation.level", set, nil, kerr.InvalidRequest},
		{"g", "share.isolation.level", kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("read_committed"), kerr.InvalidConfig},
		{"", "share.isolation.level", set, kmsg.StringPtr("read_committed"), kerr.InvalidGroupID},
	} {
		if got := alter(c, tc.group, tc.op, tc.name, tc.value); got != tc.want.Code {
			t.Fatalf("%+v: %v, want %v", tc, kerr.ErrorForCode(got), tc.want)
		}
	}
	if got := alter(c, "g", set, "share.auto.offset.reset", kmsg.StringPtr("by_duration:PT1H30M")); got != 0 {
		t.Fatal(kerr.ErrorForCode(got))
	}
	c.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := openBroker(t, dir)
	c2 := b2.NewConn("test")
	defer c2.Close()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4 // Source is v1+
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	req.Resources = append(req.Resources, res)
	got := map[string]string{}
	for _, cf := range mustCall[*kmsg.DescribeConfigsResponse](t, c2, req).Resources[0].Configs {
		got[cf.Name] = fmt.Sprint(*cf.Value, "/", cf.Source)
	}
	if got["share.auto.offset.reset"] != "by_duration:PT1H30M/GROUP_CONFIG" || got["share.record.lock.duration.ms"] != "30000/DEFAULT_CONFIG" ||
		got["share.delivery.count.limit"] != "5/DEFAULT_CONFIG" || got["share.isolation.level"] != "read_uncommitted/DEFAULT_CONFIG" {
		t.Fatalf("described after restart: %v", got)
	}
}
