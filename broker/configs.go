package broker

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// configKind is how a topic config value is validated.
type configKind int8

const (
	kindLong configKind = iota
	kindInt
	kindBool
	kindDouble
	kindString
	kindList
)

// describe type codes for DescribeConfigs v3+ (ConfigResource.Type in
// DescribeConfigsResponse.json): 1 boolean, 2 string, 3 int, 5 long,
// 6 double, 7 list.
func (k configKind) describeType() int8 {
	switch k {
	case kindBool:
		return 1
	case kindInt:
		return 3
	case kindLong:
		return 5
	case kindDouble:
		return 6
	case kindList:
		return 7
	}
	return 2
}

// topicConfigDef is one Kafka topic config this broker accepts.
type topicConfigDef struct {
	kind configKind
	def  string
	// min is the smallest legal numeric value (checked for kindLong/kindInt).
	min int64
	// enum lists legal values (each list element for kindList), if set.
	enum []string
	// effective means the built-in broker acts on it; the rest are accepted
	// and stored so that tools which set them (Kafka Streams, Connect) work,
	// and are listed in skipped_features.
	effective bool
	doc       string
}

// topicConfigDefs are the topic configs we accept, with Kafka's defaults
// (LogConfig.java / TopicConfig.java). Unknown names get INVALID_CONFIG, as
// Kafka answers them.
var topicConfigDefs = map[string]topicConfigDef{
	"cleanup.policy":         {kind: kindList, def: "delete", enum: []string{"delete", "compact"}, effective: true, doc: "delete applies retention; compact keeps the latest record of every key (the log cleaner); both may be given"},
	"retention.ms":           {kind: kindLong, def: "604800000", min: -1, effective: true, doc: "delete segments older than this (-1: forever)"},
	"retention.bytes":        {kind: kindLong, def: "-1", min: -1, effective: true, doc: "delete oldest segments while a partition is larger (-1: unlimited)"},
	"segment.bytes":          {kind: kindInt, def: "1073741824", min: 14, effective: true, doc: "roll a segment at this size"},
	"segment.ms":             {kind: kindLong, def: "604800000", min: 1, effective: true, doc: "roll a segment after this age"},
	"max.message.bytes":      {kind: kindInt, def: "1048588", min: 0, effective: true, doc: "largest record batch accepted"},
	"message.timestamp.type": {kind: kindString, def: "CreateTime", enum: []string{"CreateTime", "LogAppendTime"}, effective: true, doc: "CreateTime keeps producer timestamps; LogAppendTime stamps batches on append"},
	"index.interval.bytes":   {kind: kindInt, def: "4096", min: 0, effective: true, doc: "bytes between offset index entries"},

	"compression.type":                        {kind: kindString, def: "producer", enum: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}},
	"min.insync.replicas":                     {kind: kindInt, def: "1", min: 1},
	"unclean.leader.election.enable":          {kind: kindBool, def: "false"},
	"delete.retention.ms":                     {kind: kindLong, def: "86400000", min: 0, effective: true, doc: "how long a tombstone stays after the cleaning that first kept it"},
	"min.compaction.lag.ms":                   {kind: kindLong, def: "0", min: 0, effective: true, doc: "a segment holding a record younger than this is not compacted yet"},
	"max.compaction.lag.ms":                   {kind: kindLong, def: "9223372036854775807", min: 1, effective: true, doc: "a dirty segment older than this is compacted whatever the dirty ratio"},
	"min.cleanable.dirty.ratio":               {kind: kindDouble, def: "0.5", effective: true, doc: "compact once the uncompacted share of the log reaches this"},
	"file.delete.delay.ms":                    {kind: kindLong, def: "60000", min: 0},
	"flush.messages":                          {kind: kindLong, def: "9223372036854775807", min: 1},
	"flush.ms":                                {kind: kindLong, def: "9223372036854775807", min: 0},
	"segment.index.bytes":                     {kind: kindInt, def: "10485760", min: 4},
	"segment.jitter.ms":                       {kind: kindLong, def: "0", min: 0},
	"preallocate":                             {kind: kindBool, def: "false"},
	"message.downconversion.enable":           {kind: kindBool, def: "true"},
	"message.timestamp.difference.max.ms":     {kind: kindLong, def: "9223372036854775807", min: 0},
	"message.timestamp.before.max.ms":         {kind: kindLong, def: "9223372036854775807", min: 0},
	"message.timestamp.after.max.ms":          {kind: kindLong, def: "9223372036854775807", min: 0},
	"follower.replication.throttled.replicas": {kind: kindList, def: ""},
	"leader.replication.throttled.replicas":   {kind: kindList, def: ""},
	"local.retention.ms":                      {kind: kindLong, def: "-2", min: -2},
	"local.retention.bytes":                   {kind: kindLong, def: "-2", min: -2},
	"remote.storage.enable":                   {kind: kindBool, def: "false"},
}

// topicDefaults are the broker-level defaults from Config.TopicDefaults.
type topicDefaults struct {
	numPartitions int32
	// configs are defaults that replace topicConfigDefs' (key: topic config
	// name).
	configs map[string]string
}

// parseTopicDefaults validates Config.TopicDefaults.
func parseTopicDefaults(m map[string]string) (topicDefaults, error) {
	d := topicDefaults{numPartitions: 1, configs: map[string]string{}}
	for k, v := range m {
		if k == "num.partitions" {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 || n > maxPartitions {
				return d, fmt.Errorf("num.partitions: %q is not a number between 1 and %d", v, maxPartitions)
			}
			d.numPartitions = int32(n)
			continue
		}
		if err := validateConfig(k, v); err != nil {
			return d, err
		}
		d.configs[k] = v
	}
	return d, nil
}

