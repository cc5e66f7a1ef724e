package broker

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: v0-4
//
// Behavior:
// * TOPIC: every topic config we accept (configs.go), or those named, with
//   the effective value and its source: DYNAMIC_TOPIC_CONFIG when set on the
//   topic, STATIC_BROKER_CONFIG when it comes from tollgate's topic
//   defaults, DEFAULT_CONFIG otherwise. Unknown topic:
//   UNKNOWN_TOPIC_OR_PARTITION.
// * BROKER ("" or our node id): a few read-only entries describing this
//   broker (brokerConfigs). Another id: INVALID_REQUEST, as Kafka answers a
//   resource for another broker.
// * GROUP: the group configs (group_configs.go), set or default, whether
//   or not the group exists (as Kafka).
// * Other resource types (BROKER_LOGGER, CLIENT_METRICS): INVALID_REQUEST.
//
// Version notes:
// * v1: IncludeSynonyms, Source; v2: throttle after response
// * v3: IncludeDocumentation, ConfigType; v4: flexible

func init() { regKey(32, 0, 4, syncHandler(handleDescribeConfigs)) }

func handleDescribeConfigs(c *Conn, req *kmsg.DescribeConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := c.b.lookup(rr.ResourceName)
			if t == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				sr.ErrorMessage = kmsg.StringPtr("unknown topic " + rr.ResourceName)
				break
			}
			sr.Configs = c.b.describeTopicConfigs(c.b.topicConfigs(t), rr.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation, req.Version)
		case kmsg.ConfigResourceTypeBroker:
			if !c.b.isOurBroker(rr.ResourceName) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				sr.ErrorMessage = kmsg.StringPtr("unknown broker " + rr.ResourceName)
				break
			}
			sr.Configs = c.b.brokerConfigs(rr.ConfigNames, req.IncludeDocumentation)
		case kmsg.ConfigResourceTypeGroupConfig:
			if rr.ResourceName == "" {
				sr.ErrorCode = kerr.InvalidGroupID.Code
				break
			}
			sr.Configs = c.b.groups.describeGroupConfigs(rr.ResourceName, rr.ConfigNames, req.IncludeDocumentation)
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			sr.ErrorMessage = kmsg.StringPtr("the built-in broker describes only topic, broker and group configs")
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

// isOurBroker reports whether a BROKER resource name means this node (""
// is the cluster-wide default resource).
func (b *Broker) isOurBroker(name string) bool {
	return name == "" || name == strconv.Itoa(int(b.cfg.NodeID))
}

// brokerConfigs are read-only entries describing this broker, in Kafka's
// names, so that admin tools see sensible values.
func (b *Broker) brokerConfigs(names []string, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	topicDefault := func(name string) string { v, _ := b.configValue(nil, name); return v }
	entries := []struct{ name, value, doc string }{
		{"node.id", strconv.Itoa(int(b.cfg.NodeID)), "this broker's node id"},
		{"broker.id", strconv.Itoa(int(b.cfg.NodeID)), "this broker's node id"},
		{"log.dirs", b.cfg.DataDir, "the data directory"},
		{"num.partitions", strconv.Itoa(int(b.defaults.numPartitions)), "partitions of a topic created with the default count"},
		{"auto.create.topics.enable", strconv.FormatBool(b.cfg.AutoCreateTopics), "create topics named in Metadata requests"},
		{"default.replication.factor", "1", "single node"},
		{"min.insync.replicas", "1", "single node"},
		{"log.retention.ms", topicDefault("retention.ms"), "default retention.ms"},
		{"log.retention.bytes", topicDefault("retention.bytes"), "default retention.bytes"},
		{"log.segment.bytes", topicDefault("segment.bytes"), "default segment.bytes"},
		{"log.roll.ms", topicDefault("segment.ms"), "default segment.ms"},
		{"log.cleanup.policy", topicDefault("cleanup.policy"), "default cleanup.policy"},
		{"message.max.bytes", topicDefault("max.message.bytes"), "default max.message.bytes"},
		{"log.message.timestamp.type", topicDefault("message.timestamp.type"), "default message.timestamp.type"},
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, e := range entries {
		if names != nil && !contains(names, e.name) {
			continue
		}
		cf := kmsg.NewDescribeConfigsResponseResourceConfig()
		cf.Name, cf.Value, cf.ReadOnly = e.name, kmsg.StringPtr(e.value), true
		cf.Source = kmsg.ConfigSource(4) // STATIC_BROKER_CONFIG
		cf.ConfigType = kmsg.ConfigType(2)
		if docs {
			cf.Documentation = kmsg.StringPtr(e.doc)
		}
		out = append(out, cf)
	}
	return out
}
