package broker

import (
	"testing"
	"time"

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
// SPSO <= end, the acquired count matches the records, and no record
// outside the window is tracked.
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
			n := 0
			for o, r := range sp.recs {
				if o < sp.spso || o >= sp.end {
					t.Fatalf("record %d tracked outside [%d, %d)", o, sp.spso, sp.end)
				}
				if r.state == recAcquired {
					n++
				}
			}
			if n != sp.acquired || sp.spso > sp.end {
				t.Fatalf("acquired %d counted %d; spso %d end %d", n, sp.acquired, sp.spso, sp.end)
			}
		}
	})
}