// validateConfig checks one topic config name and value.
func validateConfig(name, value string) error {
	def, ok := topicConfigDefs[name]
	if !ok {
		return kafkaErr(kerr.InvalidConfig, "unknown topic config name %q", name)
	}
	bad := func(why string) error {
		return kafkaErr(kerr.InvalidConfig, "invalid value %q for %s: %s", value, name, why)
	}
	switch def.kind {
	case kindLong, kindInt:
		bits := 64
		if def.kind == kindInt {
			bits = 32
		}
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, bits)
		if err != nil {
			return bad("not an integer")
		}
		if n < def.min {
			return bad(fmt.Sprintf("must be at least %d", def.min))
		}
	case kindBool:
		if _, err := strconv.ParseBool(value); err != nil {
			return bad("not true or false")
		}
	case kindDouble:
		// The one double (min.cleanable.dirty.ratio) is a ratio: Kafka's
		// ConfigDef range is [0, 1].
		if f, err := strconv.ParseFloat(value, 64); err != nil {
			return bad("not a number")
		} else if f < 0 || f > 1 {
			return bad("must be between 0 and 1")
		}
	case kindString, kindList:
		if len(def.enum) == 0 {
			return nil
		}
		vals := []string{value}
		if def.kind == kindList {
			vals = splitList(value)
		}
		for _, v := range vals {
			if !contains(def.enum, v) {
				return bad("must be one of " + strings.Join(def.enum, ", "))
			}
		}
	}
	return nil
}

// validateConfigs checks a set of explicit topic configs.
func validateConfigs(m map[string]string) error {
	for k, v := range m {
		if err := validateConfig(k, v); err != nil {
			return err
		}
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// configValue is a topic's effective value of name and where it comes from.
func (b *Broker) configValue(explicit map[string]string, name string) (value string, source int8) {
	if v, ok := explicit[name]; ok {
		return v, 1 // DYNAMIC_TOPIC_CONFIG
	}
	if v, ok := b.defaults.configs[name]; ok {
		return v, 4 // STATIC_BROKER_CONFIG: from tollgate's own configuration
	}
	return topicConfigDefs[name].def, configSourceDefault
}

// configSourceDefault is DescribeConfigs' DEFAULT_CONFIG source.
const configSourceDefault = 5

// logConfig turns explicit topic configs (over the broker defaults) into the
// storage configuration.
func (b *Broker) logConfig(explicit map[string]string) (storage.LogConfig, error) {
	lc := storage.DefaultLogConfig()
	get := func(name string) string { v, _ := b.configValue(explicit, name); return v }
	num := func(name string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSpace(get(name)), 10, 64)
		return n
	}
	for name := range topicConfigDefs {
		if err := validateConfig(name, get(name)); err != nil {
			return lc, err
		}
	}
	lc.SegmentBytes = num("segment.bytes")
	lc.SegmentMs = num("segment.ms")
	lc.RetentionMs = num("retention.ms")
	lc.RetentionBytes = num("retention.bytes")
	lc.MaxMessageBytes = int32(num("max.message.bytes"))
	lc.IndexIntervalBytes = int32(num("index.interval.bytes"))
	lc.LogAppendTime = get("message.timestamp.type") == "LogAppendTime"
	// A topic whose cleanup.policy does not include delete keeps its data
	// (Kafka applies time and size retention only with delete).
	policy := splitList(get("cleanup.policy"))
	if !contains(policy, "delete") {
		lc.RetentionMs, lc.RetentionBytes = -1, -1
	}
	lc.Compact = contains(policy, "compact")
	lc.DeleteRetentionMs = num("delete.retention.ms")
	lc.MinCompactionLagMs = num("min.compaction.lag.ms")
	lc.MaxCompactionLagMs = num("max.compaction.lag.ms")
	lc.MinCleanableDirtyRatio, _ = strconv.ParseFloat(strings.TrimSpace(get("min.cleanable.dirty.ratio")), 64)
	return lc, nil
}

// describeTopicConfigs fills DescribeConfigs entries for a topic. names
// filters (nil: all).
func (b *Broker) describeTopicConfigs(explicit map[string]string, names []string, synonyms, docs bool, version int16) []kmsg.DescribeConfigsResponseResourceConfig {
	if names == nil {
		for n := range topicConfigDefs {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, n := range names {
		def, ok := topicConfigDefs[n]
		if !ok {
			continue
		}
		v, src := b.configValue(explicit, n)
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = n
		c.Value = kmsg.StringPtr(v)
		c.Source = kmsg.ConfigSource(src)
		c.IsDefault = src == configSourceDefault
		c.ConfigType = kmsg.ConfigType(def.kind.describeType())
		if docs {
			d := def.doc
			if !def.effective {
				d = "accepted and stored; the built-in broker does not act on it"
			}
			c.Documentation = kmsg.StringPtr(d)
		}
		if synonyms && version >= 1 {
			if _, ok := explicit[n]; ok {
				s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				s.Name, s.Value, s.Source = n, kmsg.StringPtr(explicit[n]), kmsg.ConfigSource(1)
				c.ConfigSynonyms = append(c.ConfigSynonyms, s)
			}
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			s.Name, s.Value, s.Source = n, kmsg.StringPtr(topicConfigDefs[n].def), kmsg.ConfigSource(configSourceDefault)
			c.ConfigSynonyms = append(c.ConfigSynonyms, s)
		}
		out = append(out, c)
	}
	return out
}
