package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata: v0-13
//
// Behavior:
// * One broker: node 0 (Config.NodeID) at advertisedHost:advertisedPort;
//   the gateway rewrites the address. It is also the controller and the
//   leader of every partition, with replicas and ISR [node].
// * All topics: v0 an empty list, v1+ a null list. An empty list at v1+
//   asks for none.
// * A topic named explicitly that does not exist is created with the
//   defaults when auto-creation is on and the request allows it (always
//   for v0-3, AllowAutoTopicCreation for v4+), synchronously, so the answer
//   already carries its partitions (Kafka answers LEADER_NOT_AVAILABLE
//   first; we have no election to wait for). Otherwise
//   UNKNOWN_TOPIC_OR_PARTITION.
// * An illegal name gets INVALID_TOPIC_EXCEPTION and is never created.
// * Topics asked for by id (v10+) that do not exist get UNKNOWN_TOPIC_ID.
// * __consumer_offsets and __transaction_state are listed with IsInternal
//   (internal_topics.go).
//
// Version notes:
// * v1: ControllerID, IsInternal, null = all topics
// * v2: ClusterID
// * v4: AllowAutoTopicCreation
// * v5: OfflineReplicas; v7: LeaderEpoch (always 0 here)
// * v8-10: authorized operations (left at "not requested")
// * v9: flexible; v10: topic ids; v13: top-level ErrorCode (never set)

func init() { regKey(3, 0, 13, syncHandler(handleMetadata)) }

func handleMetadata(c *Conn, req *kmsg.MetadataRequest) (kmsg.Response, error) {
	b := c.b
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	br := kmsg.NewMetadataResponseBroker()
	br.NodeID, br.Host, br.Port = b.cfg.NodeID, b.advertisedHost, b.advertisedPort
	resp.Brokers = []kmsg.MetadataResponseBroker{br}
	resp.ClusterID = kmsg.StringPtr(b.clusterID)
	resp.ControllerID = b.cfg.NodeID

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range b.sortedTopics() {
			resp.Topics = append(resp.Topics, b.metadataTopic(t))
		}
		return resp, nil
	}
	allowCreate := b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			// By id (v10+).
			t := b.lookupID(rt.TopicID)
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			resp.Topics = append(resp.Topics, b.metadataTopic(t))
			continue
		}
		name := *rt.Topic
		t := b.lookup(name)
		var err error
		if t == nil {
			switch {
			case validateTopicName(name) != nil:
				err = kafkaErr(kerr.InvalidTopicException, "invalid topic name")
			case allowCreate:
				t, err = b.autoCreate(name)
			default:
				err = kafkaErr(kerr.UnknownTopicOrPartition, "unknown topic")
			}
		}
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return nil, err
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = kmsg.StringPtr(name)
			mt.ErrorCode, _ = errCode(err)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, b.metadataTopic(t))
	}
	return resp, nil
}

// metadataTopic describes an existing topic.
func (b *Broker) metadataTopic(t *topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.name)
	mt.TopicID = t.id
	mt.IsInternal = isInternalTopic(t.name)
	n := b.partitionCount(t)
	node := b.cfg.NodeID
	for i := int32(0); i < n; i++ {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition = i
		p.Leader = node
		p.LeaderEpoch = 0
		p.Replicas = []int32{node}
		p.ISR = []int32{node}
		p.OfflineReplicas = []int32{}
		mt.Partitions = append(mt.Partitions, p)
	}
	return mt
}
