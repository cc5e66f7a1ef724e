package configs

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
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
//	    api: [Produce, Fetch]   # Kafka API names (any case) or numeric keys
//	    api_not: [ApiVersions, Metadata, Heartbeat]
//	    topic: { prefix: orders. }        # or a name, or a list of names; needs level full
//	    client_id: { prefix: console- }   # or a name, or a list of names
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

// AuditSink is where records go: stdout (File empty), or a file rotated
// by size. In YAML it is the word "stdout" or a mapping.
type AuditSink struct {
	File    string `yaml:"file"`
	MaxSize Size   `yaml:"max_size"`
	Keep    int    `yaml:"keep"`
}

// AuditFilter selects the records written. Every dimension that is set
// must match; a list matches when any entry does. Connection open and
// close records are selected by listener only.
type AuditFilter struct {
	Listener []string   `yaml:"listener,omitempty"`
	API      []string   `yaml:"api,omitempty"`
	APINot   []string   `yaml:"api_not,omitempty"`
	Topic    AuditMatch `yaml:"topic,omitempty"`
	ClientID AuditMatch `yaml:"client_id,omitempty"`
}

// AuditMatch matches a string by exact names or prefixes. In YAML it is a
// name, a list of names, or a mapping {names: [...], prefix: [...]} (a
// single prefix may be written as a plain string).
type AuditMatch struct {
	Names  []string `yaml:"names,omitempty"`
	Prefix []string `yaml:"prefix,omitempty"`
}

// IsZero reports whether the match is unset (matches everything).
func (m AuditMatch) IsZero() bool { return len(m.Names) == 0 && len(m.Prefix) == 0 }

// IsZero reports whether the filter selects every record.
func (f AuditFilter) IsZero() bool {
	return len(f.Listener) == 0 && len(f.API) == 0 && len(f.APINot) == 0 && f.Topic.IsZero() && f.ClientID.IsZero()
}

// Stdout reports whether records go to standard output.
func (s AuditSink) Stdout() bool { return s.File == "" }

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
		if s.File == "" {
			d.errorf(n, path, "a file sink needs file: PATH (or write sink: stdout)")
		}
	default:
		d.errorf(n, path, "want stdout or a mapping {file: PATH, max_size: SIZE, keep: N}, got %s", describe(n))
	}
}

// decodeYAML accepts a name, a list of names, or {names, prefix}.
func (m *AuditMatch) decodeYAML(d *decoder, n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.ScalarNode:
		m.Names = []string{n.Value}
		d.mark(path, n, true, n.Value)
	case yaml.SequenceNode:
		d.slice(n, path+".names", reflect.ValueOf(&m.Names).Elem())
		d.mark(path, n, false, "")
	case yaml.MappingNode:
		d.mapping(n, path, reflect.ValueOf(m).Elem())
	default:
		d.errorf(n, path, "want a name, a list of names or {names: [...], prefix: ...}, got %s", describe(n))
	}
}

// auditAPIKey resolves an API name (any case, as kmsg spells it: Produce,
// ApiVersions, InitProducerID) or a numeric key.
func auditAPIKey(name string) (int16, bool) {
	if k, err := strconv.ParseInt(name, 10, 16); err == nil {
		return int16(k), k >= 0
	}
	for k := int16(0); k < 256; k++ {
		if n := kmsg.NameForKey(k); n != "Unknown" && strings.EqualFold(n, name) {
			return k, true
		}
	}
	return 0, false
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
	if s := a.Sink; !s.Stdout() {
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

func (v *validator) auditFilter(p string, f *AuditFilter, level string) {
	names := map[string]bool{}
	for _, l := range v.c.Listeners {
		names[l.Name] = true
	}
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
			if _, ok := auditAPIKey(a); !ok {
				v.errf(fmt.Sprintf("%s.%s[%d]", p, list.name, i), a, "%q is not a Kafka API name or key", a)
			}
		}
	}
	if !f.Topic.IsZero() && level == AuditSummary {
		v.errf(p+".topic", nil, "a topic filter needs level full: summary records are built from the request header and carry no topics")
	}
	for _, m := range []struct {
		name string
		m    AuditMatch
	}{{"topic", f.Topic}, {"client_id", f.ClientID}} {
		for i, s := range m.m.Prefix {
			if s == "" {
				v.errf(fmt.Sprintf("%s.%s.prefix[%d]", p, m.name, i), s, "an empty prefix matches everything: leave the key out")
			}
		}
	}
}
