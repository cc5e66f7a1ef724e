package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat: v0-4
//
// Behavior:
// * Unknown group or member: UNKNOWN_MEMBER_ID; instance mismatch:
//   FENCED_INSTANCE_ID; another generation: ILLEGAL_GENERATION.
// * PreparingRebalance: REBALANCE_IN_PROGRESS (and the session is
//   extended, so the member has time to rejoin); CompletingRebalance and
//   Stable: no error, session extended (Kafka's handleHeartbeat).
//
// Version notes:
// * v1: ThrottleMillis; v3: InstanceID; v4: flexible

func init() { regKey(12, 0, 4, syncHandler(handleHeartbeat)) }

func handleHeartbeat(c *Conn, req *kmsg.HeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	g := c.b.groups.lock(req.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil
	}
	defer g.mu.Unlock()
	if code := g.checkInstance(req.InstanceID, req.MemberID); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	m := g.members[req.MemberID]
	switch {
	case m == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case req.Generation != g.generation:
		resp.ErrorCode = kerr.IllegalGeneration.Code
	case g.state == groupPreparingRebalance:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		g.heartbeat(m)
	case g.state == groupCompletingRebalance || g.state == groupStable:
		g.heartbeat(m)
	default:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	}
	return resp, nil
}
