package proxy

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets, OffsetForLeaderEpoch and DeleteRecords split by leader
// like Produce, and their answers are joined per topic. A leader that
// cannot be reached costs its partitions NOT_LEADER_OR_FOLLOWER, which
// the client retries after a Metadata refresh, not the client's
// connection; any partition missing from the answer refreshes the view.

// leaderRoute is one key's shape for routeByLeader: a request topic
// (T) and its partitions (P), an answer topic (RT) and its partitions
// (RP).
type leaderRoute[T, P, RT, RP any] struct {
	name      func(*T) string
	parts     func(*T) *[]P
	partition func(*P) int32
	part      func([]T) kmsg.Request // the request with only these topics
	// The answer: its topics, a topic's name and partitions, a
	// partition's index and error code.
	topics func(kmsg.Response) *[]RT
	topic  func(*RT) (name *string, parts *[]RP)
	code   func(*RP) (partition *int32, code *int16)
}

// routeByLeader splits a request by leader and joins the answers per
// topic, with the largest throttle; a requested partition no answer
// lists is answered NOT_LEADER_OR_FOLLOWER, and it or a stale code
// refreshes the view.
func routeByLeader[T, P, RT, RP any, PRT kmsgDefaulter[RT], PRP kmsgDefaulter[RP]](t *tunnel, req kmsg.Request, topics []T, lr leaderRoute[T, P, RT, RP], rep reply) error {
	by, err := splitTopics(t, topics, lr.name, lr.parts, lr.partition)
	if err != nil {
		return err
	}
	parts := map[int32]kmsg.Request{}
	for n, ts := range by {
		parts[n] = lr.part(ts)
	}
	if len(parts) == 0 {
		return t.routeAny(req, rep)
	}
	want := map[string][]int32{}
	for i := range topics {
		for j := range *lr.parts(&topics[i]) {
			n := lr.name(&topics[i])
			want[n] = append(want[n], lr.partition(&(*lr.parts(&topics[i]))[j]))
		}
	}
	key := func(x *RT) string { name, _ := lr.topic(x); return *name }
	ps := func(x *RT) *[]RP { _, p := lr.topic(x); return p }
	code := func(p *RP) (int32, int16) { i, c := lr.code(p); return *i, *c }
	notLeader := func(name string, gone []int32) RT {
		var tp RT
		PRT(&tp).Default()
		n, tps := lr.topic(&tp)
		*n = name
		for _, p := range gone {
			var rp RP
			PRP(&rp).Default()
			i, c := lr.code(&rp)
			*i, *c = p, kerr.NotLeaderForPartition.Code
			*tps = append(*tps, rp)
		}
		return tp
	}
	return t.scatterPartial(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		out := req.ResponseKind()
		all := lr.topics(out)
		var throttle int32
		for _, resp := range m {
			ms, _ := resp.(kmsg.ThrottleResponse).Throttle()
			throttle = max(throttle, ms)
			*all = mergeTopics(*all, *lr.topics(resp), key, ps)
		}
		out.(kmsg.SetThrottleResponse).SetThrottle(throttle)
		if fillMissing(all, want, key, ps, code, notLeader) {
			t.view.invalidate(true, nil)
		}
		return out, nil
	})
}

// fillMissing adds to topics, made by notLeader, every requested
// partition no answer lists; it reports whether any was missing or
// answered with a code that means the view is out of date.
func fillMissing[T, P any](topics *[]T, want map[string][]int32, key func(*T) string, parts func(*T) *[]P,
	code func(*P) (int32, int16), notLeader func(topic string, partitions []int32) T) bool {
	have, stale := map[string]map[int32]bool{}, false
	for i := range *topics {
		name := key(&(*topics)[i])
		if have[name] == nil {
			have[name] = map[int32]bool{}
		}
		for j := range *parts(&(*topics)[i]) {
			p, c := code(&(*parts(&(*topics)[i]))[j])
			have[name][p] = true
			stale = stale || staleCode(c)
		}
	}
	for name, ps := range want {
		var gone []int32
		for _, p := range ps {
			if !have[name][p] {
				gone = append(gone, p)
			}
		}
		if len(gone) > 0 {
			*topics, stale = mergeTopics(*topics, []T{notLeader(name, gone)}, key, parts), true
		}
	}
	return stale
}

func (t *tunnel) routeListOffsets(r *kmsg.ListOffsetsRequest, rep reply) error {
	type (
		qt = kmsg.ListOffsetsRequestTopic
		qp = kmsg.ListOffsetsRequestTopicPartition
		at = kmsg.ListOffsetsResponseTopic
		ap = kmsg.ListOffsetsResponseTopicPartition
	)
	return routeByLeader(t, r, r.Topics, leaderRoute[qt, qp, at, ap]{
		name:      func(x *qt) string { return x.Topic },
		parts:     func(x *qt) *[]qp { return &x.Partitions },
		partition: func(p *qp) int32 { return p.Partition },
		part:      func(ts []qt) kmsg.Request { c := *r; c.Topics = ts; return &c },
		topics:    func(p kmsg.Response) *[]at { return &p.(*kmsg.ListOffsetsResponse).Topics },
		topic:     func(x *at) (*string, *[]ap) { return &x.Topic, &x.Partitions },
		code:      func(p *ap) (*int32, *int16) { return &p.Partition, &p.ErrorCode },
	}, rep)
}

func (t *tunnel) routeOffsetForLeaderEpoch(r *kmsg.OffsetForLeaderEpochRequest, rep reply) error {
	type (
		qt = kmsg.OffsetForLeaderEpochRequestTopic
		qp = kmsg.OffsetForLeaderEpochRequestTopicPartition
		at = kmsg.OffsetForLeaderEpochResponseTopic
		ap = kmsg.OffsetForLeaderEpochResponseTopicPartition
	)
	return routeByLeader(t, r, r.Topics, leaderRoute[qt, qp, at, ap]{
		name:      func(x *qt) string { return x.Topic },
		parts:     func(x *qt) *[]qp { return &x.Partitions },
		partition: func(p *qp) int32 { return p.Partition },
		part:      func(ts []qt) kmsg.Request { c := *r; c.Topics = ts; return &c },
		topics:    func(p kmsg.Response) *[]at { return &p.(*kmsg.OffsetForLeaderEpochResponse).Topics },
		topic:     func(x *at) (*string, *[]ap) { return &x.Topic, &x.Partitions },
		code:      func(p *ap) (*int32, *int16) { return &p.Partition, &p.ErrorCode },
	}, rep)
}

func (t *tunnel) routeDeleteRecords(r *kmsg.DeleteRecordsRequest, rep reply) error {
	type (
		qt = kmsg.DeleteRecordsRequestTopic
		qp = kmsg.DeleteRecordsRequestTopicPartition
		at = kmsg.DeleteRecordsResponseTopic
		ap = kmsg.DeleteRecordsResponseTopicPartition
	)
	return routeByLeader(t, r, r.Topics, leaderRoute[qt, qp, at, ap]{
		name:      func(x *qt) string { return x.Topic },
		parts:     func(x *qt) *[]qp { return &x.Partitions },
		partition: func(p *qp) int32 { return p.Partition },
		part:      func(ts []qt) kmsg.Request { c := *r; c.Topics = ts; return &c },
		topics:    func(p kmsg.Response) *[]at { return &p.(*kmsg.DeleteRecordsResponse).Topics },
		topic:     func(x *at) (*string, *[]ap) { return &x.Topic, &x.Partitions },
		code:      func(p *ap) (*int32, *int16) { return &p.Partition, &p.ErrorCode },
	}, rep)
}
