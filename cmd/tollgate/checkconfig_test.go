package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigProvisions checks that check-config runs the same
// provisioning as serve: a users file that exists (so the configuration
// validates) but does not parse is refused by check-config, as serve
// would refuse it, and the same file fixed is accepted.
func TestCheckConfigProvisions(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users.yaml")
	cfgFile := filepath.Join(dir, "tollgate.yaml")
	if err := os.WriteFile(cfgFile, []byte("listeners:\n  - name: sasl\n    listen: 127.0.0.1:0\n    sasl: { mechanisms: [PLAIN], users_file: "+users+" }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func() (int, string) {
		var stdout, stderr bytes.Buffer
		code := run([]string{"check-config", cfgFile}, &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}

	if err := os.WriteFile(users, []byte("users: [not, a, mapping\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := check(); code != 1 || !strings.Contains(out, "users file") {
		t.Fatalf("check-config with a broken users file: exit %d, output %q; want 1 naming the users file", code, out)
	}

	if err := os.WriteFile(users, []byte("users: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := check(); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("check-config with a valid users file: exit %d, output %q", code, out)
	}
}
