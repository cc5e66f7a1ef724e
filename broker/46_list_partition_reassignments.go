package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ListPartitionReassignments: v0
//
// Behavior:
// * No reassignment is ever in progress (one replica per partition; see
//   45_alter_partition_reassignments.go), so the answer lists no topic,
//   whether Topics is null (every reassignment) or names topics, known or
//   not: Kafka's ReplicationControlManager.listPartitionReassignments lists
//   only reassigning partitions and skips unknown topics. ErrorMessage
//   null.
//
// Version notes:
// * v0: flexible

func init() {
	regKey(int16(kmsg.ListPartitionReassignments), 0, 0, syncHandler(handleListPartitionReassignments))
}

func handleListPartitionReassignments(_ *Conn, req *kmsg.ListPartitionReassignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.Topics = []kmsg.ListPartitionReassignmentsResponseTopic{}
	return resp, nil
}
