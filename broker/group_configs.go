package broker

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group configs (KIP-848/KIP-932 GROUP config resources, type 32): the
// per-group overrides Kafka's GroupConfig accepts, set with
// IncrementalAlterConfigs and read with DescribeConfigs. They may be set
// before the group exists (as Kafka allows) and are persisted in the
// coordinator journal under "c NUL group" as a JSON object. Only the share
// group entries have an effect here; the consumer ones are stored and
// described.
//
// Ownership: groupConfigs.mu guards the map; it is a leaf lock (taken under
// group.mu, never the other way round).

const groupConfigKeyPrefix = "c\x00"

// groupConfigDef is one accepted group config: its Kafka default and a
// validator.
type groupConfigDef struct {
	def   func(b *Broker) string
	check func(v string) error
}

func intRange(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be an integer in [%d, %d]", lo, hi)
		}
		return nil
	}
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, ok := range vals {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
	}
}

// checkAutoReset accepts latest, earliest and by_duration:<ISO-8601
// duration> (KIP-1106), the duration in the PnDTnHnMnS subset.
func checkAutoReset(v string) error {
	if v == "latest" || v == "earliest" {
		return nil
	}
	if d, ok := strings.CutPrefix(v, "by_duration:"); ok {
		if _, err := parseISODuration(d); err == nil {
			return nil
		}
	}
	return fmt.Errorf("must be latest, earliest or by_duration:<ISO-8601 duration>")
}

// parseISODuration parses PnDTnHnMnS (days, hours, minutes, seconds; each
// optional).
func parseISODuration(s string) (time.Duration, error) {
	rest, ok := strings.CutPrefix(strings.ToUpper(s), "P")
	if !ok || rest == "" {
		return 0, fmt.Errorf("duration %q: must start with P", s)
	}
	var total time.Duration
	inTime := false
	num := ""
	for _, r := range rest {
		switch {
		case r >= '0' && r <= '9' || r == '.':
			num += string(r)
		case r == 'T':
			inTime = true
		default:
			f, err := strconv.ParseFloat(num, 64)
			if err != nil || f < 0 {
				return 0, fmt.Errorf("duration %q: bad number", s)
			}
			unit := map[rune]time.Duration{'D': 24 * time.Hour, 'H': time.Hour, 'M': time.Minute, 'S': time.Second}[r]
			if unit == 0 || (!inTime && r != 'D') {
				return 0, fmt.Errorf("duration %q: bad unit %c", s, r)
			}
			total += time.Duration(f * float64(unit))
			num = ""
		}
	}
	if num != "" {
		return 0, fmt.Errorf("duration %q: trailing number", s)
	}
	return total, nil
}

func durationDefault(d time.Duration) func(*Broker) string {
	return func(*Broker) string { return strconv.FormatInt(d.Milliseconds(), 10) }
}

// groupConfigDefs are Kafka's GroupConfig names.
var groupConfigDefs = map[string]groupConfigDef{
	"consumer.session.timeout.ms":    {durationDefault(defaultCGSessionTimeout), intRange(1, 1<<31-1)},
	"consumer.heartbeat.interval.ms": {durationDefault(defaultCGHeartbeatInterval), intRange(1, 1<<31-1)},
	"share.session.timeout.ms":       {durationDefault(defaultShareSessionTimeout), intRange(1, 1<<31-1)},
	"share.heartbeat.interval.ms":    {durationDefault(defaultShareHeartbeat), intRange(1, 1<<31-1)},
	"share.record.lock.duration.ms": {func(b *Broker) string {
		return strconv.FormatInt(b.shareLockDefault().Milliseconds(), 10)
	}, intRange(1000, 3600000)},
	"share.delivery.count.limit": {func(b *Broker) string { return strconv.Itoa(b.shareDeliveryDefault()) }, intRange(2, 10)},
	"share.auto.offset.reset":    {func(*Broker) string { return "latest" }, checkAutoReset},
	"share.isolation.level":      {func(*Broker) string { return "read_uncommitted" }, oneOf("read_uncommitted", "read_committed")},
}

// groupConfigs is every group's explicit overrides.
type groupConfigs struct {
	mu sync.Mutex
	m  map[string]map[string]string
}

// shareSettings are a share group's effective settings.
type shareSettings struct {
	sessionTimeout, heartbeat, lockDuration time.Duration
	deliveryLimit                           int16
	autoReset                               string
	readCommitted                           bool
}

func (b *Broker) shareLockDefault() time.Duration {
	if d := b.cfg.ShareRecordLockDuration; d > 0 {
		return d
	}
	return defaultShareLockDuration
}

func (b *Broker) shareDeliveryDefault() int {
	if n := b.cfg.ShareDeliveryCountLimit; n > 0 {
		return n
	}
	return defaultShareDeliveryLimit
}

