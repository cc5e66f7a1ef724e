package proxy

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// The admin keys single-port routes beyond the data and group paths
// (README, "The whole cluster behind one port"):
//   - DescribeProducers (KIP-664) is split by partition leader and merged
//     per partition, like ListOffsets; a partition a part left out, or
//     whose broker did not answer, is NOT_LEADER_OR_FOLLOWER.
//   - ListTransactions (KIP-664) and DescribeLogDirs go to every broker
//     and are merged: each broker lists the transactions it coordinates
//     and the log directories it has.
//   - ConsumerGroupDescribe (KIP-848) and DescribeTransactions (KIP-664)
//     batch group and transactional ids: each id goes to its
//     coordinator, one part per coordinator.
// None of their answers carries a node id, so nothing is virtualized.

// adminKeys are the keys routeAdmin serves; routable offers them.
var adminKeys = map[int16]bool{apis.DescribeProducers: true, apis.ListTransactions: true, apis.DescribeLogDirs: true,
	apis.ConsumerGroupDescribe: true, apis.DescribeTransactions: true}

// routeAdmin routes the keys of adminKeys; handled is false for others.
func (t *tunnel) routeAdmin(req kmsg.Request, rep reply) (handled bool, err error) {
	switch r := req.(type) {
	case *kmsg.DescribeProducersRequest:
		return true, t.routeDescribeProducers(r, rep)
	case *kmsg.ListTransactionsRequest:
		return true, t.routeListTransactions(r, rep)
	case *kmsg.DescribeLogDirsRequest:
		return true, t.routeDescribeLogDirs(r, rep)
	case *kmsg.ConsumerGroupDescribeRequest:
		return true, t.routeConsumerGroupDescribe(r, rep)
	case *kmsg.DescribeTransactionsRequest:
		return true, t.routeDescribeTransactions(r, rep)
	}
	return false, nil
}

// sortedNodes lists the answering nodes in id order, so a merge that
// keeps the first of duplicates is the same every time.
func sortedNodes(m map[int32]kmsg.Response) []int32 {
	return slices.Sorted(maps.Keys(m))
}

func (t *tunnel) routeDescribeProducers(r *kmsg.DescribeProducersRequest, rep reply) error {
	by, err := splitTopics(t, r.Topics,
		func(x *kmsg.DescribeProducersRequestTopic) string { return x.Topic },
		func(x *kmsg.DescribeProducersRequestTopic) *[]int32 { return &x.Partitions },
		func(p *int32) int32 { return *p })
	if err != nil {
		return err
	}
	parts := make(map[int32]kmsg.Request, len(by))
	for n, ts := range by {
		c := *r
		c.Topics = ts
		parts[n] = &c
	}
	if len(parts) == 0 { // no partition named: any broker answers it
		return t.routeAny(r, rep)
	}
	return t.scatterPartial(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		out, stale := mergeDescribeProducers(r, m)
		if stale {
			t.view.invalidate(true, nil)
		}
		return out, nil
	})
}

func describeProducersTopic(x *kmsg.DescribeProducersResponseTopic) string { return x.Topic }
func describeProducersParts(x *kmsg.DescribeProducersResponseTopic) *[]kmsg.DescribeProducersResponseTopicPartition {
	return &x.Partitions
}

// mergeDescribeProducers joins the parts' answers per topic. Every
// requested partition is listed: one no part answered for (its part was
// left out, or its broker did not answer) is NOT_LEADER_OR_FOLLOWER,
// which clients retry. stale reports an answer that says the view of
// leaders is out of date.
func mergeDescribeProducers(r *kmsg.DescribeProducersRequest, m map[int32]kmsg.Response) (out *kmsg.DescribeProducersResponse, stale bool) {
	out = r.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, n := range sortedNodes(m) {
		x := m[n].(*kmsg.DescribeProducersResponse)
		out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
		out.Topics = mergeTopics(out.Topics, x.Topics, describeProducersTopic, describeProducersParts)
	}
	have := map[string]map[int32]bool{}
	for _, tp := range out.Topics {
		if have[tp.Topic] == nil {
			have[tp.Topic] = map[int32]bool{}
		}
		for _, p := range tp.Partitions {
			have[tp.Topic][p.Partition] = true
			stale = stale || staleCode(p.ErrorCode)
		}
	}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			if have[rt.Topic][rp] {
				continue
			}
			stale = true
			p := kmsg.NewDescribeProducersResponseTopicPartition()
			p.Partition, p.ErrorCode = rp, kerr.NotLeaderForPartition.Code
			t := kmsg.NewDescribeProducersResponseTopic()
			t.Topic, t.Partitions = rt.Topic, []kmsg.DescribeProducersResponseTopicPartition{p}
			out.Topics = mergeTopics(out.Topics, []kmsg.DescribeProducersResponseTopic{t}, describeProducersTopic, describeProducersParts)
			if have[rt.Topic] == nil {
				have[rt.Topic] = map[int32]bool{}
			}
			have[rt.Topic][rp] = true
		}
	}
	return out, stale
}

