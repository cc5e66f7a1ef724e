package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders: v0-2
//
// Behavior:
// * One replica per partition, always the leader and the preferred one, so
//   no election is ever needed, as in a single-node Kafka: each named
//   partition is ELECTION_NOT_NEEDED (preferred: the leader is the first
//   replica; unclean: there is a leader), an unknown topic or partition
//   UNKNOWN_TOPIC_OR_PARTITION ("No such topic as t", "No such partition
//   as t-3"). Kafka's ReplicationControlManager.electLeaders.
// * Topics null (every partition): one result per topic with no partition
//   in it; Kafka leaves out the partitions whose election was not needed.
// * An election type other than preferred (0) or unclean (1) fails the
//   whole request with INVALID_REQUEST, top level and per named partition
//   (ElectLeadersRequest.getErrorResponse).
// * Repeated partitions are answered once (dedupe.go).
//
// Version notes:
// * v1: ElectionType, top-level ErrorCode
// * v2: flexible

func init() { regKey(int16(kmsg.ElectLeaders), 0, 2, syncHandler(handleElectLeaders)) }

// electionNotNeeded is Kafka's message for ELECTION_NOT_NEEDED (Errors.java).
const electionNotNeeded = "Leader election not needed for topic partition."

func handleElectLeaders(c *Conn, req *kmsg.ElectLeadersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		msg := fmt.Sprintf("Unknown election type %d", req.ElectionType)
		resp.ErrorCode = kerr.InvalidRequest.Code
		for _, rt := range req.Topics {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = rt.Topic
			for _, p := range rt.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
				t.Partitions = append(t.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil
	}
	if req.Topics == nil {
		for _, t := range c.b.sortedTopics() {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.name
			rt.Partitions = []kmsg.ElectLeadersResponseTopicPartition{}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	for _, rt := range req.Topics {
		t := kmsg.NewElectLeadersResponseTopic()
		t.Topic = rt.Topic
		top := c.b.lookup(rt.Topic)
		for _, p := range rt.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = p
			switch {
			case top == nil:
				rp.ErrorCode, rp.ErrorMessage = kerr.UnknownTopicOrPartition.Code, kmsg.StringPtr("No such topic as "+rt.Topic)
			case c.b.partitionOf(top, p) == nil:
				rp.ErrorCode, rp.ErrorMessage = kerr.UnknownTopicOrPartition.Code, kmsg.StringPtr(fmt.Sprintf("No such partition as %s-%d", rt.Topic, p))
			default:
				rp.ErrorCode, rp.ErrorMessage = kerr.ElectionNotNeeded.Code, kmsg.StringPtr(electionNotNeeded)
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
