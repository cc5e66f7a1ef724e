package configs

import (
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The audit section:
//
//	audit:
//	  level: off                # off | summary | full
//	  sink: stdout              # or { file: PATH, max_size: 100MiB, keep: 10 }
//	  mode: best-effort         # best-effort | strict
//	  queue: 10000              # records buffered before best-effort drops
//	  filter:
//	    listener: [outside]     # listener names
//	    api: [Produce, Fetch]   # API names (any case), key numbers or groups, as in policy rules
//	    api_not: [ApiVersions, Metadata, Heartbeat]
//	    topic: { prefix: orders. }        # {exact, prefix, regex}, or a name or list of names; needs level full
//	    client_id: { prefix: console- }
//
// A summary record is built from the request header alone; a full record
// also carries topics, partitions, groups and error codes, which costs a
// body decode. The file sink rotates with lumberjack, which counts sizes in
// whole MiB: max_size is rounded down to a MiB multiple and must be at
// least 1MiB; keep is how many rotated files to keep (0 keeps all).

// Audit.Level values.
const (
	AuditOff     = "off"
	AuditSummary = "summary"
	AuditFull    = "full"
)

// Audit.Mode values.
const (
	// AuditBestEffort never blocks the data path: records that do not fit
	// in the queue, or that the sink fails to write, are dropped and
	// counted.
	AuditBestEffort = "best-effort"
	// AuditStrict blocks the data path on a full queue and refuses
	// requests while the sink is failing, so that no request is
	// forwarded unaudited.
	AuditStrict = "strict"
)

// Audit defaults.
const (
	DefaultAuditQueue   = 10000
	DefaultAuditMaxSize = 100 * MiB
	DefaultAuditKeep    = 10
	// MaxAuditQueue bounds the queue: each slot holds a record pointer,
	// and a queue this deep is already minutes of traffic.
	MaxAuditQueue = 10_000_000
)

// Audit configures the audit trail: one JSON record per request and per
// connection open and close.
type Audit struct {
	Level  string      `yaml:"level"`
	Sink   AuditSink   `yaml:"sink"`
	Mode   string      `yaml:"mode"`
	Queue  int         `yaml:"queue"`
	Filter AuditFilter `yaml:"filter,omitempty"`
}

// AuditSink is where records go: stdout (File and Kafka empty), a file
// rotated by size, or a Kafka topic. In YAML it is the word "stdout" or
// a mapping.
type AuditSink struct {
	File    string      `yaml:"file"`
	MaxSize Size        `yaml:"max_size"`
	Keep    int         `yaml:"keep"`
	Kafka   *AuditKafka `yaml:"kafka,omitempty"`
}

// AuditKafka produces each record to a topic, so the trail can be read
// with Kafka tools.
type AuditKafka struct {
	Topic string `yaml:"topic"`
	// Brokers is the cluster to write to; empty in upstream mode means
	// the upstream itself, as the gateway's own identity (upstream.tls and
	// upstream.sasl). The built-in broker needs a cluster named here.
	Brokers []string `yaml:"brokers,omitempty"`
}

// AuditFilter selects the records written. Every dimension that is set
// must match; a list matches when any entry does. Connection open and
// close records are selected by listener only. API entries and string
// matches use the same vocabulary as policy rules: API names, key numbers
// or groups (admin, produce, consume, group, transaction; see
// ResolveAPI), and StringMatch (exact, prefix, regex; a plain string or
// list is shorthand for exact).
type AuditFilter struct {
	Listener []string    `yaml:"listener,omitempty"`
	API      []string    `yaml:"api,omitempty"`
	APINot   []string    `yaml:"api_not,omitempty"`
	Topic    StringMatch `yaml:"topic,omitempty"`
	ClientID StringMatch `yaml:"client_id,omitempty"`
}

// IsZero reports whether the filter selects every record.
func (f AuditFilter) IsZero() bool {
	return len(f.Listener) == 0 && len(f.API) == 0 && len(f.APINot) == 0 && stringMatchEmpty(&f.Topic) && stringMatchEmpty(&f.ClientID)
}

func stringMatchEmpty(m *StringMatch) bool { return len(m.Exact)+len(m.Prefix)+len(m.Regex) == 0 }

// Stdout reports whether records go to standard output.
func (s AuditSink) Stdout() bool { return s.File == "" && s.Kafka == nil }

// MaxSizeMiB is MaxSize in the whole MiB lumberjack counts in (at least 1).
func (s AuditSink) MaxSizeMiB() int { return max(int(s.MaxSize/MiB), 1) }

func defaultAudit() Audit {
	return Audit{
		Level: AuditOff,
		Sink:  AuditSink{MaxSize: DefaultAuditMaxSize, Keep: DefaultAuditKeep},
		Mode:  AuditBestEffort,
		Queue: DefaultAuditQueue,
	}
}

// Enabled reports whether records are written at all.
func (a Audit) Enabled() bool { return a.Level != AuditOff && a.Level != "" }

// MarshalYAML writes "stdout" for the stdout sink, so the effective
// configuration parses back to the same thing.
func (s AuditSink) MarshalYAML() (any, error) {
	if s.Stdout() {
		return "stdout", nil
	}
	type plain AuditSink // no MarshalYAML: avoids recursion
	return plain(s), nil
}

// decodeYAML accepts "stdout" or a mapping with a file.
func (s *AuditSink) decodeYAML(d *decoder, n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.ScalarNode:
		if strings.EqualFold(n.Value, "stdout") {
			s.File = ""
			d.mark(path, n, true, "stdout")
			return
		}
		d.errorf(n, path, "want stdout or a mapping {file: PATH, max_size: SIZE, keep: N}, got %s", describe(n))
	case yaml.MappingNode:
		d.mapping(n, path, reflect.ValueOf(s).Elem())
		switch {
		case s.File == "" && s.Kafka == nil:
			d.errorf(n, path, "a file sink needs file: PATH (or write sink: stdout, or sink: {kafka: {topic: T}})")
		case s.File != "" && s.Kafka != nil:
			d.errorf(n, path, "one sink: file or kafka, not both")
		}
	default:
		d.errorf(n, path, "want stdout or a mapping {file: PATH, max_size: SIZE, keep: N}, got %s", describe(n))
	}
}

