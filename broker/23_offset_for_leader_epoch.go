package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch: v0-4
//
// Behavior:
// * There has only ever been leader epoch 0. A consumer validating its
//   position (KIP-320) asks for the end offset of the epoch it last saw:
//   epoch 0 (or -1, records written before epochs) ends at the log end
//   offset. An epoch above 0 is from a future we never had:
//   UNDEFINED (-1/-1), as Kafka answers for an unknown epoch.
// * CurrentLeaderEpoch (v2+) above 0 is UNKNOWN_LEADER_EPOCH.
// * Only consumers (ReplicaID -1/-2) are expected; followers do not exist.
//
// Version notes:
// * v1: LeaderEpoch in the response; v2: CurrentLeaderEpoch
// * v3: ReplicaID; v4: flexible

func init() { regKey(23, 0, 4, syncHandler(handleOffsetForLeaderEpoch)) }

func handleOffsetForLeaderEpoch(c *Conn, req *kmsg.OffsetForLeaderEpochRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t := c.b.lookup(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			p := c.b.partitionOf(t, rp.Partition)
			switch {
			case p == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case req.Version >= 2 && rp.CurrentLeaderEpoch > 0:
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			case rp.LeaderEpoch <= 0:
				sp.LeaderEpoch, sp.EndOffset = 0, p.log.LogEndOffset()
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
