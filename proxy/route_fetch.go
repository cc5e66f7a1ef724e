package proxy

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Single-port Fetch: a client's fetch session (KIP-227) is the
// gateway's own, and so are the sessions toward each upstream broker
// (route_fetch_session.go); no client session id ever reaches a broker.
// A sessionless Fetch (before v7, or epoch -1) goes upstream sessionless
// (session id 0, epoch -1), and its merged answer carries session id 0
// and lists every partition the client asked for.

// fetchTopicName resolves a Fetch topic's name (v13+ names topics by id).
func (t *tunnel) fetchTopicName(x *kmsg.FetchRequestTopic) string {
	return t.topicName(x.Topic, x.TopicID)
}

// topicName is name, or the name of topic id (Fetch v13+, Produce v13+
// name topics by id, KIP-516), after one refresh of the view if needed.
func (t *tunnel) topicName(name string, id [16]byte) string {
	if name != "" {
		return name
	}
	if n, ok := t.view.topicName(id); ok {
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.s.srv.opts.DialTimeout)
	defer cancel()
	_ = t.view.refresh(ctx)
	n, _ := t.view.topicName(id)
	return n
}

func fetchParts(x *kmsg.FetchRequestTopic) *[]kmsg.FetchRequestTopicPartition { return &x.Partitions }
func fetchPartition(p *kmsg.FetchRequestTopicPartition) int32                 { return p.Partition }
func fetchRespKey(x *kmsg.FetchResponseTopic) string                          { return x.Topic + string(x.TopicID[:]) }
func fetchRespParts(x *kmsg.FetchResponseTopic) *[]kmsg.FetchResponseTopicPartition {
	return &x.Partitions
}

func (t *tunnel) routeFetch(r *kmsg.FetchRequest, rep reply) error {
	if r.Version >= 7 {
		if handled, err := t.routeFetchSession(r, rep); handled {
			return err
		}
	}
	return t.routeFetchSessionless(r, rep, nil)
}

// routeFetchSessionless splits a sessionless Fetch by leader. closes
// (node → upstream session id) are sessions to end on the way: the part
// to that node carries the id with epoch -1 (Kafka closes the session
// and serves the fetch sessionless), or, for a node without a part, an
// empty request does.
func (t *tunnel) routeFetchSessionless(r *kmsg.FetchRequest, rep reply, closes map[int32]int32) error {
	by, err := splitTopics(t, r.Topics, t.fetchTopicName, fetchParts, fetchPartition)
	if err != nil {
		return err
	}
	parts := make(map[int32]kmsg.Request, len(by)+len(closes))
	for n, ts := range by {
		c := *r
		c.Topics, c.SessionID, c.SessionEpoch, c.ForgottenTopics = ts, closes[n], -1, nil
		if len(by) > 1 && c.MaxWaitMillis > fetchPartWait {
			c.MaxWaitMillis = fetchPartWait
		}
		parts[n] = &c
	}
	closeFetchParts(r, closes, parts)
	if len(parts) == 0 { // an empty fetch
		c := *r
		c.SessionID, c.SessionEpoch, c.ForgottenTopics = 0, -1, nil
		return t.routeAny(&c, rep)
	}
	return t.scatterPartial(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		return t.mergeFetch(r, m), nil
	})
}

// mergeFetch joins the parts' answers: largest throttle, the first
// top-level error, every requested partition (a missing one answered
// NOT_LEADER_OR_FOLLOWER), session id 0.
func (t *tunnel) mergeFetch(r *kmsg.FetchRequest, m map[int32]kmsg.Response) *kmsg.FetchResponse {
	out := r.ResponseKind().(*kmsg.FetchResponse)
	for _, resp := range m {
		fr := resp.(*kmsg.FetchResponse)
		out.ThrottleMillis = max(out.ThrottleMillis, fr.ThrottleMillis)
		if out.ErrorCode == 0 {
			out.ErrorCode = fr.ErrorCode
		}
		out.Topics = mergeTopics(out.Topics, fr.Topics, fetchRespKey, fetchRespParts)
		if len(out.Brokers) == 0 {
			out.Brokers = fr.Brokers
		}
	}
	out.SessionID = 0
	if t.fillFetch(r, out) {
		t.view.invalidate(true, nil)
	}
	t.virtualize(out)
	return out
}

// fillFetch adds the requested partitions no part answered and reports
// whether any answer says the view is stale.
func (t *tunnel) fillFetch(r *kmsg.FetchRequest, out *kmsg.FetchResponse) (stale bool) {
	have := map[string]map[int32]bool{}
	for _, tp := range out.Topics {
		k := fetchRespKey(&tp)
		if have[k] == nil {
			have[k] = map[int32]bool{}
		}
		for _, p := range tp.Partitions {
			have[k][p.Partition] = true
			stale = stale || staleCode(p.ErrorCode)
		}
	}
	for _, rt := range r.Topics {
		rk := kmsg.NewFetchResponseTopic()
		rk.Topic, rk.TopicID = rt.Topic, rt.TopicID
		k := fetchRespKey(&rk)
		for _, rp := range rt.Partitions {
			if have[k][rp.Partition] {
				continue
			}
			stale = true
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
			rk.Partitions = append(rk.Partitions, p)
		}
		if len(rk.Partitions) > 0 {
			out.Topics = mergeTopics(out.Topics, []kmsg.FetchResponseTopic{rk}, fetchRespKey, fetchRespParts)
		}
	}
	return stale
}
