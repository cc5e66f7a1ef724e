package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-3
//
// Behavior:
// * Grows a topic to Count partitions; Count must exceed the current count
//   (INVALID_PARTITIONS). An Assignment must put every new partition on
//   this node alone (INVALID_REPLICA_ASSIGNMENT).
// * A topic twice in one request: INVALID_REQUEST; unknown topic:
//   UNKNOWN_TOPIC_OR_PARTITION.
// * ValidateOnly checks without creating.
//
// Version notes:
// * v2: flexible; v3: strict quota mode (no quotas here)

func init() { regKey(37, 0, 3, syncHandler(handleCreatePartitions)) }

func handleCreatePartitions(c *Conn, req *kmsg.CreatePartitionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := make(map[string]int)
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		n := seen[rt.Topic]
		if n < 0 {
			continue // a repeated name is answered once, as Kafka does (dedupe.go)
		}
		if n > 1 {
			seen[rt.Topic] = -1
		}
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		err := c.createPartitions(rt, n > 1, req.ValidateOnly)
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		st.ErrorCode, st.ErrorMessage = errCode(err)
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (c *Conn) createPartitions(rt kmsg.CreatePartitionsRequestTopic, dup, validateOnly bool) error {
	if dup {
		return kafkaErr(kerr.InvalidRequest, "topic %q appears more than once in the request", rt.Topic)
	}
	t := c.b.lookup(rt.Topic)
	if t == nil {
		return kafkaErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", rt.Topic)
	}
	cur := c.b.partitionCount(t)
	if rt.Count <= cur {
		return kafkaErr(kerr.InvalidPartitions, "topic %q has %d partitions; the new count must be larger, got %d", rt.Topic, cur, rt.Count)
	}
	if rt.Count > maxPartitions {
		return kafkaErr(kerr.InvalidPartitions, "at most %d partitions per topic", maxPartitions)
	}
	if rt.Assignment != nil {
		if int32(len(rt.Assignment)) != rt.Count-cur {
			return kafkaErr(kerr.InvalidReplicaAssignment, "%d assignments for %d new partitions", len(rt.Assignment), rt.Count-cur)
		}
		for _, a := range rt.Assignment {
			if len(a.Replicas) != 1 || a.Replicas[0] != c.b.cfg.NodeID {
				return kafkaErr(kerr.InvalidReplicaAssignment, "every partition must be assigned to node %d alone", c.b.cfg.NodeID)
			}
		}
	}
	if validateOnly {
		return nil
	}
	return c.b.addPartitions(t, rt.Count)
}
