package gateway

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/configs"
)

// reloadTo reloads g from yaml and returns the fields that still differ
// from it (what needs a restart).
func reloadTo(t *testing.T, g *Gateway, yaml string) []string {
	t.Helper()
	cfg, err := configs.Parse([]byte(yaml), "next.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.ReloadFrom(func() (*configs.Config, error) { return cfg, nil }); err != nil {
		t.Fatal(err)
	}
	return configs.Changed(g.plan.Load().Config, cfg)
}

// TestReloadAppliesEveryLiveField: every field Changes calls live is in
// force after a reload (nothing of it is left pending), and the running
// trail took the new audit level; fields that need a restart are left.
func TestReloadAppliesEveryLiveField(t *testing.T) {
	dir := t.TempDir()
	head := "listeners: [{ listen: \"127.0.0.1:0\" }]\nbroker: { data_dir: " + filepath.Join(dir, "data") + " }\n"
	sink := "sink: { file: " + filepath.Join(dir, "audit.jsonl")
	g := startFrom(t, head+"audit: { level: summary, "+sink+", keep: 3 } }\n")
	next := head + `
policy: { default: deny }
limits:
  max_connections: 5
  max_connections_per_address: 2
  connection_rate_per_address: 3
  auth_failures_per_address: 4
  auth_lockout: 5s
audit:
  level: full
  ` + sink + `, max_size: 2MiB, keep: 3 }
  filter: { api: [Produce] }
`
	cfg, err := configs.Parse([]byte(next), "next.yaml")
	if err != nil {
		t.Fatal(err)
	}
	changes := Changes(g.plan.Load().Config, cfg)
	if len(changes) < 9 {
		t.Fatalf("changes: %+v", changes)
	}
	for _, c := range changes {
		if !c.Live {
			t.Errorf("%s: not live", c.Field)
		}
	}
	if left := reloadTo(t, g, next); len(left) != 0 {
		t.Errorf("left after the reload: %q", left)
	}
	if g.Trail.Level() != audit.Full {
		t.Errorf("audit level %v after the reload, want full", g.Trail.Level())
	}

	// Turning the trail off, moving the listener: restart.
	last := "listeners: [{ listen: \"127.0.0.1:1\" }]\nbroker: { data_dir: " + filepath.Join(dir, "data") + " }\npolicy: { default: deny }\n"
	left := reloadTo(t, g, last)
	if cfg, err = configs.Parse([]byte(last), "last.yaml"); err != nil {
		t.Fatal(err)
	}
	// The limits, the filter and max_size went back to their defaults:
	// applied.
	if want := []string{"listeners[0].listen", "audit.level", "audit.sink.file", "audit.sink.keep"}; !slices.Equal(left, want) {
		t.Errorf("left after turning audit off and moving the listener: %q, want %q", left, want)
	}
	for _, c := range Changes(g.plan.Load().Config, cfg) {
		if c.Live {
			t.Errorf("%s is live but was left", c.Field)
		}
	}
	if g.Trail.Level() != audit.Full {
		t.Errorf("audit level %v: turning the trail off needs a restart", g.Trail.Level())
	}
}

// TestReloadUpstreamTLS: a change inside upstream.tls is rebuilt into the
// TLS config of the next upstream dials; TLS turned off needs a restart.
func TestReloadUpstreamTLS(t *testing.T) {
	head := "listeners: [{ listen: \"127.0.0.1:0\" }]\nupstream:\n  bootstrap: [127.0.0.1:1]\n"
	cfg, err := configs.Parse([]byte(head+"  tls: { server_name: a.example }\n"), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(context.Background())
	if left := reloadTo(t, g, head+"  tls: { server_name: b.example }\n"); len(left) != 0 {
		t.Errorf("left: %q", left)
	}
	if got := g.plan.Load().proxy.UpstreamTLS.ServerName; got != "b.example" {
		t.Errorf("upstream TLS server name %q after the reload, want b.example", got)
	}
	if left := reloadTo(t, g, head); !slices.Equal(left, []string{"upstream.tls"}) {
		t.Errorf("TLS turned off: left %q, want [upstream.tls]", left)
	}
	if g.plan.Load().proxy.UpstreamTLS == nil {
		t.Error("TLS turned off by a reload")
	}
}
