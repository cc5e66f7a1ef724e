package gateway

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// A reload compares the configuration in force with the new one field by
// field (configs.Changed) and applies what the running gateway can take
// without dropping connections:
//
//   - policy: the new rules, compiled to keep the budgets of unchanged
//     rate rules (Plan.withPolicy), from each connection's next request;
//   - limits.max_connections, max_connections_per_address,
//     connection_rate_per_address, auth_failures_per_address and
//     auth_lockout: for connections accepted from then on;
//   - audit.level between summary and full, audit.filter, and a file
//     sink's max_size;
//   - the fields inside upstream.tls (ca, cert, key, server_name,
//     insecure_skip_verify): for upstream connections dialled from then on.
//
// Every reload also makes the gateway read its certificate, key, CA,
// users and JWKS files again at their next use (auth.Reread), changed or
// not, so a rotated certificate is served to the next TLS client; the new
// configuration's validation has already read the listener and upstream
// TLS files, so a broken one refuses the reload. Any other changed field
// takes effect only at a restart: it is logged (one line per reload,
// naming them all) and tollgate_config_reload_pending_restart{field} is 1
// until a restart or a reload that brings the value back.

// liveLimits are the limits a reload applies (proxy.SetConnectionLimits).
var liveLimits = []string{
	"limits.max_connections", "limits.max_connections_per_address",
	"limits.connection_rate_per_address", "limits.auth_failures_per_address",
	"limits.auth_lockout",
}

// restartPolicy are the policy fields a reload does not apply: the ACL
// and quota stores are opened once, at start (acls.go, quotas.go), in
// the mode and from the file the configuration named then.
var restartPolicy = []string{"policy.acls", "policy.acls_file", "policy.quotas", "policy.quotas_file"}

// Change is one field a new configuration changes from the running one.
type Change struct {
	Field string // YAML path, as configs.Changed names it
	Live  bool   // applied on reload; false: needs a restart
}

// Changes lists the fields next changes from running (both validated
// configurations) and whether a reload applies each. `tollgate
// check-config --diff` prints it.
func Changes(running, next *configs.Config) []Change {
	var out []Change
	for _, f := range configs.Changed(running, next) {
		out = append(out, Change{Field: f, Live: liveOnReload(f, running, next)})
	}
	return out
}

// liveOnReload reports whether a reload from running to next applies a
// change to field (a path configs.Changed returned).
func liveOnReload(field string, running, next *configs.Config) bool {
	switch {
	case slices.Contains(restartPolicy, field):
		return false
	case under(field, "policy"), slices.Contains(liveLimits, field), under(field, "audit.filter"):
		return true
	case field == "audit.level":
		// Between summary and full; turning the trail on or off opens
		// or closes its sink.
		return running.Audit.Enabled() && next.Audit.Enabled()
	case field == "audit.sink.max_size":
		return fileSink(running.Audit)
	case strings.HasPrefix(field, "upstream.tls."):
		// Inside a TLS section that stays; "upstream.tls" itself (TLS
		// turned on or off) needs a restart.
		return true
	}
	return false
}

// fileSink reports whether a is an enabled trail writing to a file.
func fileSink(a configs.Audit) bool {
	return a.Enabled() && a.Sink.File != "" && a.Sink.Kafka == nil
}

// under reports whether field is section or inside it.
func under(field, section string) bool {
	return field == section || strings.HasPrefix(field, section+".") || strings.HasPrefix(field, section+"[")
}

