package console_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/console"
)

// TestQuotaCommands: set, list and delete client quotas on the built-in
// broker (the gateway's quota store) and through a gateway (kfake's).
func TestQuotaCommands(t *testing.T) {
	for i, start := range backends(t) {
		t.Run([]string{"builtin", "gateway"}[i], func(t *testing.T) {
			b := start(t)
			run(t, console.Quota, b.addr, "", "set", "--user", "alice", "producer_byte_rate=1048576", "request_percentage=25").ok(t, "set alice")
			run(t, console.Quota, b.addr, "", "set", "--default-user", "--client-id", "etl", "consumer_byte_rate=2048").ok(t, "set default/etl")
			list := run(t, console.Quota, b.addr, "", "list", "--format", "json").ok(t, "list")
			var rows []struct {
				User     *string            `json:"user"`
				ClientID *string            `json:"client_id"`
				Values   map[string]float64 `json:"values"`
			}
			if err := json.Unmarshal([]byte(list.out), &rows); err != nil || len(rows) != 2 {
				t.Fatalf("list json %q: %v", list.out, err)
			}
			text := run(t, console.Quota, b.addr, "", "list", "--user", "alice").ok(t, "list alice").out
			if !strings.Contains(text, "alice") || !strings.Contains(text, "producer_byte_rate=1048576") || strings.Contains(text, "etl") {
				t.Errorf("list --user alice:\n%s", text)
			}
			run(t, console.Quota, b.addr, "", "delete", "--user", "alice", "request_percentage").ok(t, "delete one key")
			run(t, console.Quota, b.addr, "", "delete", "--default-user", "--client-id", "etl").ok(t, "delete entity")
			text = run(t, console.Quota, b.addr, "", "list").ok(t, "list after delete").out
			if strings.Contains(text, "request_percentage") || strings.Contains(text, "etl") || !strings.Contains(text, "producer_byte_rate") {
				t.Errorf("list after deletes:\n%s", text)
			}
			run(t, console.Quota, b.addr, "", "set", "producer_byte_rate=1").oneLineError(t, "set without entity", 2, "needs an entity")
			run(t, console.Quota, b.addr, "", "set", "--user", "a", "rate").oneLineError(t, "set without value", 2, "KEY=VALUE")
			run(t, console.Quota, b.addr, "", "set", "--user", "a", "--default-user", "producer_byte_rate=1").oneLineError(t, "both user flags", 2, "exclude")
		})
	}
	b := builtin(t, "")
	run(t, console.Quota, b.addr, "", "set", "--user", "a", "bogus=1").oneLineError(t, "unknown key", 1, "bogus")
	run(t, console.Quota, b.addr, "", "set", "--user", "a", "producer_byte_rate=1.5").oneLineError(t, "fraction", 1, "Long")
}

// TestUserCommands: set, list and delete SCRAM credentials through a
// built-in broker's SASL listener; the users file changes accordingly.
func TestUserCommands(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users.yaml")
	u := auth.NewUsers()
	if err := u.Set("admin", "admin-secret", 4096); err != nil {
		t.Fatal(err)
	}
	if err := u.Save(users); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte("admin-secret\n"), 0o600)
	g := startGateway(t, `
listeners: [{ listen: "127.0.0.1:0", sasl: { mechanisms: [SCRAM-SHA-512, SCRAM-SHA-256], users_file: `+users+` } }]
broker: { data_dir: `+t.TempDir()+`, fsync: never }
admin: { listen: "off" }
`)
	addr := g.Server.Addr(0).String()
	sasl := []string{"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "admin", "--sasl-password-file", pwFile}
	cmd := func(stdin string, args ...string) result {
		return run(t, console.User, addr, stdin, append(args, sasl...)...)
	}
	cmd("bob-pw\n", "set", "bob", "--password-stdin", "--mechanism", "both", "--iterations", "4096").ok(t, "set bob")
	text := cmd("", "list").ok(t, "list").out
	if !strings.Contains(text, "bob") || !strings.Contains(text, "SCRAM-SHA-256(4096)") || !strings.Contains(text, "SCRAM-SHA-512(4096)") {
		t.Errorf("list:\n%s", text)
	}
	if got, _ := auth.LoadUsers(users); strings.Join(got.Names(), ",") != "admin,bob" {
		t.Errorf("users file: %v", got.Names())
	}
	cmd("", "delete", "bob", "--mechanism", "SCRAM-SHA-256").ok(t, "delete one mechanism")
	if got, _ := auth.LoadUsers(users); strings.Join(got.Mechanisms("bob"), ",") != "SCRAM-SHA-512" {
		t.Errorf("bob's mechanisms after deleting SHA-256: %v", got.Mechanisms("bob"))
	}
	cmd("", "delete", "bob").ok(t, "delete bob")
	if got, _ := auth.LoadUsers(users); got.Has("bob") {
		t.Error("bob still in the users file")
	}
	cmd("", "list", "bob").oneLineError(t, "list a deleted user", 1, "RESOURCE_NOT_FOUND")
	cmd("", "set", "carol").oneLineError(t, "set without a password", 2, "--password-stdin")
	cmd("x\n", "set", "carol", "--password-stdin", "--iterations", "100").oneLineError(t, "few iterations", 2, "4096")
}
