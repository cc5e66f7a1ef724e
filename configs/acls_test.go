package configs

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestACLSettings: policy.acls values, the effective mode and file per
// backend, and the errors naming field and line.
func TestACLSettings(t *testing.T) {
	c, err := Parse([]byte("broker: { data_dir: /d }\n"), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.ACLMode() != ACLsOff || c.ACLsPath() != filepath.Join("/d", ACLsFileName) {
		t.Errorf("built-in default: %s %s, want off and /d/acls.json", c.ACLMode(), c.ACLsPath())
	}
	c, err = Parse([]byte("upstream: { bootstrap: [k:9092] }\npolicy: { acls_file: /x.json, super_users: [\"User:admin\"] }\n"), "b.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.ACLMode() != ACLsUpstream || c.ACLsPath() != "/x.json" || c.Policy.SuperUsers[0] != "User:admin" {
		t.Errorf("gateway default: %s %s %v, want upstream", c.ACLMode(), c.ACLsPath(), c.Policy.SuperUsers)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"policy: { acls: on }\n", `a.yaml:1:17: policy.acls: "on": want off, enforce or upstream`},
		{"policy: { acls: upstream }\n", "a.yaml:1:17: policy.acls: upstream needs an upstream"},
		{"policy:\n  super_users: [alice]\n", `a.yaml:2:17: policy.super_users[0]: "alice": want a principal Type:name`},
	} {
		_, err := Parse([]byte(bad.yaml), "a.yaml")
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.yaml, err, bad.want)
		}
	}
}
