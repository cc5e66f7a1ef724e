package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTopicPartitions: v0 (KIP-966; what kafka-topics.sh --describe
// uses since Kafka 3.7)
//
// Behavior:
// * The named topics (none: every topic), sorted by name, with each
//   partition's leader, epoch 0, replicas and ISR [node], and empty
//   eligible-leader, last-known-ELR and offline lists (single node).
// * Pagination: at most ResponsePartitionLimit partitions (capped at
//   max.request.partition.size.limit, 2000) are returned; when more
//   remain, NextCursor names the first one not returned. A Cursor starts
//   the listing at its topic and partition; a cursor topic that is not
//   among the named topics is INVALID_REQUEST (a closed connection, as
//   Kafka throws InvalidRequestException).
// * An unknown topic is UNKNOWN_TOPIC_OR_PARTITION; AuthorizedOperations
//   is INT32_MIN (the gateway authorizes).

func init() {
	regKey(int16(kmsg.DescribeTopicPartitions), 0, 0, syncHandler(handleDescribeTopicPartitions))
}

// maxDescribePartitions is Kafka's max.request.partition.size.limit.
const maxDescribePartitions = 2000

func handleDescribeTopicPartitions(c *Conn, req *kmsg.DescribeTopicPartitionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	var names []string
	if len(req.Topics) == 0 {
		for _, t := range c.b.sortedTopics() {
			names = append(names, t.name)
		}
	} else {
		for _, rt := range req.Topics {
			names = append(names, rt.Topic)
		}
		sort.Strings(names)
	}
	startPart := int32(0)
	if cur := req.Cursor; cur != nil {
		i := sort.SearchStrings(names, cur.Topic)
		if len(req.Topics) > 0 && (i == len(names) || names[i] != cur.Topic) {
			return nil, ErrMalformedRequest
		}
		names = names[i:]
		if len(names) > 0 && names[0] == cur.Topic {
			startPart = max(cur.Partition, 0) // else the cursor's topic is gone: start at the next one
		}
	}
	limit := int(req.ResponsePartitionLimit)
	if limit <= 0 || limit > maxDescribePartitions {
		limit = maxDescribePartitions
	}
	for i, name := range names {
		if i > 0 && name == names[i-1] {
			continue
		}
		ot := kmsg.NewDescribeTopicPartitionsResponseTopic()
		ot.Topic = kmsg.StringPtr(name)
		ot.AuthorizedOperations = authorizedOpsOmitted
		t := c.b.lookup(name)
		if t == nil {
			ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		ot.TopicID, ot.IsInternal = t.id, isInternalTopic(t.name)
		from := int32(0)
		if i == 0 {
			from = startPart
		}
		n := c.b.partitionCount(t)
		for p := from; p < n; p++ {
			if limit == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: p}
				break
			}
			ot.Partitions = append(ot.Partitions, c.b.describedPartition(p))
			limit--
		}
		resp.Topics = append(resp.Topics, ot)
		if resp.NextCursor != nil {
			break
		}
		if limit == 0 && i+1 < len(names) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: names[i+1], Partition: 0}
			break
		}
	}
	return resp, nil
}

// describedPartition is one partition as DescribeTopicPartitions shows it.
func (b *Broker) describedPartition(idx int32) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	node := b.cfg.NodeID
	p := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	p.Partition, p.LeaderID, p.LeaderEpoch = idx, node, 0
	p.Replicas, p.ISR = []int32{node}, []int32{node}
	p.EligibleLeaderReplicas, p.LastKnownELR, p.OfflineReplicas = []int32{}, []int32{}, []int32{}
	return p
}
