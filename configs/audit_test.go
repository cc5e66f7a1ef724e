package configs

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestAuditDefaults(t *testing.T) {
	c, err := Parse(nil, "empty.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := c.Audit
	if a.Enabled() || a.Level != AuditOff || a.Mode != AuditBestEffort || a.Queue != DefaultAuditQueue || !a.Sink.Stdout() || !a.Filter.IsZero() {
		t.Fatalf("default audit = %+v", a)
	}
}

func TestAuditParse(t *testing.T) {
	const in = `
listeners:
  - name: outside
    listen: 127.0.0.1:9092
audit:
  level: full
  sink: { file: /tmp/tollgate-audit-test/audit.jsonl, max_size: 5MiB, keep: 3 }
  mode: strict
  queue: 500
  filter:
    listener: [outside]
    api: [produce, Fetch, "3", admin]
    api_not: [ApiVersions, Metadata, Heartbeat]
    topic: { prefix: orders. }
    client_id: [console-producer, other]
`
	c, err := Parse([]byte(in), "audit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Audit{
		Level: AuditFull,
		Sink:  AuditSink{File: "/tmp/tollgate-audit-test/audit.jsonl", MaxSize: 5 * MiB, Keep: 3},
		Mode:  AuditStrict,
		Queue: 500,
		Filter: AuditFilter{
			Listener: []string{"outside"},
			API:      []string{"produce", "Fetch", "3", "admin"},
			APINot:   []string{"ApiVersions", "Metadata", "Heartbeat"},
			Topic:    StringMatch{Prefix: Patterns{"orders."}},
			ClientID: StringMatch{Exact: Patterns{"console-producer", "other"}},
		},
	}
	if !reflect.DeepEqual(c.Audit, want) {
		t.Fatalf("got  %+v\nwant %+v", c.Audit, want)
	}
	if c.Audit.Sink.MaxSizeMiB() != 5 {
		t.Fatalf("MaxSizeMiB = %d", c.Audit.Sink.MaxSizeMiB())
	}
	assertRoundTrip(t, c)
}

func TestAuditSinkStdoutAndScalarMatch(t *testing.T) {
	c, err := Parse([]byte("audit:\n  level: summary\n  sink: stdout\n  filter: {client_id: console}\n"), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Audit.Sink.Stdout() || !reflect.DeepEqual(c.Audit.Filter.ClientID.Exact, Patterns{"console"}) {
		t.Fatalf("audit = %+v", c.Audit)
	}
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "sink: stdout") {
		t.Fatalf("effective YAML does not say sink: stdout:\n%s", out)
	}
	assertRoundTrip(t, c)
}

func TestAuditErrors(t *testing.T) {
	cases := []struct {
		name, yaml, pos, field, msg string
	}{
		{"level", "audit:\n  level: loud\n", "2:10", "audit.level", `"loud" is not an audit level`},
		{"mode", "audit:\n  mode: maybe\n", "2:9", "audit.mode", `"maybe" is not an audit mode`},
		{"queue", "audit:\n  queue: 0\n", "2:10", "audit.queue", "0 is out of range"},
		{"sink word", "audit:\n  sink: stderr\n", "2:9", "audit.sink", "want stdout or a mapping"},
		{"sink no file", "audit:\n  sink: {keep: 3}\n", "2:9", "audit.sink", "a file sink needs file"},
		{"sink small", "audit:\n  sink: {file: /tmp/x.jsonl, max_size: 10KiB}\n", "2:40", "audit.sink.max_size", "below 1MiB"},
		{"sink keep", "audit:\n  sink: {file: /tmp/x.jsonl, keep: -1}\n", "2:36", "audit.sink.keep", "negative"},
		{"sink dir", "audit:\n  sink: {file: /tmp}\n", "2:16", "audit.sink.file", "is a directory"},
		{"api name", "audit:\n  filter: {api: [Produce, Fletch]}\n", "2:27", "audit.filter.api[1]", `unknown API "Fletch"`},
		{"api_not name", "audit:\n  filter: {api_not: nope}\n", "2:21", "audit.filter.api_not[0]", `unknown API "nope"`},
		{"listener", "audit:\n  filter: {listener: [inside]}\n", "2:23", "audit.filter.listener[0]", `no listener is named "inside"`},
		{"topic at summary", "audit:\n  level: summary\n  filter: {topic: orders}\n", "3:19", "audit.filter.topic", "needs level full"},
		{"match key", "audit:\n  filter: {client_id: {exact: x, suffix: y}}\n", "2:34", "audit.filter.client_id", `unknown field "suffix"`},
		{"bad regex", "audit:\n  filter: {client_id: {regex: \"a(\"}}\n", "2:31", "audit.filter.client_id.regex[0]", "not a valid regular expression"},
		{"empty prefix", "audit:\n  filter: {topic: {prefix: [\"\"]}}\n", "2:29", "audit.filter.topic.prefix[0]", "an empty prefix"},
		{"unknown key", "audit:\n  levle: full\n", "2:3", "audit", `did you mean "level"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "a.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			errs := unjoin(err)
			if len(errs) != 1 {
				t.Fatalf("want 1 error, got %d: %v", len(errs), err)
			}
			var fe *FieldError
			if !errors.As(errs[0], &fe) {
				t.Fatalf("%T", errs[0])
			}
			if got := posOf(fe); got != tc.pos || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) {
				t.Fatalf("got %s %q %q; want %s %q containing %q", got, fe.Field, fe.Msg, tc.pos, tc.field, tc.msg)
			}
		})
	}
}

func posOf(fe *FieldError) string {
	if fe.Column > 0 {
		return fmt.Sprintf("%d:%d", fe.Line, fe.Column)
	}
	return fmt.Sprint(fe.Line)
}
