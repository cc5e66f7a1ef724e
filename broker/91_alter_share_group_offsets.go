package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterShareGroupOffsets: v0 (KIP-932)
//
// Behavior:
// * Sets the share-partition start offset of each partition (forgetting
//   its in-flight records and delivery counts) of a share group without
//   members; a group with members is NON_EMPTY_GROUP. The group is created
//   if it does not exist; a classic or consumer group id is
//   GROUP_ID_NOT_FOUND.
// * An offset outside [log start, high watermark] is clamped into it, as
//   Kafka's share coordinator initializes a partition; an unknown topic or
//   partition is UNKNOWN_TOPIC_OR_PARTITION.
// * The answer waits until the new state is durable.

func init() { regKey(int16(kmsg.AlterShareGroupOffsets), 0, 0, handleAlterShareGroupOffsets) }

func handleAlterShareGroupOffsets(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if req.GroupID == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		r(encode(resp), nil)
		return
	}
	g := c.b.groups.lock(req.GroupID, true)
	switch {
	case g.sg == nil && !g.becomeShare():
		resp.ErrorCode = kerr.GroupIDNotFound.Code
	case len(g.sg.members) > 0:
		resp.ErrorCode = kerr.NonEmptyGroup.Code
	}
	if resp.ErrorCode != 0 {
		g.mu.Unlock()
		r(encode(resp), nil)
		return
	}
	for _, rt := range req.Topics {
		ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t := c.b.lookup(rt.Topic)
		if t != nil {
			ot.TopicID = t.id
		}
		for _, rp := range rt.Partitions {
			op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			if p := c.b.partitionOf(t, rp.Partition); p == nil {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				start := min(max(rp.StartOffset, p.log.LogStartOffset()), p.log.HighWatermark())
				sp := newSharePartition(start, &c.b.groups.share)
				sp.tid, sp.dirty = t.id, true
				g.sg.parts[tpKey{rt.Topic, rp.Partition}] = sp
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	durable := g.persistShareParts()
	g.mu.Unlock()
	waitThen([]<-chan error{durable}, func(err error) {
		if err != nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		r(encode(resp), nil)
	})
}
