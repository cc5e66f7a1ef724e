package proxy

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition-leader routing: a request is split by the leader of each
// partition it names, one part per upstream broker, and the answers are
// merged per topic. Partition lists keep the client's order, and the
// client's record batches are forwarded unchanged (kmsg keeps them as
// bytes), so an idempotent or transactional producer's batches reach
// each leader in the order it sent them.

// fetchPartWait bounds a Fetch part's long poll when one client Fetch is
// split over several brokers: data one broker has waits at most this long
// for another broker's empty answer, instead of its whole max_wait. The
// client then fetches again at once.
const fetchPartWait = 250 // ms

// leaderFor returns the broker to send topic/partition to: its leader,
// after one refresh of the view when unknown, else any broker (which
// answers with the error a client retries).
//
// A stale view is refreshed first (at most one refresh per
// viewMinRefresh across sessions; meanwhile the known leaders are used).
func (t *tunnel) leaderFor(topic string, partition int32) (int32, error) {
	if t.view.isStale() {
		t.refreshView()
	}
	if n, ok := t.view.leader(topic, partition); ok {
		return n, nil
	}
	t.refreshView()
	if n, ok := t.view.leader(topic, partition); ok {
		return n, nil
	}
	t.s.log.Debug("single-port: leader unknown after a refresh, sending to any broker", "topic", topic, "partition", partition)
	return t.view.anyBroker()
}

// refreshView asks the cluster for Metadata (rate-limited by the view),
// counting and logging a failure.
func (t *tunnel) refreshView() {
	ctx, cancel := context.WithTimeout(context.Background(), t.s.srv.opts.DialTimeout)
	defer cancel()
	if err := t.view.refresh(ctx); err != nil {
		t.event(routeViewRefresh, "single-port: cluster view refresh failed", "conn", t.s.id, "err", err)
	}
}

// splitTopics groups topics' partitions by leader: node → topics with
// only that node's partitions, in the client's order.
func splitTopics[T, P any](t *tunnel, topics []T, name func(*T) string, parts func(*T) *[]P, partition func(*P) int32) (map[int32][]T, error) {
	out := map[int32][]T{}
	for i := range topics {
		tp := &topics[i]
		byNode := map[int32][]P{}
		var order []int32
		for _, p := range *parts(tp) {
			n, err := t.leaderFor(name(tp), partition(&p))
			if err != nil {
				return nil, err
			}
			if _, seen := byNode[n]; !seen {
				order = append(order, n)
			}
			byNode[n] = append(byNode[n], p)
		}
		for _, n := range order {
			c := *tp
			*parts(&c) = byNode[n]
			out[n] = append(out[n], c)
		}
	}
	return out, nil
}

// mergeTopics appends src's topics to dst, joining the partitions of a
// topic that is already there (the same key).
func mergeTopics[T, P any](dst, src []T, key func(*T) string, parts func(*T) *[]P) []T {
	for i := range src {
		k := key(&src[i])
		j := 0
		for ; j < len(dst) && key(&dst[j]) != k; j++ {
		}
		if j == len(dst) {
			dst = append(dst, src[i])
			continue
		}
		*parts(&dst[j]) = append(*parts(&dst[j]), *parts(&src[i])...)
	}
	return dst
}

// staleCode reports error codes that mean the view is out of date.
func staleCode(code int16) bool {
	switch code {
	case kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code, kerr.LeaderNotAvailable.Code:
		return true
	}
	return false
}

// routeLeaders splits a partition-leader request.
func (t *tunnel) routeLeaders(req kmsg.Request, rep reply) error {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		return t.routeProduce(r, rep)
	case *kmsg.FetchRequest:
		return t.routeFetch(r, rep)
	case *kmsg.ListOffsetsRequest:
		return t.routeListOffsets(r, rep)
	case *kmsg.OffsetForLeaderEpochRequest:
		return t.routeOffsetForLeaderEpoch(r, rep)
	case *kmsg.DeleteRecordsRequest:
		return t.routeDeleteRecords(r, rep)
	case *kmsg.ShareFetchRequest:
		return t.routeShareFetch(r, rep)
	case *kmsg.ShareAcknowledgeRequest:
		return t.routeShareAcknowledge(r, rep)
	}
	return badRequest(closeUnsupported, "%s is not served in single-port mode", apiName(req.Key()))
}
