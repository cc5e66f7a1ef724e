package proxy

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// The share-group coordinator keys (KIP-932) in single-port mode:
// ShareGroupHeartbeat, AlterShareGroupOffsets and DeleteShareGroupOffsets
// go to their group's coordinator (coordOf → shareCoordOf);
// ShareGroupDescribe and DescribeShareGroupOffsets batch groups and are
// split per coordinator like DescribeGroups (route_groups.go).

// The share keys single-port offers, added to the served sets of
// route_nodes.go and route_coord.go here so those lists stay untouched.
func init() {
	for _, k := range []int16{apis.ShareFetch, apis.ShareAcknowledge} {
		singlePortServes[k] = true
	}
	for _, k := range []int16{apis.ShareGroupHeartbeat, apis.ShareGroupDescribe, apis.DescribeShareGroupOffsets,
		apis.AlterShareGroupOffsets, apis.DeleteShareGroupOffsets} {
		coordinatorKeys[k] = true
	}
}

// shareCoordOf names the group coordinator of a share key that names
// one group.
func shareCoordOf(req kmsg.Request) (coordKey, bool) {
	switch r := req.(type) {
	case *kmsg.ShareGroupHeartbeatRequest:
		return coordKey{groupKey, r.GroupID}, true
	case *kmsg.AlterShareGroupOffsetsRequest:
		return coordKey{groupKey, r.GroupID}, true
	case *kmsg.DeleteShareGroupOffsetsRequest:
		return coordKey{groupKey, r.GroupID}, true
	}
	return coordKey{}, false
}

// setShareTopError is setTopError for the share keys' responses.
func setShareTopError(resp kmsg.Response, code int16) bool {
	switch r := resp.(type) {
	case *kmsg.ShareGroupHeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.AlterShareGroupOffsetsResponse:
		r.ErrorCode = code
	case *kmsg.DeleteShareGroupOffsetsResponse:
		r.ErrorCode = code
	default:
		return false
	}
	return true
}

// shareCoordinatorMoved is coordinatorMoved for the share keys' responses.
func shareCoordinatorMoved(resp kmsg.Response) bool {
	moved := movedCode
	switch r := resp.(type) {
	case *kmsg.ShareGroupHeartbeatResponse:
		return moved(r.ErrorCode)
	case *kmsg.AlterShareGroupOffsetsResponse:
		return moved(r.ErrorCode)
	case *kmsg.DeleteShareGroupOffsetsResponse:
		return moved(r.ErrorCode)
	}
	return false
}

// routeShareCoordinator splits the batched share-group keys; done false
// for every other request.
func (t *tunnel) routeShareCoordinator(req kmsg.Request, rep reply) (done bool, err error) {
	switch r := req.(type) {
	case *kmsg.ShareGroupDescribeRequest:
		return true, t.routeShareGroupDescribe(r, rep)
	case *kmsg.DescribeShareGroupOffsetsRequest:
		return true, t.routeDescribeShareGroupOffsets(r, rep)
	}
	return false, nil
}

func (t *tunnel) routeShareGroupDescribe(r *kmsg.ShareGroupDescribeRequest, rep reply) error {
	return routeBatched(t, r, r.GroupIDs, coordBatch[string, kmsg.ShareGroupDescribeResponseGroup]{
		kind: groupKey,
		id:   stringID,
		part: func(gs []string) kmsg.Request { c := *r; c.GroupIDs = gs; return &c },
		entries: func(p kmsg.Response) *[]kmsg.ShareGroupDescribeResponseGroup {
			return &p.(*kmsg.ShareGroupDescribeResponse).Groups
		},
		entry: func(g *kmsg.ShareGroupDescribeResponseGroup) (*string, *int16) { return &g.GroupID, &g.ErrorCode },
	}, rep)
}

func (t *tunnel) routeDescribeShareGroupOffsets(r *kmsg.DescribeShareGroupOffsetsRequest, rep reply) error {
	type group = kmsg.DescribeShareGroupOffsetsResponseGroup
	return routeBatched(t, r, r.Groups, coordBatch[kmsg.DescribeShareGroupOffsetsRequestGroup, group]{
		kind:    groupKey,
		id:      func(g *kmsg.DescribeShareGroupOffsetsRequestGroup) string { return g.GroupID },
		part:    func(gs []kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.Request { c := *r; c.Groups = gs; return &c },
		entries: func(p kmsg.Response) *[]group { return &p.(*kmsg.DescribeShareGroupOffsetsResponse).Groups },
		entry:   func(g *group) (*string, *int16) { return &g.GroupID, &g.ErrorCode },
	}, rep)
}
