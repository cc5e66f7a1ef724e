package proxy

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batched group requests are split per coordinator; ListGroups fans out
// to every broker (each lists the groups it coordinates) and is merged
// without duplicates.

// splitByCoordinator groups items by their group's coordinator. A group
// whose coordinator cannot be found goes to failed.
func splitByCoordinator[T any](t *tunnel, items []T, group func(*T) string) (by map[int32][]T, failed []T) {
	return splitByCoordinatorKind(t, groupKey, items, group)
}

func (t *tunnel) routeOffsetFetchGroups(r *kmsg.OffsetFetchRequest, rep reply) error {
	by, failed := splitByCoordinator(t, r.Groups, func(g *kmsg.OffsetFetchRequestGroup) string { return g.Group })
	parts := map[int32]kmsg.Request{}
	for n, gs := range by {
		c := *r
		c.Groups = gs
		parts[n] = &c
	}
	merge := func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		out := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		for _, resp := range m {
			x := resp.(*kmsg.OffsetFetchResponse)
			out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
			out.Groups = append(out.Groups, x.Groups...)
			for _, g := range x.Groups {
				if g.ErrorCode == kerr.NotCoordinator.Code || g.ErrorCode == kerr.CoordinatorNotAvailable.Code {
					t.view.invalidate(false, &coordKey{groupKey, g.Group})
				}
			}
		}
		for _, g := range failed {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.CoordinatorNotAvailable.Code
			out.Groups = append(out.Groups, rg)
		}
		return out, nil
	}
	return t.scatterOrAnswer(parts, rep, merge)
}

func (t *tunnel) routeDescribeGroups(r *kmsg.DescribeGroupsRequest, rep reply) error {
	by, failed := splitByCoordinator(t, r.Groups, func(g *string) string { return *g })
	parts := map[int32]kmsg.Request{}
	for n, gs := range by {
		c := *r
		c.Groups = gs
		parts[n] = &c
	}
	merge := func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		out := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, resp := range m {
			x := resp.(*kmsg.DescribeGroupsResponse)
			out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
			out.Groups = append(out.Groups, x.Groups...)
		}
		for _, g := range failed {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, kerr.CoordinatorNotAvailable.Code
			out.Groups = append(out.Groups, rg)
		}
		return out, nil
	}
	return t.scatterOrAnswer(parts, rep, merge)
}

func (t *tunnel) routeDeleteGroups(r *kmsg.DeleteGroupsRequest, rep reply) error {
	by, failed := splitByCoordinator(t, r.Groups, func(g *string) string { return *g })
	parts := map[int32]kmsg.Request{}
	for n, gs := range by {
		c := *r
		c.Groups = gs
		parts[n] = &c
	}
	merge := func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		out := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, resp := range m {
			x := resp.(*kmsg.DeleteGroupsResponse)
			out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
			out.Groups = append(out.Groups, x.Groups...)
		}
		for _, g := range failed {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, kerr.CoordinatorNotAvailable.Code
			out.Groups = append(out.Groups, rg)
		}
		return out, nil
	}
	return t.scatterOrAnswer(parts, rep, merge)
}

// routeFanOut sends ListGroups to every broker and merges the lists.
func (t *tunnel) routeFanOut(req kmsg.Request, rep reply) error {
	r, ok := req.(*kmsg.ListGroupsRequest)
	if !ok {
		return badRequest(closeUnsupported, "%s is not served in single-port mode", apiName(req.Key()))
	}
	parts := map[int32]kmsg.Request{}
	for _, n := range t.view.liveBrokers() {
		c := *r
		parts[n] = &c
	}
	return t.scatter(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		out := r.ResponseKind().(*kmsg.ListGroupsResponse)
		seen := map[string]bool{}
		for _, resp := range m {
			x := resp.(*kmsg.ListGroupsResponse)
			out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
			if out.ErrorCode == 0 {
				out.ErrorCode = x.ErrorCode
			}
			for _, g := range x.Groups {
				if !seen[g.Group] {
					seen[g.Group] = true
					out.Groups = append(out.Groups, g)
				}
			}
		}
		return out, nil
	})
}

// scatterOrAnswer scatters parts like scatter; when no group has a known
// coordinator (no parts), merge answers alone, every group with the error
// it puts in for the groups it was not given, and nothing is sent upstream.
func (t *tunnel) scatterOrAnswer(parts map[int32]kmsg.Request, rep reply, merge func(map[int32]kmsg.Response) (kmsg.Response, error)) error {
	if len(parts) > 0 {
		return t.scatter(parts, rep, merge)
	}
	if rep != nil {
		resp, _ := merge(nil)
		rep(resp, nil)
	}
	return nil
}
