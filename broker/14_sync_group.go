package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup: v0-5
//
// Behavior:
// * Unknown member: UNKNOWN_MEMBER_ID; a static member with another member
//   id than its instance's: FENCED_INSTANCE_ID; another generation:
//   ILLEGAL_GENERATION; v5 ProtocolType/Protocol that differ from the
//   group's: INCONSISTENT_GROUP_PROTOCOL.
// * PreparingRebalance: REBALANCE_IN_PROGRESS (the member rejoins).
// * CompletingRebalance: the request waits. The leader's SyncGroup carries
//   every assignment; the group becomes Stable, its metadata (members and
//   assignments) is written to the coordinator journal, and every waiting
//   SyncGroup is answered once that write is durable, as Kafka answers
//   after storeGroup. Members the leader left out get an empty assignment
//   (for protocol type "consumer", an encoded empty ConsumerMemberAssignment
//   so that every client can decode it).
// * Stable: the member's current assignment at once (a late follower, or a
//   static member that rejoined without a rebalance).
//
// Version notes:
// * v1: ThrottleMillis; v3: InstanceID (KIP-345); v4: flexible
// * v5: ProtocolType, Protocol in request and response (KIP-559)

func init() { regKey(14, 0, 5, handleSyncGroup) }

func handleSyncGroup(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	fail := func(code int16) {
		resp.ErrorCode = code
		r(encode(resp), nil)
	}
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code)
		return
	}
	g := c.b.groups.lock(req.Group, false)
	if g == nil {
		fail(kerr.UnknownMemberID.Code)
		return
	}
	defer g.mu.Unlock()
	if code := g.checkInstance(req.InstanceID, req.MemberID); code != 0 {
		fail(code)
		return
	}
	m := g.members[req.MemberID]
	switch {
	case m == nil:
		fail(kerr.UnknownMemberID.Code)
		return
	case req.Generation != g.generation:
		fail(kerr.IllegalGeneration.Code)
		return
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Protocol != nil && *req.Protocol != g.protocol:
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	switch g.state {
	case groupPreparingRebalance:
		fail(kerr.RebalanceInProgress.Code)
	case groupCompletingRebalance:
		if m.sync != nil {
			dup := m.sync.ResponseKind().(*kmsg.SyncGroupResponse)
			dup.ErrorCode = kerr.RebalanceInProgress.Code
			m.syncR(encode(dup), nil)
		}
		m.sync, m.syncR = req, r
		delete(g.pendingSync, m.id)
		g.heartbeat(m)
		if m.id == g.leader {
			g.completeSync(req)
		}
	case groupStable:
		resp.ProtocolType, resp.Protocol = kmsg.StringPtr(g.protocolType), kmsg.StringPtr(g.protocol)
		resp.MemberAssignment = g.assignmentOrEmpty(m.assignment)
		g.heartbeat(m)
		r(encode(resp), nil)
	default:
		fail(kerr.UnknownMemberID.Code)
	}
}

// completeSync applies the leader's assignments, makes the group Stable and
// answers every waiting SyncGroup once the metadata is durable.
func (g *group) completeSync(req *kmsg.SyncGroupRequest) {
	for _, m := range g.members {
		m.assignment = nil
	}
	for _, a := range req.GroupAssignment {
		if m := g.members[a.MemberID]; m != nil {
			m.assignment = a.MemberAssignment
		}
	}
	g.state = groupStable
	g.pendingSync = nil
	if g.syncT != nil {
		g.syncT.Stop()
		g.syncT = nil
	}
	durable := g.persist()
	type answer struct {
		sync *kmsg.SyncGroupRequest
		r    reply
		a    []byte
	}
	var answers []answer
	for _, m := range g.members {
		if m.sync != nil {
			answers = append(answers, answer{m.sync, m.syncR, g.assignmentOrEmpty(m.assignment)})
			m.sync, m.syncR = nil, nil
		}
	}
	protocolType, protocol := g.protocolType, g.protocol
	log := g.c.b.log
	name := g.name
	waitThen([]<-chan error{durable}, func(err error) {
		if err != nil {
			log.Error("store group metadata", "group", name, "err", err)
		}
		for _, a := range answers {
			resp := a.sync.ResponseKind().(*kmsg.SyncGroupResponse)
			if err != nil {
				// Kafka maps a failed group store to COORDINATOR_NOT_AVAILABLE;
				// the members rejoin.
				resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			} else {
				resp.ProtocolType, resp.Protocol = kmsg.StringPtr(protocolType), kmsg.StringPtr(protocol)
				resp.MemberAssignment = a.a
			}
			a.r(encode(resp), nil)
		}
	})
}

// emptyConsumerAssignment is an encoded ConsumerMemberAssignment with no
// partitions (version 0).
var emptyConsumerAssignment = func() []byte {
	a := kmsg.NewConsumerMemberAssignment()
	return a.AppendTo(nil)
}()

// assignmentOrEmpty returns a, or for a "consumer" group with no assignment
// for the member, an encoded empty assignment: some clients (sarama,
// librdkafka) fail on zero bytes.
func (g *group) assignmentOrEmpty(a []byte) []byte {
	if len(a) == 0 && g.protocolType == consumerProtocolType {
		return emptyConsumerAssignment
	}
	return a
}
