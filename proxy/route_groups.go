package proxy

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batched group requests are split per coordinator; ListGroups fans out
// to every broker (each lists the groups it coordinates) and is merged
// without duplicates.

// Every batched coordinator key (DescribeGroups, DeleteGroups,
// OffsetFetch v8+, ConsumerGroupDescribe, DescribeTransactions,
// ShareGroupDescribe, DescribeShareGroupOffsets) is split the same way:
// splitByCoordinatorKind looks the ids' coordinators up together (one
// upstream round trip for the uncached ones), scatterOrAnswer sends one
// part per coordinator and tolerates parts that get no answer, and the
// merge answers COORDINATOR_NOT_AVAILABLE (retriable) for every id that
// was not found (failed) or whose coordinator did not answer
// (unreachedIDs, which forgets that coordinator).

// splitByCoordinator groups items by their group's coordinator. A group
// whose coordinator cannot be found goes to failed.
func splitByCoordinator[T any](t *tunnel, items []T, group func(*T) string) (by map[int32][]T, failed []T) {
	return splitByCoordinatorKind(t, groupKey, items, group)
}

// splitByCoordinatorKind groups ids by their coordinator of kind (group
// or transaction). An id whose coordinator cannot be found goes to failed
// (counted and logged rate-limited once per request: a client can name
// ids at will).
func splitByCoordinatorKind[T any](t *tunnel, kind int8, items []T, id func(*T) string) (by map[int32][]T, failed []T) {
	keys := make([]string, len(items))
	for i := range items {
		keys[i] = id(&items[i])
	}
	found, errs := t.coordinatorsFor(kind, keys)
	by = map[int32][]T{}
	for i := range items {
		n, ok := found[keys[i]]
		if !ok {
			failed = append(failed, items[i])
			continue
		}
		by[n] = append(by[n], items[i])
	}
	for k, err := range errs { // one of them, as an example
		t.event(routeCoordinatorLookup, "single-port: coordinator lookup failed; answered COORDINATOR_NOT_AVAILABLE",
			"conn", t.s.id, "keys", len(errs), "key", k, "err", err)
		break
	}
	return by, failed
}

// unreachedIDs lists the ids of the parts that got no answer (their
// coordinator could not be dialled, or its connection failed) and
// forgets those coordinators, so the next request looks them up again.
func unreachedIDs[T any](t *tunnel, kind int8, by map[int32][]T, m map[int32]kmsg.Response, id func(*T) string) []T {
	var out []T
	for n, items := range by {
		if _, ok := m[n]; ok {
			continue
		}
		for i := range items {
			t.view.invalidate(false, &coordKey{kind, id(&items[i])})
		}
		out = append(out, items...)
	}
	return out
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
		failed := append(failed, unreachedIDs(t, groupKey, by, m, func(g *kmsg.OffsetFetchRequestGroup) string { return g.Group })...)
		for _, resp := range m {
			x := resp.(*kmsg.OffsetFetchResponse)
			out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
			out.Groups = append(out.Groups, x.Groups...)
			for _, g := range x.Groups {
				if movedCode(g.ErrorCode) {
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
		failed := append(failed, unreachedIDs(t, groupKey, by, m, func(g *string) string { return *g })...)
		for _, resp := range m {
			x := resp.(*kmsg.DescribeGroupsResponse)
			out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
			out.Groups = append(out.Groups, x.Groups...)
			for _, g := range x.Groups {
				if movedCode(g.ErrorCode) {
					t.view.invalidate(false, &coordKey{groupKey, g.Group})
				}
			}
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
		failed := append(failed, unreachedIDs(t, groupKey, by, m, func(g *string) string { return *g })...)
		for _, resp := range m {
			x := resp.(*kmsg.DeleteGroupsResponse)
			out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
			out.Groups = append(out.Groups, x.Groups...)
			for _, g := range x.Groups {
				if movedCode(g.ErrorCode) {
					t.view.invalidate(false, &coordKey{groupKey, g.Group})
				}
			}
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

// scatterOrAnswer scatters a batched coordinator request's parts, one
// per coordinator, like scatterPartial: a coordinator that cannot be
// dialled, or whose connection fails, costs its ids (unreachedIDs) and
// not the client connection. When no id has a known coordinator (no
// parts), merge answers alone, every id with the error it puts in for
// the ids it was not given, and nothing is sent upstream.
func (t *tunnel) scatterOrAnswer(parts map[int32]kmsg.Request, rep reply, merge func(map[int32]kmsg.Response) (kmsg.Response, error)) error {
	if len(parts) > 0 {
		return t.scatterPartial(parts, rep, merge)
	}
	if rep != nil {
		resp, _ := merge(nil)
		rep(resp, nil)
	}
	return nil
}
