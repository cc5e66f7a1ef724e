package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteShareGroupOffsets: v0 (KIP-932)
//
// Behavior:
// * Removes the share-partition state of the named topics from a share
//   group without members (NON_EMPTY_GROUP otherwise); the next fetch
//   starts again from share.auto.offset.reset. An unknown group, or one
//   that is not a share group, is GROUP_ID_NOT_FOUND; an unknown topic
//   UNKNOWN_TOPIC_OR_PARTITION.
// * The answer waits until the removal is durable.

func init() { regKey(int16(kmsg.DeleteShareGroupOffsets), 0, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	g := c.b.groups.lock(req.GroupID, false)
	switch {
	case req.GroupID == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
	case g == nil || g.sg == nil:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
	case len(g.sg.members) > 0:
		resp.ErrorCode = kerr.NonEmptyGroup.Code
	}
	if resp.ErrorCode != 0 {
		if g != nil {
			g.mu.Unlock()
		}
		r(encode(resp), nil)
		return
	}
	only := map[string]bool{}
	for _, rt := range req.Topics {
		ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		if t := c.b.lookup(rt.Topic); t != nil {
			ot.TopicID = t.id
			only[rt.Topic] = true
		} else {
			ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		resp.Topics = append(resp.Topics, ot)
	}
	durable := g.deleteShareParts(only)
	g.mu.Unlock()
	waitThen([]<-chan error{durable}, func(err error) {
		if err != nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		r(encode(resp), nil)
	})
}
