package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionReassignments: v0-1
//
// Behavior:
// * Every partition has one replica, this node, so the only valid target
//   is [node]: it is the current assignment, and the reassignment completes
//   at once with no error (nothing moves), as in a single-node Kafka.
//   Kafka's ReplicationControlManager.alterPartitionReassignment, in order:
//   an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; Replicas
//   null (cancel) is NO_REASSIGNMENT_IN_PROGRESS, since none is ever in
//   progress; an empty list, a broker other than this node, or a broker
//   named twice is INVALID_REPLICA_ASSIGNMENT with Kafka's messages
//   (validateManualPartitionAssignment).
// * Top-level ErrorCode 0 and ErrorMessage null; each partition is
//   answered in request order.
//
// Version notes:
// * v0: flexible
// * v1: AllowReplicationFactorChange (KIP-860), echoed; a valid target never
//   changes the replication factor (1), so it changes nothing here.

func init() {
	regKey(int16(kmsg.AlterPartitionAssignments), 0, 1, syncHandler(handleAlterPartitionReassignments))
}

// noReassignment is Kafka's message for NO_REASSIGNMENT_IN_PROGRESS
// (Errors.java).
const noReassignment = "No partition reassignment is in progress."

func handleAlterPartitionReassignments(c *Conn, req *kmsg.AlterPartitionAssignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	for _, rt := range req.Topics {
		t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		t.Topic = rt.Topic
		top := c.b.lookup(rt.Topic)
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			p.Partition = rp.Partition
			if err := c.b.checkReassignment(top, rt.Topic, rp); err != nil {
				p.ErrorCode, p.ErrorMessage = errCode(err)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// checkReassignment is nil when rp's target is this node alone (the
// current assignment), else the error Kafka gives.
func (b *Broker) checkReassignment(t *topic, name string, rp kmsg.AlterPartitionAssignmentsRequestTopicPartition) error {
	switch {
	case t == nil:
		return kafkaErr(kerr.UnknownTopicOrPartition, "Unable to find a topic named %s.", name)
	case b.partitionOf(t, rp.Partition) == nil:
		return kafkaErr(kerr.UnknownTopicOrPartition, "Unable to find partition %s:%d.", name, rp.Partition)
	case rp.Replicas == nil:
		return kafkaErr(kerr.NoReassignmentInProgress, "%s", noReassignment)
	case len(rp.Replicas) == 0:
		return kafkaErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	ids := slices.Clone(rp.Replicas)
	slices.Sort(ids)
	for i, id := range ids {
		if id != b.cfg.NodeID {
			return kafkaErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
		if i > 0 && ids[i-1] == id {
			return kafkaErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes the broker %d more than once.", id)
		}
	}
	return nil
}
