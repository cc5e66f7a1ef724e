package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

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

// TestReloadRereadsUpstreamCA: the upstream's certificate is signed by a
// CA the gateway's ca file does not hold yet, so the gateway cannot reach
// it; the file is rewritten with that CA (same path, same configuration)
// and a reload makes the next upstream dials trust it, without a restart.
func TestReloadRereadsUpstreamCA(t *testing.T) {
	oldCA, _ := upstreamCA(t)
	newCA, cert := upstreamCA(t)
	c, _ := startEgressUpstream(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ca := filepath.Join(t.TempDir(), "upstream-ca.pem")
	if err := os.WriteFile(ca, read(oldCA), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("listeners: [{ listen: \"127.0.0.1:0\", broker_port_base: 0 }]\nupstream:\n  bootstrap: [%s]\n  tls: { ca: %s }\n",
		strings.Join(c.ListenAddrs(), ", "), ca)
	g := startFrom(t, yaml)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.Server.Addr(0).String()), kgo.DefaultProduceTopic("egress"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Not trusted yet: Start's broker discovery failed on the upstream's
	// certificate.
	if err := g.Server.Ready(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("readiness with the old CA: %v, want a certificate error", err)
	}

	if err := os.WriteFile(ca, read(newCA), 0o644); err != nil {
		t.Fatal(err)
	}
	if left := reloadTo(t, g, yaml); len(left) != 0 {
		t.Fatalf("left: %q", left)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("after the CA was replaced")).FirstErr(); err != nil {
		t.Fatalf("produce through the gateway after the reload: %v", err)
	}
}

// TestReloadUnderTraffic: reloads that change the limits, the audit
// level, filter and max_size and the policy, while one client produces
// and others connect, neither fail a request nor race (run with -race).
func TestReloadUnderTraffic(t *testing.T) {
	dir := t.TempDir()
	head := "listeners: [{ listen: \"127.0.0.1:0\" }]\nbroker: { data_dir: " + filepath.Join(dir, "data") + " }\n"
	conf := func(i int) string {
		level := []string{"summary", "full"}[i%2]
		return head + fmt.Sprintf("limits: { max_connections: %d, connection_rate_per_address: %d, auth_failures_per_address: %d }\n", 1000+i, 1000+i, 1+i%3) +
			fmt.Sprintf("audit: { level: %s, sink: { file: %s, max_size: %dMiB }, filter: { api_not: [%s] } }\n",
				level, filepath.Join(dir, "audit.jsonl"), 1+i%4, []string{"Metadata", "Heartbeat"}[i%2]) +
			fmt.Sprintf("policy: { rules: [ { name: r%d, match: { api: [DeleteTopics] }, action: deny } ] }\n", i%2)
	}
	g := startFrom(t, conf(0))
	addr := g.Server.Addr(0).String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	producer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("traffic"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, kgo.StringRecord("first")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errs := make(chan error, 2)
	var produced, connected atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			if err := producer.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
				errs <- fmt.Errorf("produce: %w", err)
				return
			}
			produced.Add(1)
		}
	}()
	go func() {
		for {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err == nil {
				err = cl.Ping(ctx)
				cl.Close()
			}
			if err != nil {
				errs <- fmt.Errorf("new client: %w", err)
				return
			}
			connected.Add(1)
		}
	}()
	for i := 1; i <= 30; i++ {
		// Each reload lands between requests of both clients.
		for produced.Load() < int64(i) || connected.Load() < int64(i) {
			select {
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(time.Millisecond):
			}
		}
		if left := reloadTo(t, g, conf(i)); len(left) != 0 {
			t.Fatalf("reload %d left %q", i, left)
		}
	}
	close(stop)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestReloadStoreModesNeedRestart: the ACL and quota stores are opened
// at start; a reload that changes their mode or file leaves them as they
// run, says so (pending, not applied), and enforces no ACL it did not
// open, while the super users, which the running store takes, apply.
func TestReloadStoreModesNeedRestart(t *testing.T) {
	dir := t.TempDir()
	head := "listeners: [{ listen: \"127.0.0.1:0\" }]\nbroker: { data_dir: " + filepath.Join(dir, "data") + " }\n"
	g := startFrom(t, head+"policy: { acls: off, quotas: off }\n")
	next := head + `policy: { acls: enforce, acls_file: ` + filepath.Join(dir, "acls.json") + `, quotas: enforce, quotas_file: ` + filepath.Join(dir, "q.json") + `, super_users: ["User:admin"] }` + "\n"
	cfg, err := configs.Parse([]byte(next), "next.yaml")
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, c := range Changes(g.plan.Load().Config, cfg) {
		live[c.Field] = c.Live
	}
	for _, f := range []string{"policy.acls", "policy.acls_file", "policy.quotas", "policy.quotas_file"} {
		if l, ok := live[f]; !ok || l {
			t.Errorf("%s: changed %v, live %v; want a change that needs a restart", f, ok, l)
		}
	}
	if !live["policy.super_users"] {
		t.Errorf("policy.super_users is not applied on reload: %v", live)
	}
	left := reloadTo(t, g, next)
	if want := []string{"policy.acls", "policy.acls_file", "policy.quotas", "policy.quotas_file"}; !slices.Equal(left, want) {
		t.Errorf("pending after the reload: %q, want %q", left, want)
	}
	if g.ACLs() != nil || g.plan.Load().Config.ACLMode() != configs.ACLsOff {
		t.Errorf("the reload claims ACLs it did not open: store %v, mode %q", g.ACLs(), g.plan.Load().Config.ACLMode())
	}
}
