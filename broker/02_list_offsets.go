package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v1-11
//
// Behavior:
// * -2 earliest: the log start offset; -1 latest: the high watermark, or
//   the last stable offset at read_committed; -3 (v7+, KIP-734): the offset and timestamp of the
//   record with the largest timestamp; -4 (v8+, earliest local): the log
//   start offset, as every segment is local.
// * A timestamp >= 0 finds the first offset whose record timestamp is at
//   least that timestamp (storage's time index), below the high watermark;
//   none: offset -1, timestamp -1.
// * Leader epoch is always 0.
//
// Version notes:
// * v0 (OldStyleOffsets) is not served, as Kafka 4.0.
// * v2: IsolationLevel; v4: leader epochs; v6: flexible
// * v7: -3; v8: -4; v9: -5 (tiered storage, skipped_features);
//   v10: TimeoutMillis (nothing to wait for here)

func init() { regKey(2, 1, 11, syncHandler(handleListOffsets)) }

func handleListOffsets(c *Conn, req *kmsg.ListOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t := c.b.lookup(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, 0
			p := c.b.partitionOf(t, rp.Partition)
			if p == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				sp.LeaderEpoch = -1
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			l := p.log
			switch ts := rp.Timestamp; {
			case ts == -2 || ts == -4:
				sp.Offset = l.LogStartOffset()
			case ts == -1 && req.IsolationLevel == 1:
				sp.Offset = l.LastStableOffset()
			case ts == -1:
				sp.Offset = l.HighWatermark()
			case ts == -3:
				sp.Offset, sp.Timestamp = l.MaxTimestamp()
			case ts >= 0:
				off, at, err := l.OffsetForTimestamp(ts)
				switch {
				case err != nil:
					sp.ErrorCode = storageCode(err)
				case off >= 0 && off < l.HighWatermark():
					sp.Offset, sp.Timestamp = off, at
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
