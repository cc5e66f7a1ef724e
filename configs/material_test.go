package configs

import (
	"os"
	"strings"
	"testing"
)

// TestValidateKeepsWhatItParsed: what Validate parsed to check the TLS
// sections, the principal rules, the policy and the proxy URL is kept for
// the plan (gateway.Provision) to take instead of parsing again; a
// section changed after Validate is not served stale values.
func TestValidateKeepsWhatItParsed(t *testing.T) {
	r := securityFiles(t)
	c, err := Parse([]byte(r.Replace(`listeners:
  - tls:
      cert: CERT
      key: KEY
      client_ca: CA
      min_version: "1.3"
      principal_mapping_rules: ["RULE:^CN=(.*?),OU=.*$/$1/L", DEFAULT]
upstream:
  bootstrap: [k:9092]
  tls: {ca: CA, cert: CERT, key: KEY}
  proxy: socks5://proxy.corp:1080
policy:
  rules:
    - match: {address: [10.0.0.0/8], api: [produce], topic: {regex: ["logs-.*"]}}
      action: deny
`)), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lt := c.Listeners[0].TLS
	m := lt.Material()
	if m == nil || len(m.Certificates) != 1 || m.CAs == nil || m.MinVersion != 0x0304 {
		t.Fatalf("listener material = %+v", m)
	}
	rules, err := lt.PrincipalRules()
	if err != nil || len(rules) != 2 || rules[0].Pattern == nil || !rules[1].Default {
		t.Fatalf("principal rules = %+v, %v", rules, err)
	}
	if again, _ := lt.PrincipalRules(); &again[0] != &rules[0] {
		t.Error("PrincipalRules parsed again instead of returning what Validate parsed")
	}
	if um := c.Upstream.TLS.Material(); um == nil || len(um.Certificates) != 1 || um.CAs == nil {
		t.Errorf("upstream material = %+v", um)
	}
	p1, _ := c.Upstream.ProxyURL()
	p2, _ := c.Upstream.ProxyURL()
	if p1 == nil || p1 != p2 || p1.Host != "proxy.corp:1080" {
		t.Errorf("ProxyURL = %v, %v: want the one Validate parsed", p1, p2)
	}
	re1, _ := c.Policy.Regex("logs-.*")
	re2, _ := c.Policy.Regex("logs-.*")
	if re1 == nil || re1 != re2 || !re1.MatchString("logs-a") || re1.MatchString("xlogs-a") {
		t.Errorf("Regex = %v, %v: want the anchored one Validate compiled", re1, re2)
	}
	if a, err := c.Policy.Address("10.0.0.0/8"); err != nil || a.Bits() != 8 {
		t.Errorf("Address = %v, %v", a, err)
	}
	if k, err := c.Policy.APIKeys("produce"); err != nil || len(k) == 0 {
		t.Errorf("APIKeys = %v, %v", k, err)
	}
	// Not seen by Validate: parsed now, and each call parses afresh.
	if x, y := mustRegex(t, c, "other"), mustRegex(t, c, "other"); x == y {
		t.Error("an expression Validate has not seen came from the cache")
	}

	// Changed after Validate: no stale material; the files are read by
	// whoever builds the TLS config.
	lt.MinVersion = "1.2"
	if lt.Material() != nil {
		t.Error("Material after the section changed: want nil (parse afresh)")
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if m := lt.Material(); m == nil || m.MinVersion != 0x0303 {
		t.Errorf("Material after validating again = %+v", m)
	}
	c.Upstream.Proxy = "gopher://x:1"
	if _, err := c.Upstream.ProxyURL(); err == nil || !strings.Contains(err.Error(), "gopher") {
		t.Errorf("ProxyURL after the field changed: %v", err)
	}
}

// TestMaterialNotKeptForABadSection: a section with a problem keeps
// nothing, so nothing half-parsed reaches a plan.
func TestMaterialNotKeptForABadSection(t *testing.T) {
	r := securityFiles(t)
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/not.pem", []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Default()
	c.Listeners[0].TLS = &ListenerTLS{Cert: r.Replace("CERT"), Key: r.Replace("KEY"), ClientCA: dir + "/not.pem", MinVersion: "1.2"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Fatalf("Validate = %v", err)
	}
	if c.Listeners[0].TLS.Material() != nil {
		t.Error("material kept for a section Validate refused")
	}
}

func mustRegex(t *testing.T, c *Config, expr string) any {
	t.Helper()
	re, err := c.Policy.Regex(expr)
	if err != nil {
		t.Fatal(err)
	}
	return re
}
