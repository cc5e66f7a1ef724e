package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete: v0
//
// Behavior:
// * Deletes committed offsets of a group (KIP-496). Unknown group:
//   GROUP_ID_NOT_FOUND (top level); empty id: INVALID_GROUP_ID.
// * A partition of a topic that a member of a non-empty "consumer" group
//   subscribes to is GROUP_SUBSCRIBED_TO_TOPIC; an unknown topic or
//   partition UNKNOWN_TOPIC_OR_PARTITION. Deleting an offset that was never
//   committed succeeds.
// * The response waits until the deletions are durable.

func init() { regKey(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		r(encode(resp), nil)
		return
	}
	g := c.b.groups.lock(req.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		r(encode(resp), nil)
		return
	}
	subscribed := map[string]bool{}
	if len(g.members) > 0 {
		subscribed = g.subscribedTopics()
	}
	var waits []<-chan error
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		t := c.b.lookup(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case c.b.partitionOf(t, rp.Partition) == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case subscribed[rt.Topic]:
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			default:
				if _, ok := g.offsets[rt.Topic][rp.Partition]; ok {
					waits = append(waits, g.deleteOffset(rt.Topic, rp.Partition))
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	g.mu.Unlock()
	waitThen(waits, func(err error) {
		if err != nil {
			c.b.log.Error("offset delete not durable", "group", req.Group, "err", err)
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		r(encode(resp), nil)
	})
}
