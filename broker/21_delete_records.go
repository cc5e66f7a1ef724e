package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteRecords: v0-2
//
// Behavior:
// * Moves the log start offset up to Offset (-1: the high watermark);
//   whole segments below it are deleted by storage. An offset above the
//   high watermark is OFFSET_OUT_OF_RANGE. Moving it down is a no-op that
//   reports the current log start offset, as Kafka.
// * LowWatermark is the resulting log start offset.
// * A topic whose cleanup.policy lacks delete (compact only) is
//   POLICY_VIOLATION, as Kafka's Partition.deleteRecordsOnLeader refuses it.
//
// Version notes:
// * v1: throttle after the response; v2: flexible

func init() { regKey(21, 0, 2, syncHandler(handleDeleteRecords)) }

func handleDeleteRecords(c *Conn, req *kmsg.DeleteRecordsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t := c.b.lookup(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			p := c.b.partitionOf(t, rp.Partition)
			if p == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if policy, _ := c.b.configValue(c.b.topicConfigs(t), "cleanup.policy"); !contains(splitList(policy), "delete") {
				sp.ErrorCode = kerr.PolicyViolation.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			off := rp.Offset
			hw := p.log.HighWatermark()
			if off == -1 {
				off = hw
			}
			if off < 0 || off > hw {
				sp.ErrorCode = kerr.OffsetOutOfRange.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			low, err := p.log.DeleteRecords(off)
			if err != nil {
				c.b.log.Error("delete records", "partition", p.dirName(), "offset", off, "err", err)
				sp.ErrorCode = storageCode(err)
			} else {
				sp.LowWatermark = low
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
