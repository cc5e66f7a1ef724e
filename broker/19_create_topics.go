package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v0-7
//
// Behavior:
// * Name rules as Kafka (INVALID_TOPIC_EXCEPTION); a name twice in one
//   request is INVALID_REQUEST for each copy; an existing topic
//   TOPIC_ALREADY_EXISTS.
// * NumPartitions -1 takes num.partitions; ReplicationFactor must be 1 or
//   -1 (INVALID_REPLICATION_FACTOR). A manual ReplicaAssignment is accepted
//   only if every partition is assigned to this node alone
//   (INVALID_REPLICA_ASSIGNMENT otherwise) and then NumPartitions and
//   ReplicationFactor must be -1 (INVALID_REQUEST), as Kafka.
// * Configs are validated (unknown name or bad value: INVALID_CONFIG; a
//   null value: INVALID_REQUEST) and persisted with the topic.
// * ValidateOnly runs every check and creates nothing.
// * v5+: the answer describes the topic's partitions, replication factor
//   and every config with its value and source.
//
// Version notes:
// * v1: ValidateOnly, ErrorMessage; v4: defaults (-1) allowed
// * v5: flexible, NumPartitions/ReplicationFactor/Configs in the response
// * v6: strict quota mode (no quotas here); v7: TopicID

func init() { regKey(19, 0, 7, syncHandler(handleCreateTopics)) }

func handleCreateTopics(c *Conn, req *kmsg.CreateTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := make(map[string]int)
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		if seen[rt.Topic] < 0 {
			continue // a repeated name is answered once, as Kafka does (dedupe.go)
		}
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		var err error
		var t *topic
		if seen[rt.Topic] > 1 {
			seen[rt.Topic] = -1
			err = kafkaErr(kerr.InvalidRequest, "topic %q appears more than once in the request", rt.Topic)
		} else {
			var s createSpec
			if s, err = c.checkCreateRequest(rt); err == nil && !req.ValidateOnly {
				t, err = c.b.createTopic(s)
			}
			if err == nil {
				st.NumPartitions, st.ReplicationFactor = s.partitions, 1
				if req.Version >= 5 {
					st.Configs = createdConfigs(c.b, s.configs)
				}
				if t != nil {
					st.TopicID = t.id
				}
			}
		}
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		st.ErrorCode, st.ErrorMessage = errCode(err)
		if req.Version < 1 {
			st.ErrorMessage = nil
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// checkCreateRequest validates one topic of a CreateTopics request.
func (c *Conn) checkCreateRequest(rt kmsg.CreateTopicsRequestTopic) (createSpec, error) {
	configs := make(map[string]string, len(rt.Configs))
	for _, cf := range rt.Configs {
		if cf.Value == nil {
			return createSpec{}, kafkaErr(kerr.InvalidRequest, "config %s has a null value", cf.Name)
		}
		configs[cf.Name] = *cf.Value
	}
	partitions, replication := rt.NumPartitions, rt.ReplicationFactor
	if len(rt.ReplicaAssignment) > 0 {
		if partitions != -1 || replication != -1 {
			return createSpec{}, kafkaErr(kerr.InvalidRequest, "both a replica assignment and a partition count or replication factor were given")
		}
		for i, a := range rt.ReplicaAssignment {
			if a.Partition != int32(i) || len(a.Replicas) != 1 || a.Replicas[0] != c.b.cfg.NodeID {
				return createSpec{}, kafkaErr(kerr.InvalidReplicaAssignment, "every partition must be assigned to node %d alone, in order", c.b.cfg.NodeID)
			}
		}
		partitions, replication = int32(len(rt.ReplicaAssignment)), 1
	}
	return c.b.checkCreate(rt.Topic, partitions, replication, configs)
}

// createdConfigs lists every config of a new topic for the v5+ answer.
func createdConfigs(b *Broker, explicit map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, d := range b.describeTopicConfigs(explicit, nil, false, false, 0) {
		cf := kmsg.NewCreateTopicsResponseTopicConfig()
		cf.Name, cf.Value, cf.Source = d.Name, d.Value, int8(d.Source)
		out = append(out, cf)
	}
	return out
}
