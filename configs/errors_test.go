package configs

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// up makes a snippet run in upstream mode, where broker port ranges span
// AssumedNodeSpan node ids. It is appended, so it does not move lines.
const up = "upstream: {bootstrap: [k:9092]}\n"

// TestParseErrors checks, for each way a file can be wrong, that Parse
// reports exactly one error, at the right line and column, naming the
// right field, with a message that says what is wrong.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		pos   string // "line:col" or "line" ("" = no position)
		field string // "" = whole file
		msg   string
	}{
		// listeners
		{"listen no port", "listeners:\n  - listen: nope\n", "2:13", "listeners[0].listen", `"nope" is not a host:port bind address: missing port`},
		{"listen port range", "listeners:\n  - listen: 127.0.0.1:70000\n", "2:13", "listeners[0].listen", "port 70000 is out of range 0-65535"},
		{"listen port not number", "listeners:\n  - listen: 127.0.0.1:http\n", "2:13", "listeners[0].listen", `port "http" is not a number`},
		{"listen bad host", "listeners:\n  - listen: bad_host!:9092\n", "2:13", "listeners[0].listen", `invalid host "bad_host!"`},
		{"advertise wildcard", "listeners:\n  - advertise: 0.0.0.0\n", "2:16", "listeners[0].advertise", "clients cannot connect to a wildcard"},
		{"advertise port 0", "listeners:\n  - advertise: gw:0\n", "2:16", "listeners[0].advertise", "port 0 is out of range 1-65535"},
		{"advertise no host", "listeners:\n  - advertise: \":9092\"\n", "2:16", "listeners[0].advertise", "has no host"},
		// a port in advertise (issue 19): what port-per-broker over an upstream cannot honour
		{"advertise port, kernel-chosen listen port", "listeners:\n  - listen: 127.0.0.1:0\n    advertise: gw:31000\n" + up, "3:16", "listeners[0].advertise", "the listen port is 0 (kernel-chosen)"},
		{"advertise port, kernel-chosen broker ports", "listeners:\n  - advertise: gw:31000\n    broker_port_base: 0\n" + up, "2:16", "listeners[0].advertise", "broker_port_base is 0"},
		{"advertise port, brokers shifted out of range", "listeners:\n  - advertise: gw:65535\n" + up, "2:16", "listeners[0].advertise", "advertises node 0 at port 65536 (broker_port_base 9093 shifted by 56443), out of range 1-65535"},
		{"advertised ports collide", "listeners:\n  - name: a\n    advertise: gw:31000\n  - name: b\n    listen: 127.0.0.1:9500\n    advertise: GW:31100\n" + up, "6:16", "listeners[1].advertise",
			"listeners[1] advertised bootstrap GW:31100 collides with listeners[0] advertised broker ports 31001-31100 (node ids 0-99) on gw (line 3)"},
		{"brokers sni without section", "listeners:\n  - brokers: sni\n", "2:5", "listeners[0].sni", `needs an sni section`},
		{"brokers single-port built-in", "listeners:\n  - brokers: single-port\n", "2:14", "listeners[0].brokers", `routes requests over an upstream cluster`},
		{"brokers single-port passthrough", "listeners:\n  - brokers: single-port\nupstream:\n  bootstrap: k:9092\n  sasl: passthrough\n", "2:14", "listeners[0].brokers", `cannot relay the client's SASL exchange`},
		{"brokers single-port negative node", "listeners:\n  - brokers: single-port\n    virtual_node: -2\nupstream:\n  bootstrap: k:9092\n", "3:19", "listeners[0].virtual_node", `must be 0 or more`},
		{"brokers single-port port base", "listeners:\n  - brokers: single-port\n    broker_port_base: 9200\nupstream:\n  bootstrap: k:9092\n", "3:23", "listeners[0].broker_port_base", `remove broker_port_base`},
		{"fetch_ahead on port-per-broker", "listeners:\n  - brokers: port-per-broker\n    fetch_ahead: false\nupstream:\n  bootstrap: k:9092\n", "3:18", "listeners[0].fetch_ahead", `only brokers: single-port fetches ahead`},
		{"brokers unknown", "listeners:\n  - brokers: many\n", "2:14", "listeners[0].brokers", `"many" is not a broker addressing mode`},
		{"base range", "listeners:\n  - broker_port_base: 70000\n", "2:23", "listeners[0].broker_port_base", "70000 is out of range 0-65535"},
		{"base negative", "listeners:\n  - broker_port_base: -1\n", "2:23", "listeners[0].broker_port_base", "-1 is out of range"},
		{"base not int", "listeners:\n  - broker_port_base: x\n", "2:23", "listeners[0].broker_port_base", `want an integer, got string "x"`},
		{"default base overflow", "listeners:\n  - listen: 127.0.0.1:65535\n", "2:13", "listeners[0].listen", "65536: set broker_port_base"},
		{"second listener unnamed", "listeners:\n  - listen: 127.0.0.1:9092\n  - listen: 127.0.0.1:9192\n", "3:5", "listeners[1].name", "a name is required"},
		{"explicit empty name", "listeners:\n  - listen: 127.0.0.1:9092\n  - name: \"\"\n    listen: 127.0.0.1:9192\n", "3:11", "listeners[1].name", "a name is required"},
		{"bad name", "listeners:\n  - name: a b\n", "2:11", "listeners[0].name", `"a b" is not a valid name`},
		{"duplicate name", "listeners:\n  - name: a\n  - name: a\n    listen: 127.0.0.1:9192\n", "3:11", "listeners[1].name", `duplicate listener name "a": listeners[0] (line 2)`},
		{"duplicate bind", "listeners:\n  - name: a\n  - name: b\n    listen: 127.0.0.1:9092\n    broker_port_base: 9300\n", "4:13", "listeners[1].listen", "listeners[1] bootstrap port 127.0.0.1:9092 collides with listeners[0] bootstrap port 127.0.0.1:9092 (line 2)"},
		{"wildcard bind", "listeners:\n  - name: a\n    listen: 0.0.0.0:9092\n  - name: b\n    listen: 10.1.1.1:9092\n    broker_port_base: 9300\n", "5:13", "listeners[1].listen", "takes the port on every address"},
		{"localhost is loopback", "listeners:\n  - name: a\n  - name: b\n    listen: localhost:9092\n    broker_port_base: 9300\n", "4:13", "listeners[1].listen", "collides with listeners[0] bootstrap port"},
		{"broker ranges overlap (upstream)", "listeners:\n  - name: a\n    broker_port_base: 9300\n  - name: b\n    listen: 127.0.0.1:9192\n    broker_port_base: 9350\n" + up, "6:23", "listeners[1].broker_port_base", "broker ports 9350-9449 (node ids 0-99) on 127.0.0.1 collides with listeners[0] broker ports 9300-9399"},
		{"own bootstrap in own range (upstream)", "listeners:\n  - listen: 127.0.0.1:9150\n    broker_port_base: 9100\n" + up, "3:23", "listeners[0].broker_port_base", "collides with listeners[0] bootstrap port 127.0.0.1:9150 (line 2)"},
		{"default base meets bootstrap (upstream)", "listeners:\n  - name: a\n  - name: b\n    listen: 127.0.0.1:9100\n    broker_port_base: 9300\n" + up, "4:13", "listeners[1].listen", "listeners[1] bootstrap port 127.0.0.1:9100 collides with listeners[0] broker ports 9093-9192"},
		{"admin on bootstrap port", "admin:\n  listen: 127.0.0.1:9092\n", "2:11", "admin.listen", "the admin port 127.0.0.1:9092 collides with listeners[0] bootstrap port"},
		{"admin on node 0 port", "admin:\n  listen: 127.0.0.1:9093\n" + up, "2:11", "admin.listen", "collides with listeners[0] broker ports 9093-9192"},
		{"admin on node 6 port", "admin:\n  listen: 127.0.0.1:9099\n" + up, "2:11", "admin.listen", "the admin port 127.0.0.1:9099 collides with listeners[0] broker ports 9093-9192"},
		{"admin in a second listener's range", "listeners:\n  - name: a\n  - name: b\n    listen: 127.0.0.1:9300\n    broker_port_base: 9400\nadmin:\n  listen: 127.0.0.1:9450\n" + up, "7:11", "admin.listen", "collides with listeners[1] broker ports 9400-9499"},
		{"empty listener list", "listeners: []\n", "1:12", "listeners", "at least one listener is required"},
		{"empty listener entry", "listeners:\n  -\n", "2:4", "listeners[0]", "empty list entry"},
		{"listeners not a list", "listeners: 127.0.0.1:9092\n", "1:12", "listeners", `want a list, got string "127.0.0.1:9092"`},
		{"listener not a mapping", "listeners: [a]\n", "1:13", "listeners[0]", `want a mapping of name, listen, advertise, brokers, ..., got string "a"`},

		// upstream
		{"bootstrap no port", "upstream:\n  bootstrap: [kafka]\n", "2:15", "upstream.bootstrap[0]", `"kafka" is not a host:port broker address: missing port`},
		{"bootstrap port 0", "upstream:\n  bootstrap: [k:9092, kafka:0]\n", "2:23", "upstream.bootstrap[1]", "port 0 is out of range 1-65535"},
		{"bootstrap no host", "upstream:\n  bootstrap:\n    - \":9092\"\n", "3:7", "upstream.bootstrap[0]", "has no host"},
		{"bootstrap string form", "upstream:\n  bootstrap: a:9092, b\n", "2:14", "upstream.bootstrap[1]", `"b" is not a host:port`},
		{"dial timeout zero", "upstream:\n  bootstrap: [k:9092]\n  dial_timeout: 0s\n", "3:17", "upstream.dial_timeout", "want a duration above zero"},
		{"metadata refresh negative", "upstream:\n  metadata_refresh: -1s\n", "2:21", "upstream.metadata_refresh", "-1s: want a duration above zero"},
		{"tls missing ca", "upstream:\n  tls: {ca: /nonexistent/ca.pem}\n", "2:13", "upstream.tls.ca", "/nonexistent/ca.pem: no such file or directory"},
		{"tls cert without key", "upstream:\n  tls:\n    cert: /x.pem\n", "3:5", "upstream.tls.key", "cert is set but key is not"},
		{"tls key without cert", "upstream:\n  tls:\n    key: /x.pem\n", "3:5", "upstream.tls.cert", "key is set but cert is not"},
		{"tls is a device", "upstream:\n  tls: {ca: /dev/zero}\n", "2:13", "upstream.tls.ca", "/dev/zero is not a regular file"},
		{"tls is a dir", "upstream:\n  tls: {ca: /}\n", "2:13", "upstream.tls.ca", "/ is a directory"},
		{"tls unknown field", "upstream:\n  tls: {cafile: /x}\n", "2:9", "upstream.tls", `unknown field "cafile" (known: ca, cert, key, server_name, insecure_skip_verify)`},
		{"upstream sasl word", "upstream:\n  sasl: pass-through\n", "2:9", "upstream.sasl", `want passthrough or a mapping`},
		{"upstream not a mapping", "upstream: [k:9092]\n", "1:11", "upstream", "want a mapping of bootstrap, tls, sasl, dial_timeout, ..., got a list"},

		// broker
		{"fsync enum", "broker:\n  fsync: sometimes\n", "2:10", "broker.fsync", `"sometimes": want always, interval or never`},
		{"fsync interval zero", "broker:\n  fsync_interval: 0s\n", "2:19", "broker.fsync_interval", "want a duration above zero"},
		{"data dir empty", "broker:\n  data_dir: \"\"\n", "2:13", "broker.data_dir", "must not be empty"},
		{"cleaner buffer tiny", "broker:\n  cleaner_dedupe_buffer: 1KiB\n", "2:26", "broker.cleaner_dedupe_buffer", "is below 1MiB"},
		{"cleaner backoff zero", "broker:\n  cleaner_backoff: 0s\n", "2:20", "broker.cleaner_backoff", "want a duration above zero"},
		{"defaults dirty ratio", "broker:\n  defaults:\n    min.cleanable.dirty.ratio: 2\n", "3:32", "broker.defaults.min.cleanable.dirty.ratio", "not a ratio from 0 to 1"},
		{"broker node id negative", "broker:\n  node_id: -1\n", "2:12", "broker.node_id", "must be 0 or more"},
		{"auto create not bool", "broker:\n  auto_create_topics: yes\n", "2:23", "broker.auto_create_topics", `want true or false, got string "yes"`},
		{"defaults unknown", "broker:\n  defaults:\n    retention.mss: 1\n", "3:20", "broker.defaults.retention.mss", `unknown topic config "retention.mss" (did you mean "retention.ms"?)`},
		{"defaults segment too small", "broker:\n  defaults:\n    segment.bytes: 10\n", "3:20", "broker.defaults.segment.bytes", "10 is out of range 14-2147483647"},
		{"defaults segment too big", "broker:\n  defaults:\n    segment.bytes: 4GiB\n", "3:20", "broker.defaults.segment.bytes", "4GiB is out of range"},
		{"defaults retention below -1", "broker:\n  defaults:\n    retention.ms: -2\n", "3:19", "broker.defaults.retention.ms", "-1 means keep forever"},
		{"defaults retention bad", "broker:\n  defaults:\n    retention.ms: 5x\n", "3:19", "broker.defaults.retention.ms", `"5x" is not milliseconds`},
		{"defaults partitions", "broker:\n  defaults:\n    num.partitions: 0\n", "3:21", "broker.defaults.num.partitions", "0 is out of range 1-"},
		{"defaults partitions text", "broker:\n  defaults:\n    num.partitions: two\n", "3:21", "broker.defaults.num.partitions", `"two" is not an integer`},
		{"defaults cleanup", "broker:\n  defaults:\n    cleanup.policy: shred\n", "3:21", "broker.defaults.cleanup.policy", `"shred" is not one of delete, compact`},
		{"defaults cleanup list", "broker:\n  defaults:\n    cleanup.policy: [delete, shred]\n", "3:21", "broker.defaults.cleanup.policy", `"shred" is not one of`},
		{"defaults timestamp type", "broker:\n  defaults:\n    message.timestamp.type: Now\n", "3:29", "broker.defaults.message.timestamp.type", `"Now" is not one of CreateTime, LogAppendTime`},
		{"defaults nested", "broker:\n  defaults:\n    retention.ms: {a: 1}\n", "3:19", "broker.defaults.retention.ms", "want a value, got a mapping"},
		{"defaults not a mapping", "broker:\n  defaults: [a]\n", "2:13", "broker.defaults", "want a mapping of names to values"},

		// admin
		{"admin empty", "admin:\n  listen: \"\"\n", "2:11", "admin.listen", `empty: give host:port, or "off"`},
		{"admin no port", "admin:\n  listen: localhost\n", "2:11", "admin.listen", "missing port"},

		// limits
		{"max frame zero", "limits:\n  max_frame_bytes: 0\n", "2:20", "limits.max_frame_bytes", "0 is out of range 1-2147483647"},
		{"max frame too big", "limits:\n  max_frame_bytes: 4GiB\n", "2:20", "limits.max_frame_bytes", "4GiB is out of range 1-2147483647 (a Kafka frame size is an int32)"},
		{"max frame negative", "limits:\n  max_frame_bytes: -1\n", "2:20", "limits.max_frame_bytes", "size -1 is negative"},
		{"max frame unit", "limits:\n  max_frame_bytes: 10k\n", "2:20", "limits.max_frame_bytes", `"10k" has an ambiguous unit`},
		{"max frame list", "limits:\n  max_frame_bytes: [1]\n", "2:20", "limits.max_frame_bytes", "got a list"},
		{"preauth above max", "limits:\n  max_frame_bytes: 1MiB\n  max_preauth_frame_bytes: 2MiB\n", "3:28", "limits.max_preauth_frame_bytes", "2MiB is larger than max_frame_bytes 1MiB"},
		{"preauth zero", "limits:\n  max_preauth_frame_bytes: 0\n", "2:28", "limits.max_preauth_frame_bytes", "want a size above zero"},
		{"max connections zero", "limits:\n  max_connections: 0\n", "2:20", "limits.max_connections", "0: want at least 1"},
		{"congestion control upper case", "limits:\n  tcp_congestion_control: CUBIC\n", "2:27", "limits.tcp_congestion_control", `"CUBIC": want the name of a TCP congestion control algorithm`},
		{"congestion control too long", "limits:\n  tcp_congestion_control: abcdefghijklmnop\n", "2:27", "limits.tcp_congestion_control", "want the name of a TCP congestion control algorithm"},
		{"max connections text", "limits:\n  max_connections: abc\n", "2:20", "limits.max_connections", `want an integer, got string "abc"`},
		{"max connections float", "limits:\n  max_connections: 1.5\n", "2:20", "limits.max_connections", `want an integer, got number "1.5"`},
		{"max connections overflow", "limits:\n  max_connections: 99999999999999999999\n", "2:20", "limits.max_connections", "want an integer"},
		{"per address negative", "limits:\n  max_connections_per_address: -1\n", "2:32", "limits.max_connections_per_address", "want 0 (no per-address cap) or more"},
		{"in flight zero", "limits:\n  max_in_flight: 0\n", "2:18", "limits.max_in_flight", "want at least 1"},
		{"idle timeout no unit", "limits:\n  idle_timeout: 600\n", "2:17", "limits.idle_timeout", "600 has no unit: write a duration such as 600s or 600ms"},
		{"frame timeout zero", "limits:\n  frame_timeout: 0s\n", "2:18", "limits.frame_timeout", "want a duration above zero"},
		{"drain timeout text", "limits:\n  drain_timeout: soon\n", "2:18", "limits.drain_timeout", `"soon" is not a duration`},

		// log
		{"log level", "log:\n  level: verbose\n", "2:10", "log.level", `"verbose": want debug, info, warn or error`},
		{"log format", "log:\n  format: xml\n", "2:11", "log.format", `"xml": want json or text`},

		// structure
		{"unknown top-level", "listners: []\n", "1:1", "", `unknown field "listners" (did you mean "listeners"?)`},
		{"unknown top-level far", "zzz: 1\n", "1:1", "", "(known: listeners, upstream, broker, admin, limits, log"},
		{"unknown nested", "limits:\n  max_conections: 5\n", "2:3", "limits", `unknown field "max_conections" (did you mean "max_connections"?)`},
		{"policy default", "policy: {default: maybe}\n", "1:19", "policy.default", `"maybe": want allow or deny`},
		{"audit level", "audit: {level: verbose}\n", "1:16", "audit.level", `"verbose" is not an audit level`},
		{"listener tls without key", "listeners:\n  - tls: {cert: a}\n", "2:10", "listeners[0].tls.key", "a listener key is required"},
		{"duplicate key", "log:\n  level: info\n  level: debug\n", "3:3", "log", `duplicate key "level" (first at line 2)`},
		{"root not a mapping", "hello\n", "1:1", "", `want a mapping of listeners, upstream, broker, admin, ..., got string "hello"`},
		{"section not a mapping", "limits: 5\n", "1:9", "limits", "want a mapping"},
		{"complex key", "log:\n  ? [a]\n  : b\n", "2:5", "log", "a key must be a plain name, got a list"},
		{"string field given a list", "log:\n  level: [info]\n", "2:10", "log.level", "want a string, got a list"},
		{"merge of a scalar", "log:\n  <<: 5\n", "2:7", "log", "merge key (<<) wants a mapping"},
		// The yaml package reports the line where the construct it was
		// parsing began (here the mapping on line 2) and no column;
		// syntaxError finds the problem's own line and column.
		{"syntax error", "log:\n  level: info\n bad\n", "3:2", "", "YAML syntax: did not find expected key"},
		{"tab indentation", "log:\n\tlevel: info\n", "2:1", "", "YAML syntax:"},
		{"unclosed quote", "listeners:\n  - name: a\n    listen: \"127.0.0.1:0\nadmin: {}\n", "3:13", "", "YAML syntax: found unexpected end of stream"},
		{"over-indented key", "log:\n  level: info\n   format: json\n", "3:10", "", "YAML syntax: mapping values are not allowed"},
		{"unclosed flow list", "policy:\n  rules:\n    - {name: a, match: {api: [Produce}, action: deny}\n", "3:31", "", "did not find expected ',' or ']'"},
		{"second document", "log: {level: info}\n---\nlimits: {}\n", "2:1", "", "a second YAML document"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "t.yaml")
			if err == nil {
				t.Fatalf("Parse succeeded; want an error at %s", c.pos)
			}
			errs := unjoin(err)
			if len(errs) != 1 {
				t.Errorf("got %d errors, want 1:\n%v", len(errs), err)
			}
			prefix := "t.yaml: "
			if c.pos != "" {
				prefix = "t.yaml:" + c.pos + ": "
			}
			if c.field != "" {
				prefix += c.field + ": "
			}
			got := errs[0].Error()
			if !strings.HasPrefix(got, prefix) || !strings.Contains(got, c.msg) {
				t.Errorf("error:\n  %s\nwant prefix %q and %q", got, prefix, c.msg)
			}
			var fe *FieldError
			if !errors.As(errs[0], &fe) || fe.Field != c.field {
				t.Errorf("error is %T with field %q; want *FieldError for %q", errs[0], fieldOf(fe), c.field)
			}
		})
	}
}