// withLive is withPolicy plus the other fields a reload applies, copied
// from cfg into the next plan's configuration (what runs after the
// reload); fields that need a restart keep the values in force. For the
// audit level, the rule is liveOnReload's.
func (p *Plan) withLive(cfg *configs.Config, prev *policy.Engine) (*Plan, error) {
	next, err := p.withPolicy(cfg, prev)
	if err != nil {
		return nil, err
	}
	c := next.Config // withPolicy's copy: its fields are this plan's to set
	c.Limits.MaxConnections = cfg.Limits.MaxConnections
	c.Limits.MaxConnectionsPerAddress = cfg.Limits.MaxConnectionsPerAddress
	c.Limits.ConnectionRatePerAddress = cfg.Limits.ConnectionRatePerAddress
	c.Limits.AuthFailuresPerAddress = cfg.Limits.AuthFailuresPerAddress
	c.Limits.AuthLockout = cfg.Limits.AuthLockout
	next.proxy.MaxConnections, next.proxy.MaxConnectionsPerAddress = c.Limits.MaxConnections, c.Limits.MaxConnectionsPerAddress
	next.proxy.ConnectionRatePerAddress = float64(c.Limits.ConnectionRatePerAddress)
	next.proxy.AuthFailuresPerAddress, next.proxy.AuthLockout = c.Limits.AuthFailuresPerAddress, c.Limits.AuthLockout.D()

	c.Audit.Filter = cfg.Audit.Filter
	if c.Audit.Enabled() && cfg.Audit.Enabled() {
		c.Audit.Level = cfg.Audit.Level
	}
	if fileSink(c.Audit) {
		c.Audit.Sink.MaxSize = cfg.Audit.Sink.MaxSize
	}

	if c.Upstream != nil && c.Upstream.TLS != nil && cfg.Upstream != nil && cfg.Upstream.TLS != nil {
		// Rebuilt from what the new configuration's validation read:
		// new files, and the new settings.
		tc, err := auth.ClientTLS(cfg.Upstream.TLS)
		if err != nil {
			return nil, fmt.Errorf("upstream.%w", err)
		}
		u := *c.Upstream
		u.TLS = cfg.Upstream.TLS
		c.Upstream = &u
		next.proxy.UpstreamTLS = tc
	}
	return next, nil
}

// Reload loads file and applies it as ReloadFrom does.
func (g *Gateway) Reload(file string) error {
	return g.ReloadFrom(func() (*configs.Config, error) { return configs.Load(file) })
}

// ReloadFrom applies the configuration load returns (validated): what a
// reload can apply is swapped in (see the comment at the top of
// reload.go), and the rest is logged and counted as needing a restart.
// tollgate passes the same path it started from (the file with the flags
// overlaid), so a reload sees what a restart would. A configuration that
// does not load, validate or provision changes nothing: the error is
// returned and counted (tollgate_policy_reloads_total{result="failed"}).
func (g *Gateway) ReloadFrom(load func() (*configs.Config, error)) (err error) {
	defer func() {
		g.policy.reloaded(time.Now(), err)
		g.Metrics.PolicyReload(err == nil)
	}()
	cfg, err := load()
	if err != nil {
		return err
	}
	cur := g.plan.Load()
	var applied []string
	for _, c := range Changes(cur.Config, cfg) {
		if c.Live {
			applied = append(applied, c.Field)
		}
	}
	next, err := cur.withLive(cfg, g.Server.Policy())
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(next.Config.Audit, cur.Config.Audit) {
		if err := g.Trail.Reconfigure(next.Config.Audit); err != nil {
			// liveOnReload keeps what Reconfigure refuses out of next.
			return fmt.Errorf("audit: %w", err)
		}
	}
	defer g.policy.installed(cfg.Policy, time.Now())
	for _, w := range next.Warnings {
		g.log.Warn("policy", "warning", w.String())
	}
	g.Server.SetPolicy(next.Policy)
	g.Server.SetConnectionLimits(proxy.ConnectionLimits{
		MaxConnections:           next.proxy.MaxConnections,
		MaxConnectionsPerAddress: next.proxy.MaxConnectionsPerAddress,
		ConnectionRatePerAddress: next.proxy.ConnectionRatePerAddress,
		AuthFailuresPerAddress:   next.proxy.AuthFailuresPerAddress,
		AuthLockout:              next.proxy.AuthLockout,
	})
	if next.proxy.UpstreamTLS != cur.proxy.UpstreamTLS && !g.Server.SetUpstreamTLS(next.proxy.UpstreamTLS) {
		// withLive builds a new config only inside a TLS section that
		// stays, which SetUpstreamTLS takes.
		g.log.Error("upstream tls not replaced: TLS turned on or off needs a restart")
	}
	auth.Reread()
	g.plan.Store(next)

	// What still differs from the file once the live fields are in.
	pending := configs.Changed(next.Config, cfg)
	g.Metrics.PendingRestart(pending)
	if len(pending) > 0 {
		g.log.Warn("configuration changed, needs a restart", "fields", strings.Join(pending, ","))
	}
	g.log.Info("configuration reloaded", "applied", strings.Join(applied, ","), "rules", next.Policy.Rules(),
		"pending_restart", len(pending), "reread", "tls, users and jwks files")
	return nil
}
