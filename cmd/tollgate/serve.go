package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
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

var configsLoad = configs.Load

// loadConfig builds the configuration from an optional file and the flags.
// Flags are a front for the same schema and override the file.
func loadConfig(args []string, stderr io.Writer) (*configs.Config, string, error) {
	fs := flag.NewFlagSet("tollgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		file      = fs.String("config", "", "YAML configuration file (flags override it)")
		upstream  = fs.String("upstream", "", "comma-separated upstream bootstrap brokers (upstream.bootstrap); empty: the built-in broker")
		listen    = fs.String("listen", "", "bind address of the first listener (default 127.0.0.1:9092)")
		advertise = fs.String("advertise", "", "host clients are told to connect to (listeners[0].advertise)")
		portBase  = fs.Int("broker-port-base", -1, "port of upstream node 0; node N is served at base+N (default: listen port + 1; 0: any free port)")
		dataDir   = fs.String("data-dir", "", "built-in broker data directory (default ./tollgate-data)")
		fsync     = fs.String("fsync", "", "built-in broker durability: always | interval | never (default always)")
		admin     = fs.String("admin", "", "admin HTTP address for /metrics /healthz /readyz, or off")
		logLevel  = fs.String("log-level", "", "debug | info | warn | error")
		logFormat = fs.String("log-format", "", "text | json")
	)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tollgate [flags]\n       tollgate check-config [--print] FILE\n       tollgate bench [flags]\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	if fs.NArg() > 0 {
		return nil, "", fmt.Errorf("unexpected argument %q (subcommands: check-config, bench, tap, version)", fs.Arg(0))
	}
	cfg := configs.Default()
	if *file != "" {
		var err error
		if cfg, err = configs.Load(*file); err != nil {
			return nil, "", err
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["upstream"] {
		var bs []string
		for _, b := range strings.Split(*upstream, ",") {
			if b = strings.TrimSpace(b); b != "" {
				bs = append(bs, b)
			}
		}
		cfg.Upstream = configs.NewUpstream(bs...)
	}
	if set["listen"] {
		cfg.Listeners[0].Listen = *listen
	}
	if set["advertise"] {
		cfg.Listeners[0].Advertise = *advertise
	}
	if set["broker-port-base"] {
		cfg.Listeners[0].BrokerPortBase = portBase
	}
	if set["data-dir"] {
		cfg.Broker.DataDir = *dataDir
	}
	if set["fsync"] {
		cfg.Broker.Fsync = *fsync
	}
	if set["admin"] {
		cfg.Admin.Listen = *admin
	}
	if set["log-level"] {
		cfg.Log.Level = *logLevel
	}
	if set["log-format"] {
		cfg.Log.Format = *logFormat
	}
	if err := cfg.Validate(); err != nil {
		return nil, "", err
	}
	return cfg, *file, nil
}

// serve runs the gateway until ctx is cancelled, then drains. file is
// the configuration file ("" when there is none), re-read on SIGHUP and
// when it changes, to apply a new policy without dropping connections.
func serve(ctx context.Context, cfg *configs.Config, file string, logOut io.Writer) error {
	log := newLogger(cfg.Log.Level, cfg.Log.Format, logOut)
	slog.SetDefault(log)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	trail, err := audit.New(cfg.Audit, m, audit.WithLogger(log))
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer trail.Close()
	opts, b, closeBackend, err := buildOptions(cfg, log, m)
	if err != nil {
		return err
	}
	defer closeBackend()
	opts.Hooks, opts.Audit = m, trail
	if b != nil {
		m.WatchBroker(brokerStats{b})
	}
	srv, err := proxy.New(opts)
	if err != nil {
		return err
	}
	eng, warnings, err := policy.Compile(cfg.Policy)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	for _, w := range warnings {
		log.Warn("policy", "warning", w.String())
	}
	srv.SetPolicy(eng)
	if err := srv.Start(ctx); err != nil {
		return err
	}
	if cfg.Admin.Enabled() {
		admin, err := metrics.NewAdmin(cfg.Admin.Listen, reg, srv.Ready, trail)
		if err != nil {
			srv.Shutdown(context.Background())
			return err
		}
		admin.Start()
		log.Info("admin server", "addr", admin.Addr().String())
		defer admin.Shutdown(context.Background())
	}
	if file != "" {
		go reloadLoop(ctx, file, srv, m, log)
	}
	<-ctx.Done()
	log.Info("shutting down", "drain_timeout", cfg.Limits.DrainTimeout.D())
	if err := srv.Shutdown(context.Background()); err != nil {
		log.Warn("shutdown incomplete", "err", err)
	}
	return nil
}

// reloadLoop re-reads the configuration file on SIGHUP and when its
// modification time or size changes (checked every reloadPoll), and
// installs the new policy. An invalid file is refused with its errors
// logged and counted; the rules in force stay. Only the policy section is
// applied live; other sections need a restart (logged when they differ).
func reloadLoop(ctx context.Context, file string, srv *proxy.Server, m *metrics.Metrics, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	last := fileStamp(file)
	t := time.NewTicker(reloadPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			log.Info("SIGHUP: reloading configuration", "file", file)
		case <-t.C:
			st := fileStamp(file)
			if st == last {
				continue
			}
			last = st
			log.Info("configuration file changed: reloading", "file", file)
		}
		if err := reloadPolicy(file, srv); err != nil {
			m.PolicyReload(false)
			log.Error("configuration reload refused; the rules in force stay", "err", err)
			continue
		}
		m.PolicyReload(true)
	}
}

const reloadPoll = 2 * time.Second

func fileStamp(file string) string {
	st, err := os.Stat(file)
	if err != nil {
		return ""
	}
	return fmt.Sprint(st.ModTime().UnixNano(), st.Size())
}

// reloadPolicy loads file and swaps in its policy, keeping the rate
// budgets of rules whose name and rate are unchanged.
func reloadPolicy(file string, srv *proxy.Server) error {
	cfg, err := configs.Load(file)
	if err != nil {
		return err
	}
	eng, warnings, err := policy.CompileFrom(srv.Policy(), cfg.Policy)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		slog.Warn("policy", "warning", w.String())
	}
	srv.SetPolicy(eng)
	slog.Info("policy reloaded", "rules", eng.Rules())
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
