package broker

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupHeartbeat: v1 (KIP-932)
//
// Behavior (share_groups.go has the model):
// * MemberEpoch 0 joins (the client generates the member id, at most 36
//   characters; a known id rejoins and keeps its place); -1 leaves,
//   releasing every record the member holds; a positive epoch must be the
//   member's current or previous one, else FENCED_MEMBER_EPOCH; an unknown
//   member UNKNOWN_MEMBER_ID.
// * A join needs SubscribedTopicNames; null means unchanged afterwards.
// * The assignment is server-side (share_groups.go assignShare) and sent
//   when the member joins, asks with its subscription, or its epoch moves.
// * A group id in use by a classic or consumer group with members is
//   GROUP_ID_NOT_FOUND ("not a share group"), as Kafka.
//
// Version notes:
// * v0 was Kafka 4.0's early access, removed in 4.1; v1 is the stable
//   version (no field changes).

func init() { regKey(int16(kmsg.ShareGroupHeartbeat), 1, 1, syncHandler(handleShareGroupHeartbeat)) }

func handleShareGroupHeartbeat(c *Conn, req *kmsg.ShareGroupHeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp, nil
	}
	joining := req.MemberEpoch == 0
	switch {
	case strings.TrimSpace(req.GroupID) == "":
		return fail(kerr.InvalidRequest, "GroupId can't be empty")
	case req.MemberID == "" || len(req.MemberID) > shareMemberIDMaxLen:
		return fail(kerr.InvalidRequest, "MemberId must be 1 to 36 characters")
	case req.MemberEpoch < -1:
		return fail(kerr.InvalidRequest, "MemberEpoch is invalid")
	case req.RackID != nil && strings.TrimSpace(*req.RackID) == "":
		return fail(kerr.InvalidRequest, "RackId can't be empty")
	case joining && len(req.SubscribedTopicNames) == 0:
		return fail(kerr.InvalidRequest, "SubscribedTopicNames must be set in first request")
	}
	g := c.b.groups.lock(req.GroupID, joining)
	if g == nil {
		return fail(kerr.GroupIDNotFound, "group "+req.GroupID+" does not exist")
	}
	defer g.mu.Unlock()
	defer g.persistSG() // share_groups_journal.go
	if g.sg == nil && (!joining || !g.becomeShare()) {
		return fail(kerr.GroupIDNotFound, "group "+req.GroupID+" is not a share group")
	}
	sg := g.sg
	cfg := c.b.groups.shareConfig(g.name)
	resp.HeartbeatIntervalMillis = int32(cfg.heartbeat.Milliseconds())
	m := sg.members[req.MemberID]
	if req.MemberEpoch == -1 {
		if m == nil {
			return fail(kerr.UnknownMemberID, "")
		}
		g.removeSGMember(m, "left the group")
		resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(m.id), -1
		return resp, nil
	}
	switch {
	case m == nil && !joining:
		return fail(kerr.UnknownMemberID, "member "+req.MemberID+" is not in group "+req.GroupID)
	case m != nil && !joining && req.MemberEpoch != m.epoch && req.MemberEpoch != m.prevEpoch:
		return fail(kerr.FencedMemberEpoch, "")
	}
	if m == nil {
		m = &sgMember{id: req.MemberID, assigned: map[tpKey]bool{}}
		sg.members[m.id] = m
		sg.epoch++
		g.state = groupStable
	}
	m.clientID, m.host = c.lastClientID, c.remote
	if req.RackID != nil {
		m.rack = req.RackID
	}
	if req.SubscribedTopicNames != nil {
		if subs := sortedTopicNames(req.SubscribedTopicNames); !slices.Equal(subs, m.topics) {
			m.topics = subs
			sg.epoch++
		}
	}
	g.refreshShareEpoch()
	if sg.assignEpoch != sg.epoch {
		g.assignShare()
	}
	g.armSGSession(m)
	before := m.epoch
	if m.epoch != sg.epoch {
		m.prevEpoch, m.epoch = m.epoch, sg.epoch
	}
	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(m.id), m.epoch
	if joining || req.SubscribedTopicNames != nil || m.epoch != before {
		resp.Assignment = c.b.shareAssignment(m.assigned)
	}
	return resp, nil
}
