package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// ChildStats is what a configured gateway's metrics counted over its life
// (all zero, with Metrics false, when the metrics hooks were detached).
type ChildStats struct {
	Metrics      bool    `json:"metrics"` // false: hooks detached, the counts below are not known
	Requests     float64 `json:"requests"`
	Denials      float64 `json:"policy_denials"`
	AuditWritten float64 `json:"audit_written"`
	AuditDropped float64 `json:"audit_dropped"`
	// PolicyRules is how many rules the compiled policy holds.
	PolicyRules int `json:"policy_rules"`
}

// configured is a gateway wired from a configuration file.
type configured struct {
	info    childInfo
	srv     *proxy.Server
	trail   *audit.Trail
	reg     *prometheus.Registry // nil: metrics detached
	rules   int
	log     *slog.Logger
	stopped bool
}

// startConfigured starts the gateway for an upstream-mode configuration the
// way cmd/tollgate's serve does for `tollgate --config FILE`: a metrics
// registry whose collectors are the proxy's hooks and the audit trail's,
// the audit trail from the audit section, and the compiled policy. The
// admin HTTP server is not started (the benchmark scrapes nothing, and the
// collectors run whether or not it is). withMetrics false detaches the
// metrics hooks: a benchmark-only variant that measures what the
// collectors cost; the product has no such switch.
//
// cmd/tollgate cannot be imported, so this mirrors its buildOptions for the
// fields that matter in upstream mode; TLS to the upstream is refused
// (kfake speaks plaintext).
func startConfigured(cfg *configs.Config, withMetrics bool, log *slog.Logger) (*configured, error) {
	if !cfg.UpstreamMode() {
		return nil, errors.New("configured gateway: the configuration has no upstream (the benchmark forwards to kfake)")
	}
	if cfg.Upstream.TLS != nil {
		return nil, errors.New("configured gateway: upstream TLS is not supported by the benchmark")
	}
	g := &configured{log: log}
	var (
		hooks      proxy.Hooks
		auditHooks audit.Hooks
	)
	if withMetrics {
		g.reg = prometheus.NewRegistry()
		m := metrics.New(g.reg)
		hooks, auditHooks = m, m
	}
	trail, err := audit.New(cfg.Audit, auditHooks, audit.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("configured gateway: audit: %w", err)
	}
	g.trail = trail
	eng, warnings, err := policy.Compile(cfg.Policy)
	if err != nil {
		trail.Close()
		return nil, fmt.Errorf("configured gateway: policy: %w", err)
	}
	for _, w := range warnings {
		log.Warn("policy", "warning", w.String())
	}
	g.rules = len(cfg.Policy.Rules)
	opts := proxy.Options{
		Bootstrap:                cfg.Upstream.Bootstrap,
		DialTimeout:              cfg.Upstream.DialTimeout.D(),
		MetadataRefresh:          cfg.Upstream.MetadataRefresh.D(),
		MaxFrameBytes:            int32(min(int64(cfg.Limits.MaxFrameBytes), 1<<31-1)),
		MaxInFlight:              cfg.Limits.MaxInFlight,
		MaxConnections:           cfg.Limits.MaxConnections,
		MaxConnectionsPerAddress: cfg.Limits.MaxConnectionsPerAddress,
		IdleTimeout:              cfg.Limits.IdleTimeout.D(),
		FrameTimeout:             cfg.Limits.FrameTimeout.D(),
		DrainTimeout:             cfg.Limits.DrainTimeout.D(),
		Logger:                   log,
		Hooks:                    hooks,
		Audit:                    trail,
	}
	for i := range cfg.Listeners {
		l := &cfg.Listeners[i]
		base := -1
		if l.BrokerPortBase != nil {
			base = *l.BrokerPortBase
		}
		opts.Listeners = append(opts.Listeners, proxy.ListenerOptions{
			Name:           l.Name,
			Listen:         l.Listen,
			Advertise:      l.AdvertisedHost(),
			AdvertisePort:  l.AdvertisedPort(0),
			BrokerPortBase: base,
		})
	}
	srv, err := proxy.New(opts)
	if err != nil {
		trail.Close()
		return nil, fmt.Errorf("configured gateway: %w", err)
	}
	srv.SetPolicy(eng)
	if err := srv.Start(context.Background()); err != nil {
		trail.Close()
		return nil, fmt.Errorf("configured gateway: start: %w", err)
	}
	g.srv = srv
	g.info = childInfo{Role: Gateway, Bootstrap: srv.Addr(0).String()}
	return g, nil
}

// stop shuts the gateway down, closes the audit trail (flushing its
// queue), and returns the counters. Later calls return nil.
func (g *configured) stop() *ChildStats {
	if g.stopped {
		return nil
	}
	g.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.srv.Shutdown(ctx); err != nil {
		g.log.Warn("gateway shutdown", "err", err)
	}
	if err := g.trail.Close(); err != nil {
		g.log.Warn("close audit trail", "err", err)
	}
	st := &ChildStats{Metrics: g.reg != nil, PolicyRules: g.rules}
	if g.reg == nil {
		return st
	}
	mfs, err := g.reg.Gather()
	if err != nil {
		g.log.Warn("gather metrics", "err", err)
	}
	for _, mf := range mfs {
		var dst *float64
		switch strings.TrimPrefix(mf.GetName(), "tollgate_") {
		case "requests_total":
			dst = &st.Requests
		case "policy_denials_total":
			dst = &st.Denials
		case "audit_records_written_total":
			dst = &st.AuditWritten
		case "audit_records_dropped_total":
			dst = &st.AuditDropped
		default:
			continue
		}
		*dst = sumCounters(mf.GetMetric())
	}
	return st
}

func sumCounters(ms []*dto.Metric) float64 {
	var n float64
	for _, m := range ms {
		if c := m.GetCounter(); c != nil {
			n += c.GetValue()
		}
	}
	return n
}
