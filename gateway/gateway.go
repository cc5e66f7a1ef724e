// Package gateway assembles a running tollgate from a validated
// configuration: the backend (an upstream cluster or the built-in broker),
// listener security (TLS, SASL), the gateway's own upstream identity, the
// policy engine, the audit trail, metrics and the admin server. The
// command and the benchmark start gateways through it, so what is
// measured is what runs.
package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/broker"
	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// Gateway is one assembled tollgate.
type Gateway struct {
	Server   *proxy.Server
	Broker   *broker.Broker // nil in upstream mode
	Metrics  *metrics.Metrics
	Registry *prometheus.Registry
	Trail    *audit.Trail

	cfg          *configs.Config
	log          *slog.Logger
	admin        *metrics.AdminServer
	closeBackend func()
}

// Option changes how a gateway is assembled.
type Option func(*settings)

type settings struct {
	noMetrics bool
	tweak     func(*proxy.Options)
}

// WithoutMetricsHooks leaves the metrics hooks detached (the registry
// still exists). Only the benchmark uses it, to measure what metrics cost.
func WithoutMetricsHooks() Option { return func(s *settings) { s.noMetrics = true } }

// WithProxyOptions lets the caller adjust the proxy options last.
func WithProxyOptions(f func(*proxy.Options)) Option { return func(s *settings) { s.tweak = f } }

// New assembles a gateway from cfg without starting it; the built-in
// broker is opened (and recovered) here when there is no upstream.
func New(cfg *configs.Config, log *slog.Logger, opts ...Option) (*Gateway, error) {
	var st settings
	for _, o := range opts {
		o(&st)
	}
	g := &Gateway{cfg: cfg, log: log, Registry: prometheus.NewRegistry()}
	g.Metrics = metrics.New(g.Registry)
	trail, err := audit.New(cfg.Audit, g.Metrics, audit.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	g.Trail = trail
	var obs broker.Observer
	if !st.noMetrics {
		obs = g.Metrics
	}
	popts, b, closeBackend, err := buildOptions(cfg, log, obs)
	if err != nil {
		trail.Close()
		return nil, err
	}
	g.Broker, g.closeBackend = b, closeBackend
	popts.Audit = trail
	if !st.noMetrics {
		popts.Hooks = g.Metrics
		if b != nil {
			g.Metrics.WatchBroker(brokerStats{b})
		}
	}
	if st.tweak != nil {
		st.tweak(&popts)
	}
	fail := func(err error) (*Gateway, error) {
		g.closeBackend()
		trail.Close()
		return nil, err
	}
	if g.Server, err = proxy.New(popts); err != nil {
		return fail(err)
	}
	eng, warnings, err := policy.Compile(cfg.Policy)
	if err != nil {
		return fail(fmt.Errorf("policy: %w", err))
	}
	for _, w := range warnings {
		log.Warn("policy", "warning", w.String())
	}
	for _, w := range cfg.Warnings() {
		log.Warn("configuration", "warning", w)
	}
	g.Server.SetPolicy(eng)
	return g, nil
}

// Start opens the listeners and, if configured, the admin server.
func (g *Gateway) Start(ctx context.Context) error {
	if err := g.Server.Start(ctx); err != nil {
		return err
	}
	if g.cfg.Admin.Enabled() {
		admin, err := metrics.NewAdmin(g.cfg.Admin.Listen, g.Registry, g.Server.Ready, g.Trail)
		if err != nil {
			g.Server.Shutdown(context.Background())
			return err
		}
		admin.Start()
		g.admin = admin
		g.log.Info("admin server", "addr", admin.Addr().String())
	}
	return nil
}

// Close drains the gateway (bounded by ctx, or the drain timeout when ctx
// has no deadline), then closes the admin server, the backend and the
// audit trail.
func (g *Gateway) Close(ctx context.Context) error {
	err := g.Server.Shutdown(ctx)
	if g.admin != nil {
		g.admin.Shutdown(context.Background())
	}
	g.closeBackend()
	g.Trail.Close()
	return err
}

// Reload loads file and swaps in its policy, keeping the rate budgets of
// rules whose name and rate are unchanged. Other sections need a restart.
func (g *Gateway) Reload(file string) error {
	cfg, err := configs.Load(file)
	if err != nil {
		return err
	}
	eng, warnings, err := policy.CompileFrom(g.Server.Policy(), cfg.Policy)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		g.log.Warn("policy", "warning", w.String())
	}
	g.Server.SetPolicy(eng)
	g.log.Info("policy reloaded", "rules", eng.Rules())
	return nil
}

