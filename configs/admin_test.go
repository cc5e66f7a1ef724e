package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAdminWarnings(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("t\n"), 0o600)
	cases := []struct {
		yaml string
		warn bool
	}{
		{"admin: { listen: 127.0.0.1:9099 }\n", false},
		{"admin: { listen: localhost:9099 }\n", false},
		{"admin: { listen: \"[::1]:9099\" }\n", false},
		{"admin: { listen: 0.0.0.0:9099 }\n", true},
		{"admin: { listen: 10.1.2.3:9099 }\n", true},
		{"admin: { listen: 0.0.0.0:9099, auth: { token_file: " + tok + " } }\n", false},
		{"admin: { listen: off }\n", false},
	}
	for _, c := range cases {
		cfg, err := Parse([]byte(c.yaml), "a.yaml")
		if err != nil {
			t.Fatalf("%s: %v", c.yaml, err)
		}
		ws := cfg.Warnings()
		if (len(ws) > 0) != c.warn {
			t.Errorf("%s: warnings %q, want warning=%v", c.yaml, ws, c.warn)
		}
		if c.warn && !strings.Contains(ws[0], "neither auth nor tls") {
			t.Errorf("warning %q does not say why", ws[0])
		}
	}
	if !Default().Admin.UI.Enabled || Default().Admin.UI.Actions {
		t.Error("the console must be on and read-only by default")
	}
}

func TestAdminSecurityErrors(t *testing.T) {
	if cfg, err := Parse([]byte("admin: { allowed_hosts: [gw.example.com, admin] }\n"), "a.yaml"); err != nil ||
		len(cfg.Admin.AllowedHosts) != 2 {
		t.Errorf("allowed_hosts: %v %v", cfg, err)
	}
	for yaml, want := range map[string]string{
		"admin: { auth: {} }\n":                             "give token_file, or username and password_file",
		"admin: { auth: { username: ops } }\n":              "username and password_file go together",
		"admin: { auth: { token_file: /nonexistent/t } }\n": "admin.auth.token_file",
		"admin: { tls: { cert: a.pem } }\n":                 "both cert and key are required",
		"admin: { ui: { actions: maybe } }\n":               "admin.ui.actions",
		"admin: { allowed_hosts: [\"gw.example:9099\"] }\n": "admin.allowed_hosts",
		"admin: { allowed_hosts: [\"https://gw\"] }\n":      "without scheme, port or path",
		"admin: { allowed_hosts: [\"\"] }\n":                "admin.allowed_hosts",
	} {
		_, err := Parse([]byte(yaml), "a.yaml")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", yaml, err, want)
		}
	}
}

// TestAdminUIPrincipal: admin.ui.principal defaults to
// DefaultConsolePrincipal and must be Type:name; no client listener may
// be named like the console's in-process listener, which policy rules and
// audit filters may name while the console runs (and only then).
func TestAdminUIPrincipal(t *testing.T) {
	cfg, err := Parse([]byte("admin: { ui: { actions: true } }\n"), "a.yaml")
	if err != nil || cfg.Admin.UI.Principal != DefaultConsolePrincipal {
		t.Fatalf("default principal: %q %v", cfg.Admin.UI.Principal, err)
	}
	cfg, err = Parse([]byte("admin: { ui: { principal: \"User:ops\" } }\n"), "a.yaml")
	if err != nil || cfg.Admin.UI.Principal != "User:ops" {
		t.Fatalf("principal: %q %v", cfg.Admin.UI.Principal, err)
	}
	rule := "policy: { rules: [ { name: r, match: { listener: admin, api: [CreateTopics] }, action: deny } ] }\n"
	if _, err := Parse([]byte(rule+"audit: { level: summary, filter: { listener: [admin] } }\n"), "a.yaml"); err != nil {
		t.Errorf("a rule and an audit filter naming the console listener: %v", err)
	}
	for yaml, want := range map[string]string{
		"admin: { ui: { principal: \"\" } }\n":        "admin.ui.principal",
		"admin: { ui: { principal: ops } }\n":         "want User:name",
		"admin: { ui: { principal: \"User:\" } }\n":   "want User:name",
		"admin: { ui: { principal: \" User:x\" } }\n": "want User:name",
		"admin: { ui: { principal: \"Group:x\" } }\n": "want User:name",
		"listeners: [{ name: admin }]\n":              "the web console's in-process listener",
		"admin: { listen: off }\n" + rule:             `no listener is named "admin"`,
		"admin: { ui: { enabled: false } }\n" + rule:  `no listener is named "admin"`,
	} {
		_, err := Parse([]byte(yaml), "a.yaml")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", yaml, err, want)
		}
	}
	for _, yaml := range []string{"listeners: [{ name: admin }]\nadmin: { listen: off }\n", "listeners: [{ name: admin }]\nadmin: { ui: { enabled: false } }\n"} {
		if _, err := Parse([]byte(yaml), "a.yaml"); err != nil {
			t.Errorf("%s: %v (no console, no reserved name)", yaml, err)
		}
	}
}
