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
// ShareGroupDescribe, DescribeShareGroupOffsets) is split the same way,
// by routeBatched: splitByCoordinatorKind looks the ids' coordinators up together (one
// upstream round trip for the uncached ones), scatterOrAnswer sends one
// part per coordinator and tolerates parts that get no answer, and the
// merge answers COORDINATOR_NOT_AVAILABLE (retriable) for every id that
// was not found (failed) or whose coordinator did not answer
// (unreachedIDs, which forgets that coordinator).

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

// coordBatch is one batched coordinator key for routeBatched: the
// request's ids (I) and the answer's entries (E), one per id.
type coordBatch[I, E any] struct {
	kind    int8                               // groupKey or txnKey
	id      func(*I) string                    // a request id
	part    func([]I) kmsg.Request             // the request with only these ids
	entries func(kmsg.Response) *[]E           // the answer's entries
	entry   func(*E) (id *string, code *int16) // an entry's id and error code
}

// kmsgDefaulter is a kmsg struct type's pointer (Default sets the
// fields' Kafka defaults, as the generated NewXxx does).
type kmsgDefaulter[E any] interface {
	*E
	Default()
}

// routeBatched splits a batched coordinator request per coordinator
// and merges the answers: the largest throttle, every coordinator's
// entries (an entry saying its coordinator moved forgets it), and an
// entry answered COORDINATOR_NOT_AVAILABLE for every id whose
// coordinator was not found or did not answer.
func routeBatched[I, E any, PE kmsgDefaulter[E]](t *tunnel, req kmsg.Request, ids []I, b coordBatch[I, E], rep reply) error {
	by, failed := splitByCoordinatorKind(t, b.kind, ids, b.id)
	parts := map[int32]kmsg.Request{}
	for n, part := range by {
		parts[n] = b.part(part)
	}
	return t.scatterOrAnswer(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		out := req.ResponseKind()
		all := b.entries(out)
		failed := append(failed, unreachedIDs(t, b.kind, by, m, b.id)...)
		var throttle int32
		for _, n := range sortedNodes(m) {
			ms, _ := m[n].(kmsg.ThrottleResponse).Throttle()
			throttle = max(throttle, ms)
			es := *b.entries(m[n])
			for i := range es {
				if id, code := b.entry(&es[i]); movedCode(*code) {
					t.view.invalidate(false, &coordKey{b.kind, *id})
				}
			}
			*all = append(*all, es...)
		}
		out.(kmsg.SetThrottleResponse).SetThrottle(throttle)
		for i := range failed {
			var e E
			PE(&e).Default()
			id, code := b.entry(&e)
			*id, *code = b.id(&failed[i]), kerr.CoordinatorNotAvailable.Code
			*all = append(*all, e)
		}
		return out, nil
	})
}

// stringID is coordBatch.id for a request whose ids are strings.
func stringID(id *string) string { return *id }

func (t *tunnel) routeOffsetFetchGroups(r *kmsg.OffsetFetchRequest, rep reply) error {
	return routeBatched(t, r, r.Groups, coordBatch[kmsg.OffsetFetchRequestGroup, kmsg.OffsetFetchResponseGroup]{
		kind:    groupKey,
		id:      func(g *kmsg.OffsetFetchRequestGroup) string { return g.Group },
		part:    func(gs []kmsg.OffsetFetchRequestGroup) kmsg.Request { c := *r; c.Groups = gs; return &c },
		entries: func(p kmsg.Response) *[]kmsg.OffsetFetchResponseGroup { return &p.(*kmsg.OffsetFetchResponse).Groups },
		entry:   func(g *kmsg.OffsetFetchResponseGroup) (*string, *int16) { return &g.Group, &g.ErrorCode },
	}, rep)
}

func (t *tunnel) routeDescribeGroups(r *kmsg.DescribeGroupsRequest, rep reply) error {
	return routeBatched(t, r, r.Groups, coordBatch[string, kmsg.DescribeGroupsResponseGroup]{
		kind: groupKey,
		id:   stringID,
		part: func(gs []string) kmsg.Request { c := *r; c.Groups = gs; return &c },
		entries: func(p kmsg.Response) *[]kmsg.DescribeGroupsResponseGroup {
			return &p.(*kmsg.DescribeGroupsResponse).Groups
		},
		entry: func(g *kmsg.DescribeGroupsResponseGroup) (*string, *int16) { return &g.Group, &g.ErrorCode },
	}, rep)
}

func (t *tunnel) routeDeleteGroups(r *kmsg.DeleteGroupsRequest, rep reply) error {
	return routeBatched(t, r, r.Groups, coordBatch[string, kmsg.DeleteGroupsResponseGroup]{
		kind:    groupKey,
		id:      stringID,
		part:    func(gs []string) kmsg.Request { c := *r; c.Groups = gs; return &c },
		entries: func(p kmsg.Response) *[]kmsg.DeleteGroupsResponseGroup { return &p.(*kmsg.DeleteGroupsResponse).Groups },
		entry:   func(g *kmsg.DeleteGroupsResponseGroup) (*string, *int16) { return &g.Group, &g.ErrorCode },
	}, rep)
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
