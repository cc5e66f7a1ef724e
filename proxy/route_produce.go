package proxy

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func produceTopicName(x *kmsg.ProduceRequestTopic) string { return x.Topic }
func produceParts(x *kmsg.ProduceRequestTopic) *[]kmsg.ProduceRequestTopicPartition {
	return &x.Partitions
}
func producePartition(p *kmsg.ProduceRequestTopicPartition) int32 { return p.Partition }

// routeProduce splits a Produce by leader. With acks=0 (rep nil) the
// parts are written and nothing waits for them.
func (t *tunnel) routeProduce(r *kmsg.ProduceRequest, rep reply) error {
	name := func(x *kmsg.ProduceRequestTopic) string { return t.topicName(x.Topic, x.TopicID) }
	by, err := splitTopics(t, r.Topics, name, produceParts, producePartition)
	if err != nil {
		return err
	}
	parts := make(map[int32]kmsg.Request, len(by))
	for n, ts := range by {
		c := *r
		c.Topics = ts
		parts[n] = &c
	}
	if len(parts) == 0 { // a Produce naming no partition: any broker answers it
		return t.routeAny(r, rep)
	}
	return t.scatterPartial(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		return t.mergeProduce(r, m), nil
	})
}

// mergeProduce joins the parts' answers; a partition a part left out is
// answered NOT_LEADER_OR_FOLLOWER, which the client retries.
func (t *tunnel) mergeProduce(r *kmsg.ProduceRequest, m map[int32]kmsg.Response) *kmsg.ProduceResponse {
	out := r.ResponseKind().(*kmsg.ProduceResponse)
	key := func(x *kmsg.ProduceResponseTopic) string { return x.Topic + string(x.TopicID[:]) }
	ps := func(x *kmsg.ProduceResponseTopic) *[]kmsg.ProduceResponseTopicPartition { return &x.Partitions }
	for _, resp := range m {
		pr := resp.(*kmsg.ProduceResponse)
		out.ThrottleMillis = max(out.ThrottleMillis, pr.ThrottleMillis)
		out.Topics = mergeTopics(out.Topics, pr.Topics, key, ps)
		if len(out.Brokers) == 0 {
			out.Brokers = pr.Brokers
		}
	}
	stale := false
	have := map[string]map[int32]bool{}
	for _, tp := range out.Topics {
		k := key(&tp)
		if have[k] == nil {
			have[k] = map[int32]bool{}
		}
		for _, p := range tp.Partitions {
			have[k][p.Partition] = true
			stale = stale || staleCode(p.ErrorCode)
		}
	}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			rt1 := kmsg.NewProduceResponseTopic()
			rt1.Topic, rt1.TopicID = rt.Topic, rt.TopicID
			if have[key(&rt1)][rp.Partition] {
				continue
			}
			stale = true
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
			rt1.Partitions = []kmsg.ProduceResponseTopicPartition{p}
			out.Topics = mergeTopics(out.Topics, []kmsg.ProduceResponseTopic{rt1}, key, ps)
		}
	}
	if stale {
		t.view.invalidate(true, nil)
	}
	t.virtualize(out)
	return out
}
