package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/tollgate-kafka/tollgate/acl"
	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/broker"
	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// Plan is a validated configuration provisioned once, before anything is
// opened (no socket is bound, no data directory touched): listener TLS
// configs, principal mappers and SASL servers, the upstream TLS config and
// identity, the compiled policy, and the built-in broker's options.
// `tollgate check-config` and `tollgate` (serve) run the same Provision;
// Open (New) then opens what the plan describes.
//
// Ownership: a Plan is immutable once Provision returns it. The SASL
// servers it holds watch their files (and JWKS URLs) until Close; a
// Gateway opened from the plan owns it and closes it with itself.
type Plan struct {
	Config *configs.Config
	// Policy is the compiled policy; Warnings are its compiler's notes.
	Policy   *policy.Engine
	Warnings []policy.Warning

	proxy   proxy.Options  // everything but the backend, audit trail and hooks
	broker  *broker.Config // nil in upstream mode
	closers []func()

	aclMode string     // configs.Config.ACLMode, fixed until a restart
	acls    *acl.Store // nil unless aclMode is enforce (acls.go)
}

// Provision turns a validated configuration into a plan. What
// validation parsed (configs.TLSMaterial, the principal rules, the
// policy's patterns, the proxy URL) is taken from the configuration, not
// parsed again (DESIGN.md, "Configuration → plan → gateway"). It fails
// with the first section that cannot be provisioned, and releases what it
// had provisioned by then.
func Provision(cfg *configs.Config, log *slog.Logger) (*Plan, error) {
	p := &Plan{Config: cfg}
	if err := p.provision(log); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Plan) provision(log *slog.Logger) error {
	var err error
	if p.Policy, p.Warnings, err = policy.Compile(p.Config.Policy); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	p.proxy = proxyOptions(p.Config, log)
	if p.proxy.VirtualClusters, err = virtualClusters(p.Config); err != nil { // vclusters.go
		return err
	}
	if err := p.provisionACLs(log); err != nil { // acls.go
		return err
	}
	for i := range p.Config.Listeners {
		lo, err := p.listener(&p.Config.Listeners[i], log)
		if err != nil {
			return err
		}
		p.proxy.Listeners = append(p.proxy.Listeners, lo)
	}
	if err := edgeOptions(p.Config, &p.proxy, log); err != nil {
		return err
	}
	if p.Config.UpstreamMode() {
		return p.upstream()
	}
	p.broker, err = brokerConfig(p.Config, log)
	return err
}

// withPolicy provisions the plan a reload swaps in: this plan's
// listeners, TLS, SASL, upstream and backend (a reload does not
// re-provision them; withLive, reload.go, adds the other fields a reload
// applies) with cfg's policy, compiled
// from prev so that rate rules whose name and rate are unchanged keep
// their budgets. The new plan shares what this one provisioned, so only
// the plan in force is closed.
func (p *Plan) withPolicy(cfg *configs.Config, prev *policy.Engine) (*Plan, error) {
	eng, warnings, err := policy.CompileFrom(prev, cfg.Policy)
	if err != nil {
		return nil, err
	}
	eng = p.withACLs(eng, cfg) // acls.go
	c := *p.Config
	c.Policy = cfg.Policy
	// The stores' modes and files stay as opened (restartPolicy,
	// reload.go): what still differs from the file is pending a restart.
	run := p.Config.Policy
	c.Policy.ACLs, c.Policy.ACLsFile, c.Policy.Quotas, c.Policy.QuotasFile = run.ACLs, run.ACLsFile, run.Quotas, run.QuotasFile
	next := *p
	next.Config, next.Policy, next.Warnings = &c, eng, warnings
	return &next, nil
}

// Close releases what provisioning started. It is safe to call more than
// once.
func (p *Plan) Close() {
	for _, c := range p.closers {
		c()
	}
	p.closers = nil
}

// socketBuffer maps a configured socket buffer size to proxy.Options':
// the configuration's 0 (the kernel's autotuning) is the proxy's -1, whose
// 0 means its default.
func socketBuffer(n configs.Size) int {
	if n <= 0 {
		return -1
	}
	return int(n)
}