// buildOptions turns the validated configuration into the proxy's runtime
// plan, opening the built-in broker when there is no upstream.
func buildOptions(cfg *configs.Config, log *slog.Logger, obs broker.Observer) (proxy.Options, *broker.Broker, func(), error) {
	opts := proxy.Options{
		MaxFrameBytes:            int32(min(int64(cfg.Limits.MaxFrameBytes), 1<<31-1)),
		MaxInFlight:              cfg.Limits.MaxInFlight,
		MaxConnections:           cfg.Limits.MaxConnections,
		MaxConnectionsPerAddress: cfg.Limits.MaxConnectionsPerAddress,
		MaxPreauthFrameBytes:     int32(min(int64(cfg.Limits.MaxPreauthFrameBytes), 1<<31-1)),
		ConnectionRatePerAddress: float64(cfg.Limits.ConnectionRatePerAddress),
		AuthFailuresPerAddress:   cfg.Limits.AuthFailuresPerAddress,
		AuthLockout:              cfg.Limits.AuthLockout.D(),
		AuthTimeout:              cfg.Limits.AuthTimeout.D(),
		IdleTimeout:              cfg.Limits.IdleTimeout.D(),
		FrameTimeout:             cfg.Limits.FrameTimeout.D(),
		DrainTimeout:             cfg.Limits.DrainTimeout.D(),
		Logger:                   log,
	}
	for i := range cfg.Listeners {
		l := &cfg.Listeners[i]
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
		if err := listenerSecurity(&lo, l, log); err != nil {
			return opts, nil, nil, err
		}
		opts.Listeners = append(opts.Listeners, lo)
	}
	if cfg.UpstreamMode() {
		u := cfg.Upstream
		opts.Bootstrap = u.Bootstrap
		opts.DialTimeout = u.DialTimeout.D()
		opts.MetadataRefresh = u.MetadataRefresh.D()
		if u.TLS != nil {
			tc, err := upstreamTLS(u.TLS)
			if err != nil {
				return opts, nil, nil, err
			}
			opts.UpstreamTLS = tc
		}
		if u.SASL != nil {
			mech, err := auth.ClientMechanism(u.SASL)
			switch {
			case errors.Is(err, auth.ErrPassthrough):
				// Clients' own SASL exchanges are relayed as they are.
			case err != nil:
				return opts, nil, nil, fmt.Errorf("upstream.sasl: %w", err)
			default:
				opts.UpstreamAuth = func(ctx context.Context, conn net.Conn, addr string) (time.Duration, error) {
					host, _, _ := net.SplitHostPort(addr)
					return auth.Authenticate(ctx, conn, mech, host)
				}
			}
		}
		return opts, nil, func() {}, nil
	}
	policy, err := storage.ParseFsyncPolicy(cfg.Broker.Fsync)
	if err != nil {
		return opts, nil, nil, err
	}
	b, err := broker.Open(broker.Config{
		DataDir:          cfg.Broker.DataDir,
		Fsync:            policy,
		FsyncInterval:    cfg.Broker.FsyncInterval.D(),
		AutoCreateTopics: cfg.Broker.AutoCreateTopics,
		TopicDefaults:    cfg.Broker.Defaults,
		Logger:           log,
		Observer:         obs,
	})
	if err != nil {
		return opts, nil, nil, fmt.Errorf("open built-in broker: %w", err)
	}
	log.Info("built-in broker", "data_dir", cfg.Broker.DataDir, "fsync", cfg.Broker.Fsync)
	opts.Local = proxy.LocalFunc(func(remote string) proxy.LocalConn { return b.NewConn(remote) })
	return opts, b, func() {
		if err := b.Close(); err != nil {
			log.Error("close built-in broker", "err", err)
		}
	}, nil
}

// upstreamTLS builds the TLS config for upstream connections.
func upstreamTLS(c *configs.UpstreamTLS) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // operator's explicit choice, for testing
	}
	if c.CA != "" {
		pem, err := os.ReadFile(c.CA)
		if err != nil {
			return nil, fmt.Errorf("upstream.tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("upstream.tls.ca: no PEM certificates in %s", c.CA)
		}
		tc.RootCAs = pool
	}
	if c.Cert != "" || c.Key != "" {
		cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("upstream.tls.cert/key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// listenerSecurity turns a listener's tls and sasl sections into the
// proxy's TLS config, principal mapper and SASL server.
func listenerSecurity(lo *proxy.ListenerOptions, l *configs.Listener, log *slog.Logger) error {
	if l.TLS != nil {
		tc, err := auth.ServerTLS(l.TLS)
		if err != nil {
			return fmt.Errorf("listener %s tls: %w", l.Name, err)
		}
		lo.TLS = tc
		if l.TLS.ClientCA != "" {
			pm, err := auth.NewPrincipalMapper(l.TLS)
			if err != nil {
				return fmt.Errorf("listener %s tls principal: %w", l.Name, err)
			}
			lo.Principal = pm.Principal
		}
	}
	if l.SASL != nil {
		srv, err := auth.NewServer(l.SASL, log)
		if err != nil {
			return fmt.Errorf("listener %s sasl: %w", l.Name, err)
		}
		lo.SASL = saslServer{srv}
	}
	return nil
}

// saslServer adapts *auth.Server to proxy.SASLServer.
type saslServer struct{ s *auth.Server }

func (a saslServer) Mechanisms() []string { return a.s.Mechanisms() }

func (a saslServer) Start(mechanism string) (proxy.SASLExchange, error) {
	ex, err := a.s.Start(mechanism)
	if err != nil {
		return nil, err
	}
	return ex, nil
}

// brokerStats adapts the built-in broker's stats to the metrics collector
// (neither package imports the other).
type brokerStats struct{ b *broker.Broker }

var _ metrics.BrokerStats = brokerStats{}

func (s brokerStats) Partitions() []metrics.PartitionStat {
	ps := s.b.PartitionStats()
	out := make([]metrics.PartitionStat, len(ps))
	for i, p := range ps {
		out[i] = metrics.PartitionStat{Topic: p.Topic, Partition: p.Partition,
			LogStartOffset: p.LogStartOffset, LogEndOffset: p.LogEndOffset, SizeBytes: p.SizeBytes}
	}
	return out
}

func (s brokerStats) GroupLag() []metrics.GroupLag {
	gl := s.b.GroupLag()
	out := make([]metrics.GroupLag, len(gl))
	for i, g := range gl {
		out[i] = metrics.GroupLag{Group: g.Group, Topic: g.Topic, Partition: g.Partition, Lag: g.Lag, Members: g.Members}
	}
	return out
}

func (s brokerStats) ActiveTransactions() int { return s.b.ActiveTransactions() }
