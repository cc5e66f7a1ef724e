package configs

import (
	"strings"
	"testing"
)

func TestVirtualClusters(t *testing.T) {
	src := `listeners:
  - name: plain
    listen: 127.0.0.1:9092
  - name: tenants
    listen: 127.0.0.1:9192
virtual_clusters:
  - name: team-a
    match: {listener: tenants, principal: "User:alice", address: 10.1.0.0/16}
    prefix: team-a.
    policy:
      rules:
        - {action: deny, match: {topic: secret}}
  - name: team-b
    match: {listener: tenants}
    prefix: team-b.
`
	c, err := Parse([]byte(src), "vc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.VirtualClusters) != 2 {
		t.Fatalf("virtual clusters = %+v", c.VirtualClusters)
	}
	a := c.VirtualClusters[0]
	if a.Name != "team-a" || a.Prefix != "team-a." || a.Match.Principal != "User:alice" || a.Policy == nil || a.Policy.Default != PolicyAllow || len(a.Policy.Rules) != 1 {
		t.Errorf("team-a = %+v policy %+v", a, a.Policy)
	}
	if p, ok, err := a.Match.AddressPrefix(); !ok || err != nil || p.String() != "10.1.0.0/16" {
		t.Errorf("address = %v %v %v", p, ok, err)
	}
	if l := c.VirtualClusterListeners(); !l["tenants"] || l["plain"] {
		t.Errorf("listeners = %v", l)
	}
}

func TestVirtualClusterErrors(t *testing.T) {
	base := "listeners:\n  - name: t\n    listen: 127.0.0.1:9092\nvirtual_clusters:\n"
	cases := []struct{ name, yaml, field, msg string }{
		{"bad name", "  - {name: Team, match: {listener: t}, prefix: a.}\n", "virtual_clusters[0].name", "not a valid virtual cluster name"},
		{"dup name", "  - {name: a, match: {listener: t}, prefix: a.}\n  - {name: a, match: {listener: t}, prefix: b.}\n", "virtual_clusters[1].name", "duplicate"},
		{"no prefix", "  - {name: a, match: {listener: t}}\n", "virtual_clusters[0].prefix", "needs a prefix"},
		{"bad prefix", "  - {name: a, match: {listener: t}, prefix: 'a/'}\n", "virtual_clusters[0].prefix", "topic characters"},
		{"overlap", "  - {name: a, match: {listener: t}, prefix: team.}\n  - {name: b, match: {listener: t}, prefix: team.a.}\n", "virtual_clusters[1].prefix", "overlaps"},
		{"empty match", "  - {name: a, prefix: a.}\n", "virtual_clusters[0].match", "empty match"},
		{"unknown listener", "  - {name: a, match: {listener: x}, prefix: a.}\n", "virtual_clusters[0].match.listener", "no listener"},
		{"principal", "  - {name: a, match: {principal: alice}, prefix: a.}\n", "virtual_clusters[0].match.principal", "Type:name"},
		{"address", "  - {name: a, match: {address: 10.0.0.0/33}, prefix: a.}\n", "virtual_clusters[0].match.address", "CIDR"},
		{"sni twice", "  - {name: a, match: {sni: '*.*'}, prefix: a.}\n", "virtual_clusters[0].match.sni", "exactly once"},
		{"sni no sni listener", "  - {name: a, match: {sni: 'a.*'}, prefix: a.}\n", "virtual_clusters[0].match.sni", "no listener is brokers: sni"},
		{"policy acls", "  - {name: a, match: {listener: t}, prefix: a., policy: {acls: enforce}}\n", "virtual_clusters[0].policy", "top-level policy"},
		{"policy rule", "  - {name: a, match: {listener: t}, prefix: a., policy: {rules: [{action: maybe}]}}\n", "virtual_clusters[0].policy.rules[0].action", "want allow or deny"},
		{"policy default", "  - {name: a, match: {listener: t}, prefix: a., policy: {default: no}}\n", "virtual_clusters[0].policy.default", "want allow or deny"},
		{"unknown field", "  - {name: a, match: {listener: t, topic: x}, prefix: a.}\n", "virtual_clusters[0].match", "unknown field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(base+tc.yaml), "vc.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q: want field %s and %q", err, tc.field, tc.msg)
			}
		})
	}
}