// proxyOptions are the limits and timeouts of the proxy.
func proxyOptions(cfg *configs.Config, log *slog.Logger) proxy.Options {
	return proxy.Options{
		MaxFrameBytes:            int32(min(int64(cfg.Limits.MaxFrameBytes), 1<<31-1)),
		MaxInFlight:              cfg.Limits.MaxInFlight,
		SocketSendBufferBytes:    socketBuffer(cfg.Limits.SocketSendBufferBytes),
		SocketUnsentBytes:        socketBuffer(cfg.Limits.SocketUnsentBytes),
		TCPCongestion:            cfg.Limits.TCPCongestionControl,
		MaxConnections:           cfg.Limits.MaxConnections,
		MaxConnectionsPerAddress: cfg.Limits.MaxConnectionsPerAddress,
		MaxPreauthFrameBytes:     int32(min(int64(cfg.Limits.MaxPreauthFrameBytes), 1<<31-1)),
		MaxRequestBytes:          int32(min(int64(cfg.Limits.MaxRequestBytes), 1<<31-1)),
		MaxRequestBytesInFlight:  int64(cfg.Limits.MaxRequestBytesInFlight),
		ConnectionRatePerAddress: float64(cfg.Limits.ConnectionRatePerAddress),
		AuthFailuresPerAddress:   cfg.Limits.AuthFailuresPerAddress,
		AuthLockout:              cfg.Limits.AuthLockout.D(),
		AuthTimeout:              cfg.Limits.AuthTimeout.D(),
		IdleTimeout:              cfg.Limits.IdleTimeout.D(),
		FrameTimeout:             cfg.Limits.FrameTimeout.D(),
		DrainTimeout:             cfg.Limits.DrainTimeout.D(),
		Logger:                   log,
	}
}

// listener provisions one listener: addresses, TLS config, principal
// mapper and SASL server.
func (p *Plan) listener(l *configs.Listener, log *slog.Logger) (proxy.ListenerOptions, error) {
	base := -1
	if l.BrokerPortBase != nil {
		base = *l.BrokerPortBase
	}
	lo := proxy.ListenerOptions{
		Name:           l.Name,
		Listen:         l.Listen,
		Advertise:      l.AdvertisedHost(),
		AdvertisePort:  l.AdvertisedPort(0),
		BrokerPortBase: base,
	}
	if l.TLS != nil {
		tc, err := auth.ServerTLS(l.TLS)
		if err != nil {
			return lo, fmt.Errorf("listener %s tls: %w", l.Name, err)
		}
		lo.TLS = tc
		if l.TLS.ClientCA != "" {
			pm, err := auth.NewPrincipalMapper(l.TLS)
			if err != nil {
				return lo, fmt.Errorf("listener %s tls principal: %w", l.Name, err)
			}
			lo.Principal = pm.Principal
		}
	}
	if l.SASL != nil {
		srv, err := auth.NewServer(l.SASL, log)
		if err != nil {
			return lo, fmt.Errorf("listener %s sasl: %w", l.Name, err)
		}
		p.closers = append(p.closers, srv.Close)
		lo.SASL = saslServer{srv}
	}
	return lo, nil
}

// upstream provisions the upstream section: bootstrap, timeouts, TLS and
// the gateway's own SASL identity.
func (p *Plan) upstream() error {
	u := p.Config.Upstream
	p.proxy.Bootstrap = u.Bootstrap
	p.proxy.ForwardUnknownAPIs = u.ForwardUnknownAPIs
	p.proxy.DialTimeout = u.DialTimeout.D()
	p.proxy.MetadataRefresh = u.MetadataRefresh.D()
	if u.TLS != nil {
		tc, err := auth.ClientTLS(u.TLS)
		if err != nil {
			return fmt.Errorf("upstream.%w", err)
		}
		p.proxy.UpstreamTLS = tc
	}
	if u.SASL == nil {
		return nil
	}
	mech, err := auth.ClientMechanism(u.SASL)
	switch {
	case errors.Is(err, auth.ErrPassthrough):
		// Clients' own SASL exchanges are relayed as they are.
	case err != nil:
		return fmt.Errorf("upstream.sasl: %w", err)
	default:
		user := u.SASL.Username
		p.proxy.UpstreamAuth = func(ctx context.Context, conn net.Conn, addr string) (time.Duration, error) {
			host, _, _ := net.SplitHostPort(addr)
			lt, err := auth.Authenticate(ctx, conn, mech, host)
			if err != nil && user != "" {
				// Which identity failed: the broker's error names none.
				err = fmt.Errorf("as principal %q (upstream.sasl): %w", user, err)
			}
			return lt, err
		}
	}
	return nil
}

// brokerConfig is the built-in broker's configuration (the broker itself
// is opened by New).
func brokerConfig(cfg *configs.Config, log *slog.Logger) (*broker.Config, error) {
	fsync, err := storage.ParseFsyncPolicy(cfg.Broker.Fsync)
	if err != nil {
		return nil, err
	}
	return &broker.Config{
		DataDir:          cfg.Broker.DataDir,
		Fsync:            fsync,
		FsyncInterval:    cfg.Broker.FsyncInterval.D(),
		AutoCreateTopics: cfg.Broker.AutoCreateTopics,
		TopicDefaults:    cfg.Broker.Defaults,
		NodeID:           int32(cfg.Broker.NodeID),

		CleanerDedupeBufferBytes: int64(cfg.Broker.CleanerDedupeBuffer),
		CleanerBackoff:           cfg.Broker.CleanerBackoff.D(),
		Logger:                   log,
	}, nil
}
