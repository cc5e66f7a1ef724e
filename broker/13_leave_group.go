package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup: v0-5
//
// Behavior:
// * Each leaving member is removed and the group rebalances (a member
//   waiting in a KIP-394 pending round is simply forgotten). An unknown
//   member is UNKNOWN_MEMBER_ID, for that member only at v3+.
// * v3+ batches members and may name them by instance id alone (admin
//   removal, KIP-345); an instance whose member id is given and differs is
//   FENCED_INSTANCE_ID.
// * v0-2: one member; its error is the top-level error.
//
// Version notes:
// * v1: ThrottleMillis; v3: Members (KIP-345); v4: flexible
// * v5: Reason (KIP-800, logged)

func init() { regKey(13, 0, 5, syncHandler(handleLeaveGroup)) }

func handleLeaveGroup(c *Conn, req *kmsg.LeaveGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	g := c.b.groups.lock(req.Group, false)
	if g == nil {
		if req.Version < 3 {
			resp.ErrorCode = kerr.UnknownMemberID.Code
			return resp, nil
		}
		for _, lm := range leaving {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = lm.MemberID, lm.InstanceID, kerr.UnknownMemberID.Code
			resp.Members = append(resp.Members, rm)
		}
		return resp, nil
	}
	defer g.mu.Unlock()
	removed := false
	for _, lm := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		rm.ErrorCode = g.leave(lm)
		if rm.ErrorCode == 0 {
			removed = true
			reason := ""
			if lm.Reason != nil {
				reason = *lm.Reason
			}
			c.b.log.Debug("group member left", "group", g.name, "member", lm.MemberID, "reason", reason)
		}
		resp.Members = append(resp.Members, rm)
	}
	if req.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	if removed && g.state != groupEmpty {
		g.rebalance()
	}
	return resp, nil
}

// leave removes one member (without rebalancing) and returns its error.
func (g *group) leave(lm kmsg.LeaveGroupRequestMember) int16 {
	id := lm.MemberID
	if lm.InstanceID != nil {
		known, ok := g.static[*lm.InstanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID.Code
		case id != "" && id != known:
			return kerr.FencedInstanceID.Code
		}
		id = known
	}
	if t, ok := g.pending[id]; ok {
		t.Stop()
		delete(g.pending, id)
		return 0
	}
	m := g.members[id]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	g.removeMember(m)
	return 0
}
