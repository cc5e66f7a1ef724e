package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeProducers: v0 (KIP-664)
//
// Behavior:
// * Per partition, the active idempotent and transactional producers of
//   its log (storage's producer state: the same state that checks
//   sequences): producer id and epoch, last sequence (-1 if only markers
//   were written in the epoch) and the first offset of an open transaction
//   (-1 if none).
// * LastTimestamp is -1 (storage does not keep it) and CoordinatorEpoch 0
//   (the transaction coordinator never moves).
// * An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION.

func init() { regKey(int16(kmsg.DescribeProducers), 0, 0, syncHandler(handleDescribeProducers)) }

func handleDescribeProducers(c *Conn, req *kmsg.DescribeProducersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		ot := kmsg.NewDescribeProducersResponseTopic()
		ot.Topic = rt.Topic
		t := c.b.lookup(rt.Topic)
		for _, idx := range rt.Partitions {
			op := kmsg.NewDescribeProducersResponseTopicPartition()
			op.Partition = idx
			p := c.b.partitionOf(t, idx)
			if p == nil {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
				op.ErrorMessage = kmsg.StringPtr("unknown topic or partition")
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			for _, pi := range p.log.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pi.ProducerID, int32(pi.Epoch), pi.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, 0, pi.TxnStartOffset
				op.ActiveProducers = append(op.ActiveProducers, ap)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}
