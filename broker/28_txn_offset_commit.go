package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetCommit: v0-4
//
// Behavior:
// * Stages offsets in the producer's transaction; they become the group's
//   committed offsets when EndTxn commits and are dropped on abort
//   (KIP-98). Until then OffsetFetch with RequireStable answers
//   UNSTABLE_OFFSET_COMMIT for them. Answers once the staged offsets are
//   durable in the journal.
// * The group must have been added with AddOffsetsToTxn (else
//   INVALID_TXN_STATE). Another producer id is INVALID_PRODUCER_ID_MAPPING;
//   another epoch INVALID_PRODUCER_EPOCH at every version (Kafka's group
//   coordinator checks the epoch, it never answers PRODUCER_FENCED here).
// * v3+ (KIP-447) member fields: if the group has members, the member id,
//   instance id and generation are checked as OffsetCommit does
//   (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION). Unknown
//   topic or partition: UNKNOWN_TOPIC_OR_PARTITION.
//
// Version notes:
// * v2: LeaderEpoch; v3: flexible, Generation, MemberID, InstanceID
// * v4: TRANSACTION_ABORTABLE (never here); v5+ (KIP-890 part 2, implicit
//   AddOffsetsToTxn) and v6 (topic ids) are not served.

func init() { regKey(28, 0, 4, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	all := func(code int16) {
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				if p := &resp.Topics[ti].Partitions[pi]; p.ErrorCode == 0 {
					p.ErrorCode = code
				}
			}
		}
		r(encode(resp), nil)
	}
	if req.Group == "" {
		all(kerr.InvalidGroupID.Code)
		return
	}
	t := c.b.txns.get(req.TransactionalID, false)
	if t == nil {
		all(kerr.InvalidProducerIDMapping.Code)
		return
	}
	t.mu.Lock()
	code := t.check(req.ProducerID, req.ProducerEpoch, req.Version, 1<<14)
	if code == 0 && (t.state != txnOngoing || !t.groups[req.Group]) {
		code = kerr.InvalidTxnState.Code
	}
	if code == 0 && (req.Generation >= 0 || req.MemberID != "") {
		if g := c.b.groups.lock(req.Group, false); g != nil {
			if len(g.members) > 0 {
				code = g.checkCommit(req.Generation, req.MemberID, req.InstanceID)
			}
			g.mu.Unlock()
		}
	}
	if code != 0 {
		t.mu.Unlock()
		all(code)
		return
	}
	now := time.Now().UnixMilli()
	for ti, rt := range req.Topics {
		topic := c.b.lookup(rt.Topic)
		for pi, rp := range rt.Partitions {
			sp := &resp.Topics[ti].Partitions[pi]
			switch {
			case c.b.partitionOf(topic, rp.Partition) == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.Metadata != nil && len(*rp.Metadata) > maxOffsetMetadata:
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				t.addOffset(req.Group, topicPartition{rt.Topic, rp.Partition},
					committed{Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, Metadata: rp.Metadata, CommitMs: now})
			}
		}
	}
	t.updated = time.Now()
	durable := t.persist(c.b.txns.j)
	t.mu.Unlock()
	waitThen([]<-chan error{durable}, func(err error) {
		if err != nil {
			all(kerr.CoordinatorNotAvailable.Code)
			return
		}
		r(encode(resp), nil)
	})
}