func (v *validator) audit() {
	a := &v.c.Audit
	const p = "audit"
	switch a.Level {
	case AuditOff, AuditSummary, AuditFull:
	default:
		v.errf(p+".level", a.Level, "%q is not an audit level: want off, summary or full", a.Level)
	}
	switch a.Mode {
	case AuditBestEffort, AuditStrict:
	default:
		v.errf(p+".mode", a.Mode, "%q is not an audit mode: want best-effort or strict", a.Mode)
	}
	if a.Queue < 1 || a.Queue > MaxAuditQueue {
		v.errf(p+".queue", a.Queue, "%d is out of range 1-%d", a.Queue, MaxAuditQueue)
	}
	if k := a.Sink.Kafka; k != nil {
		v.auditKafka(p+".sink.kafka", k)
	}
	if s := a.Sink; s.File != "" {
		if s.MaxSize < MiB {
			v.errf(p+".sink.max_size", s.MaxSize, "%s is below 1MiB, the smallest rotation size", s.MaxSize)
		}
		if s.Keep < 0 {
			v.errf(p+".sink.keep", s.Keep, "%d is negative (0 keeps every rotated file)", s.Keep)
		}
		// The file itself may not exist yet, and an unwritable path is a
		// run-time sink failure (best-effort keeps serving); only a
		// directory is certainly wrong.
		if fi, err := os.Stat(s.File); err == nil && fi.IsDir() {
			v.errf(p+".sink.file", s.File, "%s is a directory, want a file path", s.File)
		}
	}
	v.auditFilter(p+".filter", &a.Filter, a.Level)
}

func (v *validator) auditKafka(p string, k *AuditKafka) {
	if !validTopicName(k.Topic) {
		v.errf(p+".topic", k.Topic, "want a Kafka topic name: 1-249 of a-z A-Z 0-9 . _ - (not . or ..)")
	}
	if len(k.Brokers) == 0 && !v.c.UpstreamMode() {
		v.errf(p+".brokers", "", "the built-in broker cannot be the audit sink of its own gateway (its writes would be audited): name a cluster")
	}
	for i, b := range k.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			v.errf(fmt.Sprintf("%s.brokers[%d]", p, i), b, "want host:port: %s", err)
		}
	}
}

func (v *validator) auditFilter(p string, f *AuditFilter, level string) {
	names := v.c.listenerNames()
	for i, l := range f.Listener {
		if !names[l] {
			v.errf(fmt.Sprintf("%s.listener[%d]", p, i), l, "no listener is named %q", l)
		}
	}
	for _, list := range []struct {
		name  string
		items []string
	}{{"api", f.API}, {"api_not", f.APINot}} {
		for i, a := range list.items {
			if _, err := ResolveAPI(a); err != nil {
				v.errf(fmt.Sprintf("%s.%s[%d]", p, list.name, i), a, "%s", err)
			}
		}
	}
	if !stringMatchEmpty(&f.Topic) {
		if level == AuditSummary {
			v.errf(p+".topic", nil, "a topic filter needs level full: summary records are built from the request header and carry no topics")
		}
		v.stringMatch(p+".topic", &f.Topic)
	}
	if !stringMatchEmpty(&f.ClientID) {
		v.stringMatch(p+".client_id", &f.ClientID)
	}
}

// validTopicName applies Kafka's topic name rules (Topic.validate in
// Kafka's clients module: length, legal characters, not "." or "..").
func validTopicName(t string) bool {
	if t == "" || len(t) > 249 || t == "." || t == ".." {
		return false
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
