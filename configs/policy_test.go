package configs

import (
	"errors"
	"strings"
	"testing"
)

// TestPolicyErrors: every policy validation error names the field, line
// and column.
func TestPolicyErrors(t *testing.T) {
	rule := func(body string) string { return "policy:\n  rules:\n    - " + body + "\n" }
	cases := []struct {
		name, yaml, pos, field, msg string
	}{
		{"bad regex", rule("{match: {client_id: {regex: \"a(\"}}, action: deny}"), "3:35", "policy.rules[0].match.client_id.regex[0]", `"a(" is not a valid regular expression: missing closing )`},
		{"unknown api", rule("{match: {api: [Produse]}, action: deny}"), "3:22", "policy.rules[0].match.api[0]", `unknown API "Produse" (did you mean "Produce"?)`},
		{"api number", rule("{match: {api: [400]}, action: deny}"), "3:22", "policy.rules[0].match.api[0]", "API key 400 is out of range"},
		{"negative rate", rule("{match: {}, rate: {requests_per_second: -5}}"), "3:47", "policy.rules[0].rate.requests_per_second", "-5 is negative"},
		{"negative bytes", rule("{match: {}, rate: {produce_bytes_per_second: -5}}"), "3:52", "policy.rules[0].rate.produce_bytes_per_second", "size -5 is negative"},
		{"no rate", rule("{match: {}, rate: {per: shared}}"), "3:25", "policy.rules[0].rate", "no rate"},
		{"per", rule("{match: {}, rate: {requests_per_second: 1, per: user}}"), "3:55", "policy.rules[0].rate.per", `"user": want client_id, principal, address or shared`},
		{"ambiguous burst", rule("{match: {}, rate: {requests_per_second: 1, produce_bytes_per_second: 1MiB, burst: 2MiB}}"), "3:89", "policy.rules[0].rate.burst", "burst is ambiguous"},
		{"fetch rate on topics", rule("{match: {topic: t}, rate: {fetch_bytes_per_second: 1MiB}}"), "3:58", "policy.rules[0].rate.fetch_bytes_per_second", "fetch bytes are counted when the response arrives"},
		{"no action", rule("{match: {}}"), "3:7", "policy.rules[0]", "the rule has no action"},
		{"bad action", rule("{match: {}, action: maybe}"), "3:27", "policy.rules[0].action", `"maybe": want allow or deny`},
		{"deny with rate", rule("{match: {}, action: deny, rate: {requests_per_second: 1}}"), "3:39", "policy.rules[0].rate", "a deny rule cannot have a rate"},
		{"bad cidr", rule("{match: {address: 10.0.0.0/33}, action: deny}"), "3:25", "policy.rules[0].match.address[0]", `"10.0.0.0/33" is not a CIDR`},
		{"unknown listener", rule("{match: {listener: nope}, action: deny}"), "3:26", "policy.rules[0].match.listener[0]", `no listener is named "nope"`},
		{"versions", rule("{match: {api_versions: {min: 5, max: 2}}, action: deny}"), "3:30", "policy.rules[0].match.api_versions", "min 5 is above max 2"},
		{"empty match", rule("{match: {topic: {}}, action: deny}"), "3:23", "policy.rules[0].match.topic", "empty: give exact, prefix or regex"},
		{"empty prefix", rule("{match: {topic: {prefix: \"\"}}, action: deny}"), "3:32", "policy.rules[0].match.topic.prefix[0]", "an empty prefix matches everything"},
		{"duplicate name", "policy:\n  rules:\n    - {name: a, match: {}, action: allow}\n    - {name: a, match: {}, action: deny}\n", "4:14", "policy.rules[1].name", `duplicate rule name "a": policy.rules[0] (line 3)`},
		{"unknown field", rule("{match: {topics: t}, action: deny}"), "3:16", "policy.rules[0].match", `unknown field "topics" (did you mean "topic"?)`},
		{"hide unknown listener", "policy:\n  hide_denied_apis: [x]\n", "2:22", "policy.hide_denied_apis[0]", `no listener is named "x"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "p.yaml")
			if err == nil {
				t.Fatalf("no error for\n%s", c.yaml)
			}
			// A value the decoder refuses (a negative size) leaves the
			// field unset, so a second error may follow; the first is
			// the one that names the problem.
			errs := unjoin(err)
			if len(errs) > 2 {
				t.Fatalf("%d errors, want 1: %v", len(errs), err)
			}
			var fe *FieldError
			if !errors.As(errs[0], &fe) {
				t.Fatalf("%T is not a FieldError", errs[0])
			}
			pos := ""
			if fe.Line > 0 {
				pos = strings.TrimPrefix(strings.TrimPrefix(fe.Error(), "p.yaml:"), "")
				pos = pos[:strings.Index(pos, ": ")]
			}
			if pos != c.pos || fe.Field != c.field || !strings.Contains(fe.Msg, c.msg) {
				t.Errorf("got %q (pos %s, field %s); want pos %s field %s msg containing %q", fe.Error(), pos, fe.Field, c.pos, c.field, c.msg)
			}
		})
	}
}

func TestPolicyParse(t *testing.T) {
	src := `listeners:
  - name: outside
policy:
  default: deny
  hide_denied_apis: outside
  rules:
    - name: no-admin-from-outside
      match: { listener: outside, api: [admin] }
      action: deny
    - name: payments
      match: { principal: "CN=payments,O=acme", api: [Produce, 3], topic_not: { prefix: payments. } }
      action: deny
    - name: slow
      match: { client_id: { prefix: [batch-, bulk-], regex: "etl-.*" }, api: [Produce] }
      rate: { produce_bytes_per_second: 5MiB, burst: 10MiB }
`
	c, err := Parse([]byte(src), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policy
	if p.Default != PolicyDeny || len(p.Rules) != 3 || p.Source != "p.yaml" || len(p.HideDeniedAPIs) != 1 {
		t.Fatalf("policy = %+v", p)
	}
	if p.Rules[0].Line != 7 || p.Rules[2].Line != 13 {
		t.Errorf("lines %d, %d", p.Rules[0].Line, p.Rules[2].Line)
	}
	if pr := p.Rules[1].Match.Principal; len(pr.Exact) != 1 || pr.Exact[0] != "CN=payments,O=acme" {
		t.Errorf("principal with a comma split: %+v", pr)
	}
	r := p.Rules[2].Rate
	if r.Per != RatePerClientID || r.ProduceBytesPerSecond != 5*MiB {
		t.Errorf("rate = %+v", r)
	}
	if _, prod, _ := r.Bursts(); prod != 10*MiB {
		t.Errorf("burst shorthand: produce burst %s", prod)
	}
	if cm := p.Rules[2].Match.ClientID; len(cm.Prefix) != 2 || len(cm.Regex) != 1 {
		t.Errorf("client id = %+v", cm)
	}
	assertRoundTrip(t, c)
}

func TestResolveAPI(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int16
	}{{"Produce", []int16{0}}, {"initproducerid", []int16{22}}, {"SaslHandshake", []int16{17}}, {"DescribeAcls", []int16{29}}, {"19", []int16{19}}, {"consume", APIGroups["consume"]}} {
		got, err := ResolveAPI(c.in)
		if err != nil || len(got) != len(c.want) || got[0] != c.want[0] {
			t.Errorf("ResolveAPI(%q) = %v, %v", c.in, got, err)
		}
	}
	admin := APIGroups["admin"]
	has := func(k int16) bool {
		for _, a := range admin {
			if a == k {
				return true
			}
		}
		return false
	}
	if !has(19) || !has(32) || has(0) || has(3) || has(18) || has(1) {
		t.Errorf("admin group = %v", admin)
	}
}
