package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v0-10
//
// Behavior:
// * Kafka's ClassicGroup.validateOffsetCommit: a commit with generation < 0
//   to a group with no members (admin tools, standalone consumers) is
//   accepted and creates the group if needed; otherwise the member must
//   exist (UNKNOWN_MEMBER_ID), match its static instance
//   (FENCED_INSTANCE_ID) and the generation (ILLEGAL_GENERATION). A group
//   in CompletingRebalance answers REBALANCE_IN_PROGRESS. A commit extends
//   the member's session.
// * Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (v10 unknown
//   topic id: UNKNOWN_TOPIC_ID); metadata over offset.metadata.max.bytes
//   (4096): OFFSET_METADATA_TOO_LARGE.
// * The response is sent once the commit is durable in the coordinator
//   journal per the fsync policy; a failed write is
//   COORDINATOR_NOT_AVAILABLE, as Kafka answers a failed offsets append
//   (clients retry).
// * The commit is visible to OffsetFetch as soon as it is written, before
//   it is durable (Kafka shows it after the append completes).
//
// Version notes:
// * v1: Generation, MemberID, Timestamp (ignored); v2-4: RetentionTimeMillis
//   (ignored, as Kafka 2.1+ does); v3: ThrottleMillis; v6: LeaderEpoch
// * v7: InstanceID; v8: flexible; v9: KIP-848 member epochs (classic
//   groups treat them as generations; consumer groups check them with
//   checkCGCommit and, per partition, cgCommitAllowed (KIP-1251),
//   consumer_groups.go); v10: topic ids

func init() { regKey(8, 0, 10, handleOffsetCommit) }

func handleOffsetCommit(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	all := func(code int16) {
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				resp.Topics[ti].Partitions[pi].ErrorCode = code
			}
		}
		r(encode(resp), nil)
	}
	if req.Group == "" {
		all(kerr.InvalidGroupID.Code)
		return
	}
	g := c.b.groups.lock(req.Group, req.Generation < 0)
	if g == nil {
		all(kerr.IllegalGeneration.Code)
		return
	}
	if code := g.checkCommit(req.Generation, req.MemberID, req.InstanceID); code != 0 {
		g.mu.Unlock()
		all(code)
		return
	}
	var ocs []offsetCommit
	now := time.Now().UnixMilli()
	for ti, rt := range req.Topics {
		name, ok := c.b.commitTopic(req.Version >= 10, rt.Topic, rt.TopicID)
		for pi, rp := range rt.Partitions {
			sp := &resp.Topics[ti].Partitions[pi]
			switch {
			case !ok && req.Version >= 10:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case !ok || c.b.partitionOf(c.b.lookup(name), rp.Partition) == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.Metadata != nil && len(*rp.Metadata) > maxOffsetMetadata:
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			case g.cg != nil && !g.cgCommitAllowed(req.Generation, req.MemberID, tpKey{name, rp.Partition}):
				sp.ErrorCode = kerr.StaleMemberEpoch.Code
			default:
				ocs = append(ocs, offsetCommit{name, rp.Partition, committed{Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, Metadata: rp.Metadata, CommitMs: now}})
			}
		}
	}
	durable := g.commit(ocs)
	g.mu.Unlock()
	log := c.b.log
	waitThen([]<-chan error{durable}, func(err error) {
		if err != nil {
			log.Error("offset commit not durable", "group", req.Group, "err", err)
			all(kerr.CoordinatorNotAvailable.Code)
			return
		}
		r(encode(resp), nil)
	})
}

// checkCommit is Kafka's ClassicGroup.validateOffsetCommit; the caller
// holds g.mu. A valid commit from a member extends its session.
func (g *group) checkCommit(generation int32, memberID string, instance *string) int16 {
	if g.sg != nil {
		return kerr.GroupIDNotFound.Code // a share group has no committed offsets
	}
	if g.cg != nil {
		return g.checkCGCommit(generation, memberID)
	}
	if generation < 0 && len(g.members) == 0 {
		return 0
	}
	if code := g.checkInstance(instance, memberID); code != 0 {
		return code
	}
	m := g.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case generation != g.generation:
		return kerr.IllegalGeneration.Code
	case g.state == groupCompletingRebalance:
		return kerr.RebalanceInProgress.Code
	}
	g.heartbeat(m)
	return 0
}

// commitTopic resolves a commit's topic by id (v10+) or name.
func (b *Broker) commitTopic(byID bool, name string, id [16]byte) (string, bool) {
	if byID {
		t := b.lookupID(id)
		if t == nil {
			return "", false
		}
		return t.name, true
	}
	return name, b.lookup(name) != nil
}

// topicIDOf returns the id of a topic by name (zero if unknown).
func (b *Broker) topicIDOf(name string) [16]byte {
	if t := b.lookup(name); t != nil {
		return t.id
	}
	return [16]byte{}
}