// groupConfigValue is name's effective value for group and whether it was
// set on the group.
func (c *coordinator) groupConfigValue(group, name string) (string, bool) {
	c.gcfg.mu.Lock()
	v, ok := c.gcfg.m[group][name]
	c.gcfg.mu.Unlock()
	if ok {
		return v, true
	}
	return groupConfigDefs[name].def(c.b), false
}

// shareConfig returns group's effective share settings.
func (c *coordinator) shareConfig(group string) shareSettings {
	ms := func(name string) time.Duration {
		v, _ := c.groupConfigValue(group, name)
		n, _ := strconv.ParseInt(v, 10, 64)
		return time.Duration(n) * time.Millisecond
	}
	dl, _ := c.groupConfigValue(group, "share.delivery.count.limit")
	n, _ := strconv.Atoi(dl)
	reset, _ := c.groupConfigValue(group, "share.auto.offset.reset")
	iso, _ := c.groupConfigValue(group, "share.isolation.level")
	return shareSettings{sessionTimeout: ms("share.session.timeout.ms"), heartbeat: ms("share.heartbeat.interval.ms"),
		lockDuration: ms("share.record.lock.duration.ms"), deliveryLimit: int16(n), autoReset: reset,
		readCommitted: iso == "read_committed"}
}

// alterGroupConfigs applies IncrementalAlterConfigs operations to group's
// overrides: SET and DELETE (APPEND/SUBTRACT: no group config is a list).
func (c *coordinator) alterGroupConfigs(group string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) error {
	if group == "" {
		return kafkaErr(kerr.InvalidGroupID, "group id must not be empty")
	}
	c.gcfg.mu.Lock()
	locked := true
	defer func() {
		if locked {
			c.gcfg.mu.Unlock()
		}
	}()
	next := map[string]string{}
	for k, v := range c.gcfg.m[group] {
		next[k] = v
	}
	seen := map[string]bool{}
	for _, op := range ops {
		def, ok := groupConfigDefs[op.Name]
		switch {
		case seen[op.Name]:
			return kafkaErr(kerr.InvalidRequest, "config %s appears more than once", op.Name)
		case !ok:
			return kafkaErr(kerr.InvalidConfig, "unknown group config name %q", op.Name)
		}
		seen[op.Name] = true
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return kafkaErr(kerr.InvalidRequest, "config %s has a null value", op.Name)
			}
			if err := def.check(*op.Value); err != nil {
				return kafkaErr(kerr.InvalidConfig, "invalid value %q for %s: %v", *op.Value, op.Name, err)
			}
			next[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, op.Name)
		default:
			return kafkaErr(kerr.InvalidConfig, "group config %s supports only SET and DELETE", op.Name)
		}
	}
	if validateOnly {
		return nil
	}
	var raw []byte
	if len(next) > 0 {
		raw, _ = json.Marshal(next) // strings only: cannot fail
	}
	durable := c.j.put(groupConfigKeyPrefix+group, raw) // written now, in order
	if c.gcfg.m == nil {
		c.gcfg.m = map[string]map[string]string{}
	}
	if len(next) == 0 {
		delete(c.gcfg.m, group)
	} else {
		c.gcfg.m[group] = next
	}
	c.gcfg.mu.Unlock() // never held across the fsync: share handlers read configs under group locks
	locked = false
	if err := <-durable; err != nil {
		return kafkaErr(kerr.KafkaStorageError, "group configs not durable: %v", err)
	}
	return nil
}

// describeGroupConfigs is DescribeConfigs for a GROUP resource: every
// group config, or those named (an unknown name is left out, as Kafka).
func (c *coordinator) describeGroupConfigs(group string, names []string, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	all := make([]string, 0, len(groupConfigDefs))
	for k := range groupConfigDefs {
		all = append(all, k)
	}
	sort.Strings(all)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, name := range all {
		if names != nil && !contains(names, name) {
			continue
		}
		v, set := c.groupConfigValue(group, name)
		cf := kmsg.NewDescribeConfigsResponseResourceConfig()
		cf.Name, cf.Value = name, kmsg.StringPtr(v)
		cf.Source = kmsg.ConfigSource(5) // DEFAULT_CONFIG
		if set {
			cf.Source = kmsg.ConfigSource(8) // GROUP_CONFIG
		}
		cf.ConfigType = kmsg.ConfigType(3) // INT
		if strings.HasSuffix(name, ".reset") || strings.HasSuffix(name, ".level") {
			cf.ConfigType = kmsg.ConfigType(2) // STRING
		}
		if docs {
			cf.Documentation = kmsg.StringPtr("group config " + name)
		}
		out = append(out, cf)
	}
	return out
}

// loadGroupConfig restores one journal entry.
func (c *coordinator) loadGroupConfig(e journalEntry) error {
	var m map[string]string
	if err := json.Unmarshal(e.val, &m); err != nil {
		return fmt.Errorf("coordinator journal: group configs %q: %w", e.key, err)
	}
	if c.gcfg.m == nil {
		c.gcfg.m = map[string]map[string]string{}
	}
	c.gcfg.m[e.key[len(groupConfigKeyPrefix):]] = m
	return nil
}
