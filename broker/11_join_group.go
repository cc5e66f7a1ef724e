package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup: v0-9
//
// Behavior:
// * An empty group id is INVALID_GROUP_ID; a session timeout outside
//   [group.min.session.timeout.ms, group.max.session.timeout.ms] is
//   INVALID_SESSION_TIMEOUT; an empty protocol type or list, another
//   protocol type than the group's, or no protocol in common with every
//   member is INCONSISTENT_GROUP_PROTOCOL.
// * A dynamic member joining without a member id at v4+ gets a fresh id
//   and MEMBER_ID_REQUIRED (KIP-394) and must join again with it within
//   its session timeout; at v0-3 it joins at once.
// * Static members (group.instance.id, KIP-345) join without the round
//   trip. A known instance rejoining with an empty member id replaces its
//   old member: it takes a new member id and the old assignment; if the
//   group is Stable and the rejoin would not change the selected protocol
//   (Kafka's updateStaticMemberAndRebalance) there is no rebalance,
//   and a returning leader gets SkipAssignment (v9, KIP-814). The old
//   member's waiting JoinGroup/SyncGroup is answered FENCED_INSTANCE_ID.
// * The response waits for the join phase to end: every member rejoined,
//   or the longest rebalance timeout passed (dynamic members that did not
//   rejoin are removed, static ones keep their place). The leader (kept if
//   it rejoined, else the first rejoined member) gets every member's
//   metadata for the chosen protocol.
// * A member of a Stable or CompletingRebalance group rejoining with the
//   same protocols (and not the leader) gets the current generation back
//   without a rebalance.
// * group.initial.rebalance.delay.ms is not applied (skipped_features).
//
// Version notes:
// * v1: RebalanceTimeoutMillis (v0: the session timeout)
// * v4: MEMBER_ID_REQUIRED (KIP-394); v5: InstanceID (KIP-345)
// * v6: flexible; v7: ProtocolType in the response
// * v8: Reason (logged); v9: SkipAssignment (KIP-814)

func init() { regKey(11, 0, 9, handleJoinGroup) }

func handleJoinGroup(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	fail := func(code int16) {
		resp.ErrorCode = code
		r(encode(resp), nil)
	}
	co := c.b.groups
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	switch {
	case req.Group == "":
		fail(kerr.InvalidGroupID.Code)
		return
	case session < co.minSession || session > co.maxSession:
		fail(kerr.InvalidSessionTimeout.Code)
		return
	}
	if req.Version == 0 {
		req.RebalanceTimeoutMillis = req.SessionTimeoutMillis
	}
	g := co.lock(req.Group, true)
	defer g.mu.Unlock()
	if !g.supportsGroupProtocols(req.ProtocolType, req.Protocols, req.MemberID) {
		fail(kerr.InconsistentGroupProtocol.Code)
		g.dropIfUnused()
		return
	}
	if req.MemberID == "" {
		g.joinNew(c, req, resp, r)
		return
	}
	if code := g.checkInstance(req.InstanceID, req.MemberID); code != 0 {
		fail(code)
		return
	}
	if t, ok := g.pending[req.MemberID]; ok {
		t.Stop()
		delete(g.pending, req.MemberID)
		g.addMember(c, req, req.MemberID, r, nil)
		return
	}
	m := g.members[req.MemberID]
	if m == nil {
		fail(kerr.UnknownMemberID.Code)
		return
	}
	switch g.state {
	case groupCompletingRebalance, groupStable:
		if sameProtocols(m.protocols, req.Protocols) && (g.state == groupCompletingRebalance || m.id != g.leader) {
			g.fillJoin(m.id, resp)
			g.heartbeat(m)
			r(encode(resp), nil)
			return
		}
	case groupPreparingRebalance:
	default:
		fail(kerr.UnknownMemberID.Code)
		return
	}
	g.updateJoin(m, req, r)
	g.rebalance()
}

// joinNew handles a JoinGroup without a member id.
func (g *group) joinNew(c *Conn, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse, r reply) {
	if req.InstanceID != nil {
		if old := g.members[g.static[*req.InstanceID]]; old != nil {
			g.replaceStatic(c, old, req, resp, r)
			return
		}
	}
	id := newMemberID(c.clientID(), req.InstanceID)
	if req.Version >= 4 && req.InstanceID == nil {
		g.addPending(id, time.Duration(req.SessionTimeoutMillis)*time.Millisecond)
		resp.MemberID = id
		resp.ErrorCode = kerr.MemberIDRequired.Code
		r(encode(resp), nil)
		return
	}
	g.addMember(c, req, id, r, nil)
}

