package configs

import (
	"slices"
	"testing"
)

// TestChanged: fields are named by their YAML paths; a default written
// out, the file a value came from and the line a rule starts on are no
// change; a section that appears, a list that grows and passthrough are
// named by their section.
func TestChanged(t *testing.T) {
	const rule = "policy:\n  rules:\n    - name: r\n      match: { api: [Produce] }\n      action: deny\n"
	base := "listeners:\n  - listen: 127.0.0.1:9092\n" + rule
	cases := []struct {
		name, next string
		want       []string
	}{
		{"same", base, nil},
		{"defaults written out", base + "limits: { max_connections: 10000 }\naudit: { level: off }\n", nil},
		{"rule moved down a line", "\n" + base, nil},
		{"listen and audit sink", "listeners:\n  - listen: 127.0.0.1:9093\n" + rule + "audit: { sink: { file: /tmp/a.jsonl, max_size: 2MiB } }\n",
			[]string{"listeners[0].listen", "audit.sink.file", "audit.sink.max_size"}},
		{"rule changed", "listeners:\n  - listen: 127.0.0.1:9092\npolicy:\n  rules:\n    - name: r\n      match: { api: [Fetch] }\n      action: deny\n",
			[]string{"policy.rules[0].match.api"}},
		{"limit", base + "limits: { max_connections: 5 }\n", []string{"limits.max_connections"}},
		{"listener added", "listeners:\n  - listen: 127.0.0.1:9092\n  - name: two\n    listen: 127.0.0.1:0\n" + rule, []string{"listeners"}},
		{"upstream appears", base + "upstream: { bootstrap: [k:9092] }\n", []string{"upstream"}},
	}
	a, err := Parse([]byte(base), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		b, err := Parse([]byte(c.next), "b.yaml")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := Changed(a, b); !slices.Equal(got, c.want) {
			t.Errorf("%s: Changed = %q, want %q", c.name, got, c.want)
		}
	}

	ua, errA := Decode([]byte("upstream:\n  bootstrap: [k:9092]\n  sasl: { mechanism: PLAIN, username: u, password_file: /dev/null }\n"), "a.yaml")
	ub, errB := Decode([]byte("upstream:\n  bootstrap: [k:9092]\n  sasl: passthrough\n"), "b.yaml")
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if got := Changed(ua, ub); !slices.Contains(got, "upstream.sasl") {
		t.Errorf("passthrough: Changed = %q, want upstream.sasl among them", got)
	}
}