func fieldOf(fe *FieldError) string {
	if fe == nil {
		return "<nil>"
	}
	return fe.Field
}

// All problems in a file come out together, decoding and validation alike.
func TestParseCollectsAllErrors(t *testing.T) {
	src := `listeners:
  - listen: 127.0.0.1:99999
    bogus: 1
broker:
  fsync: sometimes
limits:
  max_connections: abc
  idle_timeout: 5
log:
  level: loud
`
	_, err := Parse([]byte(src), "all.yaml")
	want := []string{
		"all.yaml:3:5: listeners[0]: unknown field \"bogus\"",
		"all.yaml:7:20: limits.max_connections: want an integer",
		"all.yaml:8:17: limits.idle_timeout: 5 has no unit",
		"all.yaml:2:13: listeners[0].listen: \"127.0.0.1:99999\" is not a host:port bind address",
		"all.yaml:5:10: broker.fsync: \"sometimes\"",
		"all.yaml:10:10: log.level: \"loud\"",
	}
	errs := unjoin(err)
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q; want prefix %q", i, errs[i], w)
		}
	}
}

func TestTooManyErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("log:\n")
	for i := range maxErrors + 20 {
		fmt.Fprintf(&b, "  k%d: 1\n", i)
	}
	_, err := Parse([]byte(b.String()), "many.yaml")
	errs := unjoin(err)
	if len(errs) != maxErrors+1 {
		t.Fatalf("got %d errors, want %d", len(errs), maxErrors+1)
	}
	if last := errs[len(errs)-1].Error(); last != "many.yaml: 20 more errors not shown" {
		t.Errorf("last error = %q", last)
	}
}

// Aliases and merges that expand exponentially stop at the node budget
// (or the merge depth limit) with one error instead of consuming the machine.
func TestAliasBomb(t *testing.T) {
	for _, c := range []struct {
		levels, fanout int
		msg            string
	}{
		{8, 9, "the document expands to more than 100000 nodes"},
		{30, 2, "merge keys (<<) nested more than 10 deep"},
	} {
		var b strings.Builder
		b.WriteString("x-a0: &a0 {level: info}\n")
		for i := 1; i < c.levels; i++ {
			fmt.Fprintf(&b, "x-a%d: &a%d {<<: [", i, i)
			for j := range c.fanout {
				if j > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "*a%d", i-1)
			}
			b.WriteString("]}\n")
		}
		fmt.Fprintf(&b, "log: *a%d\n", c.levels-1)
		_, err := Parse([]byte(b.String()), "bomb.yaml")
		if errs := unjoin(err); len(errs) != 1 || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%d levels of %d: err = %v; want one error with %q", c.levels, c.fanout, err, c.msg)
		}
	}
}
