package console_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-kafka/tollgate/console"
)

// TestACLCommands: `tollgate acl create|list|delete` against the
// gateway's ACL store on both backends (the console runs as
// User:ANONYMOUS, a super user here), and its refusals: a principal
// without ALTER on the cluster, ACLs off (SECURITY_DISABLED), bad flags.
func TestACLCommands(t *testing.T) {
	for _, start := range []func(*testing.T, string) backend{builtin, throughGateway} {
		policy := "policy: { acls: enforce, super_users: [\"User:ANONYMOUS\"], acls_file: " + filepath.Join(t.TempDir(), "acls.json") + " }\n"
		b := start(t, policy)
		t.Run(b.name, func(t *testing.T) {
			run(t, console.ACL, b.addr, "", "create", "--principal", "alice", "--operation", "read,describe", "--topic", "orders").ok(t, "create")
			run(t, console.ACL, b.addr, "", "create", "--principal", "User:bob", "--deny", "--operation", "write", "--topic", "fin-", "--pattern", "prefixed", "--host", "10.0.0.9").ok(t, "create prefixed deny")
			type row struct{ ResourceType, Pattern, Name, Principal, Host, Operation, Permission string }
			list := func(args ...string) []row {
				t.Helper()
				r := run(t, console.ACL, b.addr, "", append([]string{"list", "--format", "json"}, args...)...).ok(t, "list")
				var rows []struct {
					ResourceType string `json:"resource_type"`
					Pattern      string `json:"pattern"`
					Name         string `json:"name"`
					Principal    string `json:"principal"`
					Host         string `json:"host"`
					Operation    string `json:"operation"`
					Permission   string `json:"permission"`
				}
				if err := json.Unmarshal([]byte(r.out), &rows); err != nil {
					t.Fatalf("list output %q: %v", r.out, err)
				}
				var out []row
				for _, x := range rows {
					out = append(out, row(x))
				}
				return out
			}
			if got := list(); len(got) != 3 {
				t.Fatalf("list: %+v, want 3 ACLs", got)
			}
			got := list("--topic", "fin-ledger", "--pattern", "match")
			if len(got) != 1 || got[0] != (row{"TOPIC", "PREFIXED", "fin-", "User:bob", "10.0.0.9", "WRITE", "DENY"}) {
				t.Fatalf("list --pattern match fin-ledger: %+v", got)
			}
			text := run(t, console.ACL, b.addr, "", "list", "--principal", "alice").ok(t, "list text").out
			if !strings.Contains(text, "PRINCIPAL") || strings.Count(text, "User:alice") != 2 {
				t.Errorf("list --principal alice (text):\n%s", text)
			}
			del := run(t, console.ACL, b.addr, "", "delete", "--principal", "alice", "--topic", "orders", "--format", "json").ok(t, "delete")
			if strings.Count(del.out, `"principal": "User:alice"`)+strings.Count(del.out, `"principal":"User:alice"`) != 2 {
				t.Errorf("delete reported %s, want alice's two ACLs", del.out)
			}
			if got := list(); len(got) != 1 {
				t.Fatalf("after delete: %+v", got)
			}
			run(t, console.ACL, b.addr, "", "create", "--operation", "read", "--topic", "x").oneLineError(t, "create without principal", 2, "--principal")
			run(t, console.ACL, b.addr, "", "create", "--principal", "a", "--operation", "read", "--topic", "x", "--group", "g").oneLineError(t, "two resources", 2, "one resource")
			run(t, console.ACL, b.addr, "", "create", "--principal", "a", "--operation", "fly", "--topic", "x").oneLineError(t, "bad operation", 2, "--operation")
			run(t, console.ACL, b.addr, "", "create", "--principal", "a", "--operation", "read", "--topic", "x", "--pattern", "match").oneLineError(t, "create with match", 2, "literal or prefixed")
		})
	}
	t.Run("refused", func(t *testing.T) {
		b := builtin(t, "policy: { acls: enforce }\n")
		run(t, console.ACL, b.addr, "", "list").oneLineError(t, "list without DESCRIBE on the cluster", 1, "CLUSTER_AUTHORIZATION_FAILED")
		run(t, console.ACL, b.addr, "", "create", "--principal", "a", "--operation", "read", "--topic", "x").oneLineError(t, "create without ALTER", 1, "CLUSTER_AUTHORIZATION_FAILED")
	})
	t.Run("off", func(t *testing.T) {
		b := builtin(t, "policy: { acls: off }\n")
		run(t, console.ACL, b.addr, "", "list").oneLineError(t, "list with acls off", 1, "SECURITY_DISABLED")
	})
}
