package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupDescribe: v1 (KIP-932)
//
// Behavior:
// * Each share group's state (Empty, Stable), group and assignment epochs,
//   assignor ("simple") and members with their subscriptions and
//   assignments.
// * An unknown group, or one that is not a share group, is
//   GROUP_ID_NOT_FOUND; an empty id INVALID_GROUP_ID.
// * AuthorizedOperations: READ, DELETE and DESCRIBE when asked (the
//   gateway authorizes), else INT32_MIN.
//
// Version notes:
// * v0 (Kafka 4.0 early access) was removed in Kafka 4.1.

func init() { regKey(int16(kmsg.ShareGroupDescribe), 1, 1, syncHandler(handleShareGroupDescribe)) }

func handleShareGroupDescribe(c *Conn, req *kmsg.ShareGroupDescribeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, name := range req.GroupIDs {
		rg := kmsg.NewShareGroupDescribeResponseGroup()
		rg.GroupID = name
		rg.AuthorizedOperations = authorizedOpsOmitted
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = groupOpsAuthorized
		}
		if name == "" {
			rg.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		g := c.b.groups.lock(name, false)
		if g == nil || g.sg == nil {
			if g != nil {
				g.mu.Unlock()
			}
			rg.ErrorCode = kerr.GroupIDNotFound.Code
			rg.ErrorMessage = kmsg.StringPtr("group " + name + " is not a share group")
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		sg := g.sg
		rg.GroupState, rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor = sg.state(), sg.epoch, sg.assignEpoch, shareAssignorSimple
		for _, id := range sortedKeys(sg.members) {
			m := sg.members[id]
			rm := kmsg.NewShareGroupDescribeResponseGroupMember()
			rm.MemberID, rm.RackID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.id, m.rack, m.epoch, m.clientID, m.host
			rm.SubscribedTopicNames = append([]string{}, m.topics...)
			for _, at := range c.b.assignmentTopics(m.assigned) {
				tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				tp.TopicID, tp.Partitions = at.TopicID, at.Partitions
				if t := c.b.lookupID(at.TopicID); t != nil {
					tp.Topic = t.name
				}
				rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, tp)
			}
			rg.Members = append(rg.Members, rm)
		}
		g.mu.Unlock()
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