// everyBroker is one copy of req per live broker (a fan-out).
func (t *tunnel) everyBroker(req func() kmsg.Request) map[int32]kmsg.Request {
	parts := map[int32]kmsg.Request{}
	for _, n := range t.view.liveBrokers() {
		parts[n] = req()
	}
	return parts
}

// routeListTransactions asks every broker: each lists the transactions it
// coordinates. A broker that cannot be reached leaves its transactions
// out, and the answer says COORDINATOR_NOT_AVAILABLE (retriable).
func (t *tunnel) routeListTransactions(r *kmsg.ListTransactionsRequest, rep reply) error {
	parts := t.everyBroker(func() kmsg.Request { c := *r; return &c })
	asked := len(parts)
	return t.scatterPartial(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		return mergeListTransactions(r, asked, m), nil
	})
}

// mergeListTransactions concatenates the brokers' lists, each
// transactional id once (the first broker's, in node order: a
// coordinator that moved may still list it). UnknownStateFilters is the
// union: a filter any broker did not apply is reported, since that
// broker's list is unfiltered by it. The error is the first broker's
// non-zero one, or COORDINATOR_NOT_AVAILABLE when fewer than asked
// answered; the lists of those that did are kept.
func mergeListTransactions(r *kmsg.ListTransactionsRequest, asked int, m map[int32]kmsg.Response) *kmsg.ListTransactionsResponse {
	out := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	seen, unknown := map[string]bool{}, map[string]bool{}
	for _, n := range sortedNodes(m) {
		x := m[n].(*kmsg.ListTransactionsResponse)
		out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
		if out.ErrorCode == 0 {
			out.ErrorCode = x.ErrorCode
		}
		for _, f := range x.UnknownStateFilters {
			if !unknown[f] {
				unknown[f] = true
				out.UnknownStateFilters = append(out.UnknownStateFilters, f)
			}
		}
		for _, s := range x.TransactionStates {
			if !seen[s.TransactionalID] {
				seen[s.TransactionalID] = true
				out.TransactionStates = append(out.TransactionStates, s)
			}
		}
	}
	if len(m) < asked && out.ErrorCode == 0 {
		out.ErrorCode = kerr.CoordinatorNotAvailable.Code
	}
	return out
}

// routeDescribeLogDirs asks every broker for its log directories. The
// one virtual broker then reports every upstream broker's directories,
// in node-id order, one entry per broker and directory: a path that
// several brokers use appears once per broker, each entry with that
// broker's replicas and byte counts (README, single-port section).
func (t *tunnel) routeDescribeLogDirs(r *kmsg.DescribeLogDirsRequest, rep reply) error {
	parts := t.everyBroker(func() kmsg.Request { c := *r; return &c })
	return t.scatter(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		return mergeDescribeLogDirs(r, m), nil
	})
}

// mergeDescribeLogDirs concatenates the brokers' directories; the error
// (v3+) is the first broker's non-zero one.
func mergeDescribeLogDirs(r *kmsg.DescribeLogDirsRequest, m map[int32]kmsg.Response) *kmsg.DescribeLogDirsResponse {
	out := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	for _, n := range sortedNodes(m) {
		x := m[n].(*kmsg.DescribeLogDirsResponse)
		out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
		if out.ErrorCode == 0 {
			out.ErrorCode = x.ErrorCode
		}
		out.Dirs = append(out.Dirs, x.Dirs...)
	}
	return out
}

// movedCode reports the errors that say a coordinator moved.
func movedCode(c int16) bool {
	return c == kerr.NotCoordinator.Code || c == kerr.CoordinatorNotAvailable.Code
}

func (t *tunnel) routeConsumerGroupDescribe(r *kmsg.ConsumerGroupDescribeRequest, rep reply) error {
	type group = kmsg.ConsumerGroupDescribeResponseGroup
	return routeBatched(t, r, r.Groups, coordBatch[string, group]{
		kind:    groupKey,
		id:      stringID,
		part:    func(gs []string) kmsg.Request { c := *r; c.Groups = gs; return &c },
		entries: func(p kmsg.Response) *[]group { return &p.(*kmsg.ConsumerGroupDescribeResponse).Groups },
		entry:   func(g *group) (*string, *int16) { return &g.Group, &g.ErrorCode },
	}, rep)
}

func (t *tunnel) routeDescribeTransactions(r *kmsg.DescribeTransactionsRequest, rep reply) error {
	type state = kmsg.DescribeTransactionsResponseTransactionState
	return routeBatched(t, r, r.TransactionalIDs, coordBatch[string, state]{
		kind:    txnKey,
		id:      stringID,
		part:    func(ids []string) kmsg.Request { c := *r; c.TransactionalIDs = ids; return &c },
		entries: func(p kmsg.Response) *[]state { return &p.(*kmsg.DescribeTransactionsResponse).TransactionStates },
		entry:   func(s *state) (*string, *int16) { return &s.TransactionalID, &s.ErrorCode },
	}, rep)
}
