package policy

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// checkMutation applies controller_mutation_rate (KIP-599). Strict
// versions go topic by topic like Kafka's StrictControllerMutationQuota:
// a topic is accepted (and charged, possibly into debt) while the budget
// is not in debt; once it is, the remaining topics are refused with
// THROTTLING_QUOTA_EXCEEDED. Older versions are charged and throttled.
func (q *Quotas) checkMutation(v *QuotaVerdict, m map[QuotaEntity]map[string]float64, user, clientID string, key, version int16, body kmsg.Request, now time.Time) {
	val, _, tags, ok := resolve(m, QuotaControllerMutationRate, user, clientID)
	if !ok || mutationValidateOnly(body) {
		return
	}
	counts := topicCounts(body)
	if len(counts) == 0 {
		return
	}
	qb := q.lim.get(qtMutation, tags, val, now)
	strict := key == apis.CreateTopics && version >= 6 || key == apis.CreatePartitions && version >= 3 || key == apis.DeleteTopics && version >= 5
	if !strict {
		n := 0
		for _, c := range counts {
			n += c
		}
		if d := qb.b.take(qb.lim, n, now); d > v.Throttle {
			v.Throttle, v.Rule = d, quotaRule[qtMutation]
		}
		return
	}
	tokens := func() float64 {
		qb.b.mu.Lock()
		defer qb.b.mu.Unlock()
		return qb.lim.TokensAt(now)
	}
	keep := make([]bool, len(counts))
	refused := 0
	for i, c := range counts {
		if tokens() < 0 {
			refused++
			continue
		}
		keep[i] = true
		qb.b.take(qb.lim, c, now)
	}
	if t := tokens(); t < 0 {
		if d := time.Duration(-t / float64(qb.lim.Limit()) * float64(time.Second)); d > v.Throttle {
			v.Throttle, v.Rule = d, quotaRule[qtMutation]
		}
	}
	switch {
	case refused == 0:
	case refused == len(counts):
		v.Response = throttledMutation(body)
	default:
		drop := make([]bool, len(keep))
		for i := range keep {
			drop[i] = !keep[i]
		}
		v.Forward = subsetMutation(body, keep)
		refusedResp := throttledMutation(subsetMutation(body, drop))
		v.Merge = func(resp kmsg.Response) { appendMutationTopics(resp, refusedResp) }
	}
}

func mutationValidateOnly(body kmsg.Request) bool {
	switch r := body.(type) {
	case *kmsg.CreateTopicsRequest:
		return r.ValidateOnly
	case *kmsg.CreatePartitionsRequest:
		return r.ValidateOnly
	}
	return false
}

// topicCounts is, per topic in request order, the partitions it creates
// or deletes as far as the gateway can tell: CreateTopics its
// num_partitions (or assignments; 1 for the broker default),
// CreatePartitions and DeleteTopics 1 (the gateway does not know the
// current partition counts).
func topicCounts(body kmsg.Request) []int {
	var out []int
	switch r := body.(type) {
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			switch {
			case t.NumPartitions > 0:
				out = append(out, int(t.NumPartitions))
			case len(t.ReplicaAssignment) > 0:
				out = append(out, len(t.ReplicaAssignment))
			default:
				out = append(out, 1)
			}
		}
	case *kmsg.CreatePartitionsRequest:
		for range r.Topics {
			out = append(out, 1)
		}
	case *kmsg.DeleteTopicsRequest:
		for range r.TopicNames {
			out = append(out, 1)
		}
		for range r.Topics {
			out = append(out, 1)
		}
	}
	return out
}

// subsetMutation is a copy of body with only the topics keep marks, in
// topicCounts' order.
func subsetMutation(body kmsg.Request, keep []bool) kmsg.Request {
	switch r := body.(type) {
	case *kmsg.CreateTopicsRequest:
		c := *r
		c.Topics = nil
		for i, t := range r.Topics {
			if keep[i] {
				c.Topics = append(c.Topics, t)
			}
		}
		return &c
	case *kmsg.CreatePartitionsRequest:
		c := *r
		c.Topics = nil
		for i, t := range r.Topics {
			if keep[i] {
				c.Topics = append(c.Topics, t)
			}
		}
		return &c
	case *kmsg.DeleteTopicsRequest:
		c := *r
		c.TopicNames, c.Topics = nil, nil
		i := 0
		for _, n := range r.TopicNames {
			if keep[i] {
				c.TopicNames = append(c.TopicNames, n)
			}
			i++
		}
		for _, t := range r.Topics {
			if keep[i] {
				c.Topics = append(c.Topics, t)
			}
			i++
		}
		return &c
	}
	return body
}

// appendMutationTopics adds the refused topics' entries to the backend's
// response.
func appendMutationTopics(resp, refused kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		r.Topics = append(r.Topics, refused.(*kmsg.CreateTopicsResponse).Topics...)
	case *kmsg.CreatePartitionsResponse:
		r.Topics = append(r.Topics, refused.(*kmsg.CreatePartitionsResponse).Topics...)
	case *kmsg.DeleteTopicsResponse:
		r.Topics = append(r.Topics, refused.(*kmsg.DeleteTopicsResponse).Topics...)
	}
}

// throttledMutation answers a mutation request with
// THROTTLING_QUOTA_EXCEEDED for every topic.
func throttledMutation(body kmsg.Request) kmsg.Response {
	code := kerr.ThrottlingQuotaExceeded.Code
	msg := "The throttling quota has been exceeded."
	switch r := body.(type) {
	case *kmsg.CreateTopicsRequest:
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, &msg
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, &msg
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, name := range r.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = kmsg.StringPtr(name), code, &msg
			resp.Topics = append(resp.Topics, rt)
		}
		for _, t := range r.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = t.Topic, t.TopicID, code, &msg
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	return nil
}