// addMember adds a joining member (with the assignment of the static
// member it replaces, if any) and starts or joins a rebalance.
func (g *group) addMember(c *Conn, req *kmsg.JoinGroupRequest, id string, r reply, assignment []byte) {
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	m := &member{id: id, instance: req.InstanceID, clientID: c.clientID(), clientHost: c.remote, assignment: assignment}
	g.members[id] = m
	if m.instance != nil {
		g.static[*m.instance] = id
	}
	g.updateJoin(m, req, r)
	g.heartbeat(m)
	g.rebalance()
}

// updateJoin records m's (re)join request, which waits for the join phase.
func (g *group) updateJoin(m *member, req *kmsg.JoinGroupRequest, r reply) {
	if m.join != nil {
		// A second JoinGroup from the same member (a client that gave up
		// waiting and retried) supersedes the first, which is answered
		// REBALANCE_IN_PROGRESS now so that its connection is not held.
		old := m.join.ResponseKind().(*kmsg.JoinGroupResponse)
		old.ErrorCode = kerr.RebalanceInProgress.Code
		m.joinR(encode(old), nil)
		g.nJoining--
	}
	m.protocols = req.Protocols
	m.rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	m.session = time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	m.join, m.joinR = req, r
	g.nJoining++
}

// replaceStatic gives a rejoining static instance a new member id in place
// of old (KIP-345), without a rebalance when nothing changed.
func (g *group) replaceStatic(c *Conn, old *member, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse, r reply) {
	if old.join != nil {
		fenced := old.join.ResponseKind().(*kmsg.JoinGroupResponse)
		fenced.ErrorCode = kerr.FencedInstanceID.Code
		old.joinR(encode(fenced), nil)
		old.join, old.joinR = nil, nil
		g.nJoining--
	}
	if old.sync != nil {
		fenced := old.sync.ResponseKind().(*kmsg.SyncGroupResponse)
		fenced.ErrorCode = kerr.FencedInstanceID.Code
		old.syncR(encode(fenced), nil)
		old.sync, old.syncR = nil, nil
	}
	wasLeader := g.leader == old.id
	g.removeMember(old)
	id := newMemberID(c.clientID(), req.InstanceID)
	m := &member{id: id, instance: req.InstanceID, clientID: c.clientID(), clientHost: c.remote, assignment: old.assignment,
		protocols: req.Protocols, rebalance: time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		session: time.Duration(req.SessionTimeoutMillis) * time.Millisecond}
	// Kafka's updateStaticMemberAndRebalance: in Stable, the rejoin
	// rebalances only if it would change the selected protocol; the
	// protocol metadata itself may differ (a restarted cooperative-sticky
	// member no longer lists what it owned).
	g.members[id] = m
	stay := g.state == groupStable && g.selectProtocol() == g.protocol
	delete(g.members, id)
	if stay {
		g.members[id] = m
		g.static[*m.instance] = id
		if wasLeader {
			g.leader = id
		}
		g.heartbeat(m)
		g.fillJoin(id, resp)
		resp.SkipAssignment = wasLeader
		g.persist() // the new member id must survive a restart
		c.b.log.Info("static member rejoined without a rebalance", "group", g.name, "instance", *req.InstanceID, "member", id)
		r(encode(resp), nil)
		return
	}
	if wasLeader {
		g.leader = id
	}
	g.addMember(c, req, id, r, old.assignment)
}

// dropIfUnused removes a group that a refused join created.
func (g *group) dropIfUnused() {
	if len(g.members) == 0 && len(g.offsets) == 0 && g.generation == 0 && g.protocolType == "" {
		g.dead = true
		g.c.mu.Lock()
		if g.c.gs[g.name] == g {
			delete(g.c.gs, g.name)
		}
		g.c.mu.Unlock()
	}
}

// clientID is the request's client id (for member ids and descriptions).
func (c *Conn) clientID() string {
	if c.lastClientID == "" {
		return "member"
	}
	return c.lastClientID
}
