package configs

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Topic config names the built-in broker understands in broker.defaults.
// Bounds follow Kafka's LogConfig definitions (storage/.../LogConfig.java,
// formerly core/src/main/scala/kafka/log/LogConfig.scala) so that a value
// tollgate accepts is one Kafka would accept too.
const (
	TopicNumPartitions        = "num.partitions"
	TopicRetentionMs          = "retention.ms"
	TopicRetentionBytes       = "retention.bytes"
	TopicSegmentBytes         = "segment.bytes"
	TopicSegmentMs            = "segment.ms"
	TopicCleanupPolicy        = "cleanup.policy"
	TopicMaxMessageBytes      = "max.message.bytes"
	TopicMessageTimestampType = "message.timestamp.type"
	TopicDeleteRetentionMs    = "delete.retention.ms"
	TopicMinCompactionLagMs   = "min.compaction.lag.ms"
	TopicMaxCompactionLagMs   = "max.compaction.lag.ms"
	TopicMinCleanableRatio    = "min.cleanable.dirty.ratio"
)

type topicKind int

const (
	kindInt   topicKind = iota // plain integer
	kindMs                     // milliseconds: integer, or a duration string
	kindBytes                  // bytes: integer, or a size string
	kindEnum                   // one of enum
	kindList                   // comma-separated subset of enum
	kindRatio                  // a number from 0 to 1
)

type topicSpec struct {
	kind     topicKind
	min, max int64
	enum     []string
	note     string // explains the minimum
}

var topicSpecs = map[string]topicSpec{
	// num.partitions is a broker config (KafkaConfig), INT atLeast(1).
	TopicNumPartitions: {kind: kindInt, min: 1, max: math.MaxInt32},
	// LONG atLeast(-1): -1 keeps data forever.
	TopicRetentionMs: {kind: kindMs, min: -1, max: math.MaxInt64, note: "-1 means keep forever"},
	// LONG, negative means no size limit; we only document -1.
	TopicRetentionBytes: {kind: kindBytes, min: -1, max: math.MaxInt64, note: "-1 means no size limit"},
	// INT atLeast(LegacyRecord.RECORD_OVERHEAD_V0 = 14).
	TopicSegmentBytes: {kind: kindBytes, min: 14, max: math.MaxInt32},
	// LONG atLeast(1).
	TopicSegmentMs: {kind: kindMs, min: 1, max: math.MaxInt64},
	// INT atLeast(0).
	TopicMaxMessageBytes: {kind: kindBytes, min: 0, max: math.MaxInt32},
	// LIST ValidList.in(compact, delete).
	TopicCleanupPolicy: {kind: kindList, enum: []string{"delete", "compact"}},
	// STRING in(CreateTime, LogAppendTime).
	TopicMessageTimestampType: {kind: kindEnum, enum: []string{"CreateTime", "LogAppendTime"}},
	// Compaction (cleanup.policy=compact). LONG atLeast(0), atLeast(0),
	// atLeast(1); DOUBLE between(0, 1).
	TopicDeleteRetentionMs:  {kind: kindMs, min: 0, max: math.MaxInt64},
	TopicMinCompactionLagMs: {kind: kindMs, min: 0, max: math.MaxInt64},
	TopicMaxCompactionLagMs: {kind: kindMs, min: 1, max: math.MaxInt64},
	TopicMinCleanableRatio:  {kind: kindRatio},
}

// TopicConfigNames lists the names accepted in broker.defaults, sorted.
func TopicConfigNames() []string {
	names := make([]string, 0, len(topicSpecs))
	for n := range topicSpecs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CanonicalTopicConfig checks a topic config value and returns it in
// Kafka's string form: integers in decimal, cleanup.policy as a
// comma-separated list without spaces or repeats. Byte-valued names also
// take a size ("1GiB" becomes "1073741824") and .ms names a Go duration
// ("168h" becomes "604800000"; there is no "d" unit).
func CanonicalTopicConfig(name, value string) (string, error) {
	spec, ok := topicSpecs[name]
	if !ok {
		msg := fmt.Sprintf("unknown topic config %q", name)
		if s := closest(name, TopicConfigNames()); s != "" {
			return "", fmt.Errorf("%s (did you mean %q?)", msg, s)
		}
		return "", fmt.Errorf("%s (known: %s)", msg, strings.Join(TopicConfigNames(), ", "))
	}
	v := strings.TrimSpace(value)
	switch spec.kind {
	case kindEnum:
		for _, e := range spec.enum {
			if v == e {
				return v, nil
			}
		}
		return "", fmt.Errorf("%q is not one of %s", value, strings.Join(spec.enum, ", "))
	case kindList:
		return canonicalList(value, spec.enum)
	case kindRatio:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			return "", fmt.Errorf("%q is not a ratio from 0 to 1", value)
		}
		return strconv.FormatFloat(f, 'g', -1, 64), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		n, err = parseUnitValue(spec.kind, v)
		if err != nil {
			return "", err
		}
	}
	if n < spec.min || n > spec.max {
		msg := fmt.Sprintf("%s is out of range %d-%d", value, spec.min, spec.max)
		if spec.note != "" {
			msg += " (" + spec.note + ")"
		}
		return "", fmt.Errorf("%s", msg)
	}
	return strconv.FormatInt(n, 10), nil
}

func parseUnitValue(kind topicKind, v string) (int64, error) {
	switch kind {
	case kindMs:
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("%q is not milliseconds: want an integer or a duration such as 168h or 30m", v)
		}
		return d.Milliseconds(), nil
	case kindBytes:
		s, err := ParseSize(v)
		if err != nil {
			return 0, err
		}
		return int64(s), nil
	}
	return 0, fmt.Errorf("%q is not an integer", v)
}

func canonicalList(value string, allowed []string) (string, error) {
	var out []string
	for _, p := range strings.Split(value, ",") {
		p = strings.TrimSpace(p)
		ok := false
		for _, a := range allowed {
			ok = ok || p == a
		}
		if !ok {
			return "", fmt.Errorf("%q is not one of %s", p, strings.Join(allowed, ", "))
		}
		dup := false
		for _, o := range out {
			dup = dup || o == p
		}
		if !dup {
			out = append(out, p)
		}
	}
	return strings.Join(out, ","), nil
}

// normalizeTopicDefaults rewrites broker.defaults in canonical form and
// keeps the recorded positions pointing at them.
func (c *Config) normalizeTopicDefaults() {
	for _, k := range sortedKeys(c.Broker.Defaults) {
		canon, err := CanonicalTopicConfig(k, c.Broker.Defaults[k])
		if err != nil || canon == c.Broker.Defaults[k] {
			continue
		}
		c.Broker.Defaults[k] = canon
		if c.meta != nil {
			p := "broker.defaults." + k
			if m, ok := c.meta.marks[p]; ok {
				m.fp = canon
				c.meta.marks[p] = m
			}
		}
	}
}
