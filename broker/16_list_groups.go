package broker

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups: v0-5
//
// Behavior:
// * Every group with its protocol type ("" for groups that only hold
//   standalone commits), state (v4+) and type (v5+: "classic", or
//   "consumer" for KIP-848 groups, whose state is the ConsumerGroupState
//   name: Empty, Assigning, Reconciling, Stable).
// * StatesFilter (v4, KIP-518) and TypesFilter (v5, KIP-848) match
//   case-insensitively, as Kafka does; an empty filter matches all.
//
// Version notes:
// * v1: ThrottleMillis; v3: flexible; v4: StatesFilter, GroupState;
//   v5: TypesFilter, GroupType

func init() { regKey(16, 0, 5, syncHandler(handleListGroups)) }

func handleListGroups(c *Conn, req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	matches := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	for _, g := range c.b.groups.groups() {
		g.mu.Lock()
		dead, state, ptype, gtype := g.dead, g.state.String(), g.protocolType, groupTypeClassic
		if g.cg != nil {
			state, gtype = g.cg.state(), groupTypeConsumer
		}
		if g.sg != nil {
			state, gtype = g.sg.state(), groupTypeShare
		}
		g.mu.Unlock()
		if dead || !matches(req.StatesFilter, state) || !matches(req.TypesFilter, gtype) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.name, ptype, state, gtype
		resp.Groups = append(resp.Groups, lg)
	}
	return resp, nil
}
