package broker

import (
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe: v0-1 (KIP-848)
//
// Behavior:
// * Each named KIP-848 group with its state (Empty, Assigning,
//   Reconciling, Stable), group and assignment epochs, assignor, and
//   every member's subscription, current assignment and target
//   assignment (consumer_groups.go).
// * An unknown group, or a classic one, is GROUP_ID_NOT_FOUND (Kafka
//   answers the same for a classic group); an empty id INVALID_GROUP_ID.
// * AuthorizedOperations: as DescribeGroups (the gateway authorizes).
//
// Version notes:
// * v1: MemberType (1: a consumer-protocol member; Kafka reports 0 for
//   classic members of a migrating group, which we never have).

func init() { regKey(69, 0, 1, syncHandler(handleConsumerGroupDescribe)) }

func handleConsumerGroupDescribe(c *Conn, req *kmsg.ConsumerGroupDescribeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		sg := kmsg.NewConsumerGroupDescribeResponseGroup()
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
		if g == nil || g.cg == nil {
			if g != nil {
				g.mu.Unlock()
			}
			sg.ErrorCode = kerr.GroupIDNotFound.Code
			sg.ErrorMessage = kmsg.StringPtr("group " + name + " is not a consumer group")
			sg.State = groupDead.String()
			resp.Groups = append(resp.Groups, sg)
			continue
		}
		cg := g.cg
		sg.State, sg.Epoch, sg.AssignmentEpoch, sg.AssignorName = cg.state(), cg.epoch, cg.assignEpoch, cg.assignor
		ids := make([]string, 0, len(cg.members))
		for id := range cg.members {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			m := cg.members[id]
			sm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			sm.MemberID, sm.InstanceID, sm.RackID, sm.MemberEpoch = m.id, m.instance, m.rack, m.epoch
			sm.ClientID, sm.ClientHost = m.clientID, m.host
			sm.SubscribedTopics = slices.Clone(m.topics)
			if sm.SubscribedTopics == nil {
				sm.SubscribedTopics = []string{}
			}
			sm.SubscribedTopicRegex = m.regex
			sm.Assignment = c.b.describeAssignment(m.assigned)
			sm.TargetAssignment = c.b.describeAssignment(cg.target[m.id])
			sm.MemberType = 1
			sg.Members = append(sg.Members, sm)
		}
		g.mu.Unlock()
		resp.Groups = append(resp.Groups, sg)
	}
	return resp, nil
}

// describeAssignment is a partition set as ConsumerGroupDescribe shows it.
func (b *Broker) describeAssignment(set map[tpKey]bool) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, t := range b.assignmentTopics(set) {
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Partitions = t.TopicID, t.Partitions
		if tt := b.lookupID(t.TopicID); tt != nil {
			tp.Topic = tt.name
		}
		a.TopicPartitions = append(a.TopicPartitions, tp)
	}
	return a
}
