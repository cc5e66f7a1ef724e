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

// leaderRoute is one key's shape for routeByLeader: how to name a
// request topic's partitions, build a part, and merge the answers.
type leaderRoute[T, P any] struct {
	name      func(*T) string
	parts     func(*T) *[]P
	partition func(*P) int32
	part      func([]T) kmsg.Request // the request with only these topics
	// merge joins the answers; fill adds NOT_LEADER_OR_FOLLOWER for a
	// requested partition no answer lists, and reports whether any was
	// missing or stale.
	merge func(map[int32]kmsg.Response) kmsg.Response
	fill  func(kmsg.Response, map[string][]int32) bool
}

func routeByLeader[T, P any](t *tunnel, req kmsg.Request, topics []T, lr leaderRoute[T, P], rep reply) error {
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
	return t.scatterPartial(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		out := lr.merge(m)
		if lr.fill(out, want) {
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
	type topic = kmsg.ListOffsetsResponseTopic
	key := func(x *topic) string { return x.Topic }
	ps := func(x *topic) *[]kmsg.ListOffsetsResponseTopicPartition { return &x.Partitions }
	return routeByLeader(t, r, r.Topics, leaderRoute[kmsg.ListOffsetsRequestTopic, kmsg.ListOffsetsRequestTopicPartition]{
		name:      func(x *kmsg.ListOffsetsRequestTopic) string { return x.Topic },
		parts:     func(x *kmsg.ListOffsetsRequestTopic) *[]kmsg.ListOffsetsRequestTopicPartition { return &x.Partitions },
		partition: func(p *kmsg.ListOffsetsRequestTopicPartition) int32 { return p.Partition },
		part:      func(ts []kmsg.ListOffsetsRequestTopic) kmsg.Request { c := *r; c.Topics = ts; return &c },
		merge: func(m map[int32]kmsg.Response) kmsg.Response {
			out := r.ResponseKind().(*kmsg.ListOffsetsResponse)
			for _, resp := range m {
				x := resp.(*kmsg.ListOffsetsResponse)
				out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
				out.Topics = mergeTopics(out.Topics, x.Topics, key, ps)
			}
			return out
		},
		fill: func(resp kmsg.Response, want map[string][]int32) bool {
			out := resp.(*kmsg.ListOffsetsResponse)
			return fillMissing(&out.Topics, want, key, ps,
				func(p *kmsg.ListOffsetsResponseTopicPartition) (int32, int16) { return p.Partition, p.ErrorCode },
				func(name string, gone []int32) topic {
					tp := kmsg.NewListOffsetsResponseTopic()
					tp.Topic = name
					for _, p := range gone {
						rp := kmsg.NewListOffsetsResponseTopicPartition()
						rp.Partition, rp.ErrorCode = p, kerr.NotLeaderForPartition.Code
						tp.Partitions = append(tp.Partitions, rp)
					}
					return tp
				})
		},
	}, rep)
}

func (t *tunnel) routeOffsetForLeaderEpoch(r *kmsg.OffsetForLeaderEpochRequest, rep reply) error {
	type topic = kmsg.OffsetForLeaderEpochResponseTopic
	key := func(x *topic) string { return x.Topic }
	ps := func(x *topic) *[]kmsg.OffsetForLeaderEpochResponseTopicPartition { return &x.Partitions }
	return routeByLeader(t, r, r.Topics, leaderRoute[kmsg.OffsetForLeaderEpochRequestTopic, kmsg.OffsetForLeaderEpochRequestTopicPartition]{
		name: func(x *kmsg.OffsetForLeaderEpochRequestTopic) string { return x.Topic },
		parts: func(x *kmsg.OffsetForLeaderEpochRequestTopic) *[]kmsg.OffsetForLeaderEpochRequestTopicPartition {
			return &x.Partitions
		},
		partition: func(p *kmsg.OffsetForLeaderEpochRequestTopicPartition) int32 { return p.Partition },
		part:      func(ts []kmsg.OffsetForLeaderEpochRequestTopic) kmsg.Request { c := *r; c.Topics = ts; return &c },
		merge: func(m map[int32]kmsg.Response) kmsg.Response {
			out := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
			for _, resp := range m {
				x := resp.(*kmsg.OffsetForLeaderEpochResponse)
				out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
				out.Topics = mergeTopics(out.Topics, x.Topics, key, ps)
			}
			return out
		},
		fill: func(resp kmsg.Response, want map[string][]int32) bool {
			out := resp.(*kmsg.OffsetForLeaderEpochResponse)
			return fillMissing(&out.Topics, want, key, ps,
				func(p *kmsg.OffsetForLeaderEpochResponseTopicPartition) (int32, int16) {
					return p.Partition, p.ErrorCode
				},
				func(name string, gone []int32) topic {
					tp := kmsg.NewOffsetForLeaderEpochResponseTopic()
					tp.Topic = name
					for _, p := range gone {
						rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
						rp.Partition, rp.ErrorCode = p, kerr.NotLeaderForPartition.Code
						tp.Partitions = append(tp.Partitions, rp)
					}
					return tp
				})
		},
	}, rep)
}

func (t *tunnel) routeDeleteRecords(r *kmsg.DeleteRecordsRequest, rep reply) error {
	type topic = kmsg.DeleteRecordsResponseTopic
	key := func(x *topic) string { return x.Topic }
	ps := func(x *topic) *[]kmsg.DeleteRecordsResponseTopicPartition { return &x.Partitions }
	return routeByLeader(t, r, r.Topics, leaderRoute[kmsg.DeleteRecordsRequestTopic, kmsg.DeleteRecordsRequestTopicPartition]{
		name: func(x *kmsg.DeleteRecordsRequestTopic) string { return x.Topic },
		parts: func(x *kmsg.DeleteRecordsRequestTopic) *[]kmsg.DeleteRecordsRequestTopicPartition {
			return &x.Partitions
		},
		partition: func(p *kmsg.DeleteRecordsRequestTopicPartition) int32 { return p.Partition },
		part:      func(ts []kmsg.DeleteRecordsRequestTopic) kmsg.Request { c := *r; c.Topics = ts; return &c },
		merge: func(m map[int32]kmsg.Response) kmsg.Response {
			out := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
			for _, resp := range m {
				x := resp.(*kmsg.DeleteRecordsResponse)
				out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
				out.Topics = mergeTopics(out.Topics, x.Topics, key, ps)
			}
			return out
		},
		fill: func(resp kmsg.Response, want map[string][]int32) bool {
			out := resp.(*kmsg.DeleteRecordsResponse)
			return fillMissing(&out.Topics, want, key, ps,
				func(p *kmsg.DeleteRecordsResponseTopicPartition) (int32, int16) { return p.Partition, p.ErrorCode },
				func(name string, gone []int32) topic {
					tp := kmsg.NewDeleteRecordsResponseTopic()
					tp.Topic = name
					for _, p := range gone {
						rp := kmsg.NewDeleteRecordsResponseTopicPartition()
						rp.Partition, rp.ErrorCode = p, kerr.NotLeaderForPartition.Code
						tp.Partitions = append(tp.Partitions, rp)
					}
					return tp
				})
		},
	}, rep)
}
