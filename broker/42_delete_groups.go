package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups: v0-3
//
// Behavior:
// * A group with members is NON_EMPTY_GROUP; an unknown one
//   GROUP_ID_NOT_FOUND; an empty id INVALID_GROUP_ID.
// * Deletion removes the group and its committed offsets (journal
//   tombstones); the response waits until that is durable.
//
// Version notes:
// * v1: ThrottleMillis; v2: flexible; v3: no change visible here

func init() { regKey(42, 0, 3, handleDeleteGroups) }

func handleDeleteGroups(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	var waits []<-chan error
	for _, name := range req.Groups {
		sg := kmsg.NewDeleteGroupsResponseGroup()
		sg.Group = name
		g := c.b.groups.lock(name, false)
		switch {
		case name == "":
			sg.ErrorCode = kerr.InvalidGroupID.Code
		case g == nil:
			sg.ErrorCode = kerr.GroupIDNotFound.Code
		case len(g.members) > 0 || g.state != groupEmpty:
			sg.ErrorCode = kerr.NonEmptyGroup.Code
		default:
			waits = append(waits, g.removeLocked())
		}
		if g != nil {
			g.mu.Unlock()
		}
		resp.Groups = append(resp.Groups, sg)
	}
	waitThen(waits, func(err error) {
		if err != nil {
			c.b.log.Error("delete groups not durable", "err", err)
			for i := range resp.Groups {
				if resp.Groups[i].ErrorCode == 0 {
					resp.Groups[i].ErrorCode = kerr.CoordinatorNotAvailable.Code
				}
			}
		}
		r(encode(resp), nil)
	})
}
