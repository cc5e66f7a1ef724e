package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups: v0-6
//
// Behavior:
// * Each group's state (Empty, PreparingRebalance, CompletingRebalance,
//   Stable), protocol type and members with client id and host. As Kafka's
//   GroupSummary, the protocol name and each member's metadata and
//   assignment are filled only when the group is Stable.
// * An unknown group is state "Dead" with no error at v0-5 and
//   GROUP_ID_NOT_FOUND at v6 (KIP-1043); an empty id is INVALID_GROUP_ID.
// * AuthorizedOperations (v3+, when asked): READ, DELETE and DESCRIBE, as
//   the gateway does authorization; else INT32_MIN.
//
// Version notes:
// * v1: ThrottleMillis; v3: authorized operations; v4: InstanceID;
//   v5: flexible; v6: ErrorMessage

func init() { regKey(15, 0, 6, syncHandler(handleDescribeGroups)) }

func handleDescribeGroups(c *Conn, req *kmsg.DescribeGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		sg := kmsg.NewDescribeGroupsResponseGroup()
		sg.Group = name
		sg.AuthorizedOperations = authorizedOpsOmitted
		if req.IncludeAuthorizedOperations {
			sg.AuthorizedOperations = groupOpsAuthorized
		}
		if name == "" {
			sg.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, sg)
			continue
		}
		g := c.b.groups.lock(name, false)
		if g == nil {
			sg.State = groupDead.String()
			if req.Version >= 6 {
				sg.ErrorCode = kerr.GroupIDNotFound.Code
				sg.ErrorMessage = kmsg.StringPtr("group " + name + " does not exist")
			}
			resp.Groups = append(resp.Groups, sg)
			continue
		}
		sg.State, sg.ProtocolType = g.state.String(), g.protocolType
		stable := g.state == groupStable
		if stable {
			sg.Protocol = g.protocol
		}
		for _, id := range g.sortedMemberIDs() {
			m := g.members[id]
			sm := kmsg.NewDescribeGroupsResponseGroupMember()
			sm.MemberID, sm.InstanceID, sm.ClientID, sm.ClientHost = m.id, m.instance, m.clientID, m.clientHost
			if stable {
				for _, p := range m.protocols {
					if p.Name == g.protocol {
						sm.ProtocolMetadata = p.Metadata
					}
				}
				sm.MemberAssignment = g.assignmentOrEmpty(m.assignment)
			}
			sg.Members = append(sg.Members, sm)
		}
		g.mu.Unlock()
		resp.Groups = append(resp.Groups, sg)
	}
	return resp, nil
}
