package proxy

import "github.com/twmb/franz-go/pkg/kmsg"

// ListOffsets, OffsetForLeaderEpoch and DeleteRecords split by leader
// like Produce; their answers are joined per topic.

func (t *tunnel) routeListOffsets(r *kmsg.ListOffsetsRequest, rep reply) error {
	by, err := splitTopics(t, r.Topics,
		func(x *kmsg.ListOffsetsRequestTopic) string { return x.Topic },
		func(x *kmsg.ListOffsetsRequestTopic) *[]kmsg.ListOffsetsRequestTopicPartition { return &x.Partitions },
		func(p *kmsg.ListOffsetsRequestTopicPartition) int32 { return p.Partition })
	if err != nil {
		return err
	}
	parts := map[int32]kmsg.Request{}
	for n, ts := range by {
		c := *r
		c.Topics = ts
		parts[n] = &c
	}
	if len(parts) == 0 {
		return t.routeAny(r, rep)
	}
	return t.scatter(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		out := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		stale := false
		for _, resp := range m {
			x := resp.(*kmsg.ListOffsetsResponse)
			out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
			for _, tp := range x.Topics {
				for _, p := range tp.Partitions {
					stale = stale || staleCode(p.ErrorCode)
				}
			}
			out.Topics = mergeTopics(out.Topics, x.Topics,
				func(x *kmsg.ListOffsetsResponseTopic) string { return x.Topic },
				func(x *kmsg.ListOffsetsResponseTopic) *[]kmsg.ListOffsetsResponseTopicPartition { return &x.Partitions })
		}
		if stale {
			t.view.invalidate(true, nil)
		}
		return out, nil
	})
}

func (t *tunnel) routeOffsetForLeaderEpoch(r *kmsg.OffsetForLeaderEpochRequest, rep reply) error {
	by, err := splitTopics(t, r.Topics,
		func(x *kmsg.OffsetForLeaderEpochRequestTopic) string { return x.Topic },
		func(x *kmsg.OffsetForLeaderEpochRequestTopic) *[]kmsg.OffsetForLeaderEpochRequestTopicPartition {
			return &x.Partitions
		},
		func(p *kmsg.OffsetForLeaderEpochRequestTopicPartition) int32 { return p.Partition })
	if err != nil {
		return err
	}
	parts := map[int32]kmsg.Request{}
	for n, ts := range by {
		c := *r
		c.Topics = ts
		parts[n] = &c
	}
	if len(parts) == 0 {
		return t.routeAny(r, rep)
	}
	return t.scatter(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		out := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, resp := range m {
			x := resp.(*kmsg.OffsetForLeaderEpochResponse)
			out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
			out.Topics = mergeTopics(out.Topics, x.Topics,
				func(x *kmsg.OffsetForLeaderEpochResponseTopic) string { return x.Topic },
				func(x *kmsg.OffsetForLeaderEpochResponseTopic) *[]kmsg.OffsetForLeaderEpochResponseTopicPartition {
					return &x.Partitions
				})
		}
		return out, nil
	})
}

func (t *tunnel) routeDeleteRecords(r *kmsg.DeleteRecordsRequest, rep reply) error {
	by, err := splitTopics(t, r.Topics,
		func(x *kmsg.DeleteRecordsRequestTopic) string { return x.Topic },
		func(x *kmsg.DeleteRecordsRequestTopic) *[]kmsg.DeleteRecordsRequestTopicPartition {
			return &x.Partitions
		},
		func(p *kmsg.DeleteRecordsRequestTopicPartition) int32 { return p.Partition })
	if err != nil {
		return err
	}
	parts := map[int32]kmsg.Request{}
	for n, ts := range by {
		c := *r
		c.Topics = ts
		parts[n] = &c
	}
	if len(parts) == 0 {
		return t.routeAny(r, rep)
	}
	return t.scatter(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		out := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
		for _, resp := range m {
			x := resp.(*kmsg.DeleteRecordsResponse)
			out.ThrottleMillis = max(out.ThrottleMillis, x.ThrottleMillis)
			out.Topics = mergeTopics(out.Topics, x.Topics,
				func(x *kmsg.DeleteRecordsResponseTopic) string { return x.Topic },
				func(x *kmsg.DeleteRecordsResponseTopic) *[]kmsg.DeleteRecordsResponseTopicPartition {
					return &x.Partitions
				})
		}
		return out, nil
	})
}
