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

// TestCheckConfigFlagsAfterFile: flags may follow the file.
func TestCheckConfigFlagsAfterFile(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "tollgate.yaml")
	if err := os.WriteFile(cfgFile, []byte("limits: { max_connections: 7 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--print", cfgFile}, {cfgFile, "--print"}, {cfgFile, "-print"}} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"check-config"}, args...), &stdout, &stderr)
		if code != 0 || !strings.Contains(stdout.String(), "max_connections: 7") {
			t.Errorf("check-config %q: exit %d, stdout %q, stderr %q; want 0 and the effective configuration", args, code, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"check-config", cfgFile, "--", "--print"}, &stdout, &stderr); code != 2 {
		t.Errorf("check-config FILE -- --print (two files): exit %d, want 2 (usage)", code)
	}
}

// TestCheckConfigDiff: --diff names each changed field with what a
// reload does with it, and its exit code says whether a restart is needed.
func TestCheckConfigDiff(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sink := "audit: { level: summary, sink: { file: " + filepath.Join(dir, "audit.jsonl") + ", keep: 3"
	running := file("running.yaml", "listeners:\n  - listen: 127.0.0.1:9092\nlimits: { max_connections: 100 }\n"+sink+" } }\n")
	same := file("same.yaml", "listeners:\n  - listen: 127.0.0.1:9092\nlimits: { max_connections: 100, max_in_flight: 100 }\n"+sink+" } }\n")
	live := file("live.yaml", "listeners:\n  - listen: 127.0.0.1:9092\nlimits: { max_connections: 5 }\npolicy: { default: deny }\n"+sink+", max_size: 2MiB } }\n")
	restart := file("restart.yaml", "listeners:\n  - listen: 127.0.0.1:9093\nlimits: { max_connections: 5 }\n"+
		"audit: { level: summary, sink: { file: "+filepath.Join(dir, "audit.jsonl")+", keep: 4 } }\n")
	bad := file("bad.yaml", "limits: { max_connections: -1 }\n")
	cases := []struct {
		next string
		code int
		want []string
	}{
		{same, 0, []string{"no change"}},
		{live, 0, []string{"limits.max_connections: applied on reload", "policy.default: applied on reload", "audit.sink.max_size: applied on reload"}},
		{restart, 3, []string{"listeners[0].listen: needs a restart", "limits.max_connections: applied on reload", "audit.sink.keep: needs a restart"}},
		{bad, 1, []string{"limits.max_connections"}},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run([]string{"check-config", "--diff", running, c.next}, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		if code != c.code {
			t.Errorf("--diff %s: exit %d, want %d\n%s", filepath.Base(c.next), code, c.code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("--diff %s: output lacks %q:\n%s", filepath.Base(c.next), w, out)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"check-config", "--diff", running}, &stdout, &stderr); code != 2 {
		t.Errorf("--diff with one file: exit %d, want 2", code)
	}
}
