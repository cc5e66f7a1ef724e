package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
	"github.com/tollgate-kafka/tollgate/webui"
)

// policyState is what the console's policy page shows; guarded by mu
// (Reload writes, the console reads).
type policyState struct {
	mu         sync.Mutex
	cfg        configs.Policy
	loaded     time.Time
	lastReload time.Time
	lastResult string
}

func (p *policyState) installed(cfg configs.Policy, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg, p.loaded = cfg, at
}

func (p *policyState) reloaded(at time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastReload, p.lastResult = at, "ok"
	if err != nil {
		p.lastResult = "refused: " + err.Error()
	}
}

// snapshot is the console's view of the policy.
func (p *policyState) snapshot() webui.PolicyState {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := webui.PolicyState{Default: p.cfg.Default, Loaded: p.loaded, LastReload: p.lastReload, LastResult: p.lastResult}
	for _, r := range p.cfg.Rules {
		ri := webui.RuleInfo{Name: r.Name, Action: r.Action, Match: flowYAML(r.Match)}
		if r.Rate != nil {
			ri.Rate = flowYAML(r.Rate)
		}
		st.Rules = append(st.Rules, ri)
	}
	return st
}

// flowYAML renders v on one line in YAML flow style, as rules are written
// in README.md.
func flowYAML(v any) string {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	var flow func(*yaml.Node)
	flow = func(n *yaml.Node) {
		n.Style |= yaml.FlowStyle
		for _, c := range n.Content {
			flow(c)
		}
	}
	flow(&n)
	out, err := yaml.Marshal(&n)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(string(out))
}

// secureAdmin applies admin.allowed_hosts, admin.auth and admin.tls to the admin server.
func secureAdmin(a *metrics.AdminServer, c configs.Admin) error {
	a.AllowHosts(c.AllowedHosts)
	if au := c.Auth; au != nil {
		token, user, pass := "", au.Username, ""
		var err error
		if au.TokenFile != "" {
			if token, err = readSecret(au.TokenFile); err != nil {
				return fmt.Errorf("admin.auth.token_file: %w", err)
			}
		}
		if au.PasswordFile != "" {
			if pass, err = readSecret(au.PasswordFile); err != nil {
				return fmt.Errorf("admin.auth.password_file: %w", err)
			}
		}
		a.Protect(metrics.AdminAuth(token, user, pass))
	}
	if t := c.TLS; t != nil {
		cert, err := auth.ServerTLS(&configs.ListenerTLS{Cert: t.Cert, Key: t.Key, MinVersion: "1.2"})
		if err != nil {
			return fmt.Errorf("admin.tls: %w", err)
		}
		a.UseTLS(cert)
	}
	return nil
}

func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", errors.New(path + " is empty")
	}
	return s, nil
}

// mountConsole serves the web console under /ui/ on the admin server.
func (g *Gateway) mountConsole(a *metrics.AdminServer) error {
	mode, upstream := "built-in", []string(nil)
	if g.cfg.UpstreamMode() {
		mode, upstream = "upstream", g.cfg.Upstream.Bootstrap
	}
	c, err := webui.New(webui.Options{
		Gateway: g.Server, Mode: mode, Upstream: upstream, Metrics: g.Registry, Tap: g.Trail,
		Policy: g.policyPage, Kafka: g.consoleKafka(), Actions: g.cfg.Admin.UI.Actions, // policyPage: quotas.go
		Stop: a.Stopping(), Log: g.log, Refused: func(r *http.Request, err error) {
			a.Refused(metrics.RefusedAction, r, "console action refused", "origin", r.Header.Get("Origin"), "err", err)
		},
	})
	if err != nil {
		return fmt.Errorf("web console: %w", err)
	}
	g.console = c
	a.Mount("/ui/", c)
	return nil
}

// consoleKafka is how the console reaches Kafka: through the gateway's
// own session pipeline, on the in-process listener
// configs.ConsoleListener with admin.ui.principal
// (proxy/console_listener.go), so policy, audit, metrics and rate limits
// apply to its pages and actions as to any client, in both backends. nil
// when the upstream relays its clients' SASL (upstream.sasl:
// passthrough): the gateway has no identity of its own to give the
// console's upstream connections (the Kafka pages say so).
func (g *Gateway) consoleKafka() []kgo.Opt {
	if u := g.cfg.Upstream; g.cfg.UpstreamMode() && u.SASL != nil && u.SASL.Passthrough {
		return nil
	}
	principal := g.cfg.Admin.UI.Principal
	if principal == "" { // a configuration built in code, not decoded
		principal = configs.DefaultConsolePrincipal
	}
	seed, dial := g.Server.ConsoleDialer(proxy.ConsoleOptions{Name: configs.ConsoleListener, Principal: principal})
	return []kgo.Opt{kgo.SeedBrokers(seed), kgo.Dialer(dial)}
}

// upstreamClient is a kgo client's options for the upstream as the
// gateway's own identity: upstream.tls, upstream.sasl, and the dialer
// through upstream.proxy when one is set.
func upstreamClient(u *configs.Upstream) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(u.Bootstrap...), kgo.DialTimeout(u.DialTimeout.D())}
	var tc *tls.Config
	if u.TLS != nil {
		var err error
		if tc, err = auth.ClientTLS(u.TLS); err != nil {
			return nil, fmt.Errorf("upstream.%w", err)
		}
	}
	switch {
	case u.Proxy != "":
		d, err := egressDialer(u)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.Dialer(tlsOver(d.DialContext, tc)))
	case tc != nil:
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if u.SASL != nil {
		m, err := auth.ClientMechanism(u.SASL)
		if err != nil {
			return nil, fmt.Errorf("upstream.sasl: %w", err) // pass-through: the gateway has no identity of its own
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// tlsOver dials with dial and, when tc is set, runs TLS over the
// connection (kgo takes a Dialer or a TLS config, not both).
func tlsOver(dial func(ctx context.Context, network, addr string) (net.Conn, error), tc *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if tc == nil {
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cfg := tc.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tlc := tls.Client(c, cfg)
		if err := tlc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return tlc, nil
	}
}

// kafkaAuditSink is audit.sink.kafka: the named cluster, or the upstream
// as the gateway's own identity.
func kafkaAuditSink(cfg *configs.Config, k *configs.AuditKafka) (*audit.KafkaSink, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}
	if len(k.Brokers) == 0 {
		var err error
		if opts, err = upstreamClient(cfg.Upstream); err != nil {
			return nil, fmt.Errorf("audit.sink.kafka: %w", err)
		}
	}
	return audit.NewKafkaSink(k.Topic, opts...)
}
