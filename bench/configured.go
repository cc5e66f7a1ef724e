package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/gateway"
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
	// Single-port Fetch record sets moved through pipes, those of them
	// that continued through memory past their pipes, and part answers
	// read into memory for want of a pipe (the
	// tollgate_single_port_*_total counters): how much of what crossed
	// went through the gateway's memory.
	PipedSets    float64 `json:"piped_record_sets,omitempty"`
	SpilledSets  float64 `json:"spilled_record_sets,omitempty"`
	UnpipedParts float64 `json:"unpiped_fetch_parts,omitempty"`
	// Single-port fetch-aheads sent, used by the client's next Fetch, and
	// dropped because it asked otherwise (tollgate_single_port_fetch_ahead_*).
	AheadSent   float64 `json:"fetch_ahead_sent,omitempty"`
	AheadUsed   float64 `json:"fetch_ahead_used,omitempty"`
	AheadMissed float64 `json:"fetch_ahead_missed,omitempty"`
}

// configured is a gateway assembled from a configuration file by package
// gateway, exactly as `tollgate --config FILE` assembles it.
type configured struct {
	info        childInfo
	g           *gateway.Gateway
	withMetrics bool
	rules       int
	log         *slog.Logger
	stopped     bool
}

// startConfigured starts the gateway for an upstream-mode configuration
// through package gateway (the same assembly as cmd/tollgate). The admin
// HTTP server is started only when admin is an address (the soak suite
// scrapes its /metrics); "" leaves it off, and the collectors run whether
// or not it is. withMetrics false detaches the
// metrics hooks: a benchmark-only variant that measures what the
// collectors cost; the product has no such switch. TLS to the upstream and
// SASL listeners are refused: kfake speaks plaintext and the benchmark's
// clients do not authenticate.
func startConfigured(cfg *configs.Config, withMetrics bool, admin string, log *slog.Logger) (*configured, error) {
	if !cfg.UpstreamMode() {
		return nil, errors.New("configured gateway: the configuration has no upstream (the benchmark forwards to kfake)")
	}
	if cfg.Upstream.TLS != nil {
		return nil, errors.New("configured gateway: upstream TLS is not supported by the benchmark")
	}
	for _, l := range cfg.Listeners {
		if l.SASL != nil {
			return nil, fmt.Errorf("configured gateway: listener %s: SASL is not supported by the benchmark", l.Name)
		}
	}
	cfg.Admin.Listen = configs.AdminOff
	if admin != "" {
		cfg.Admin.Listen = admin
	}
	var opts []gateway.Option
	if !withMetrics {
		opts = append(opts, gateway.WithoutMetricsHooks())
	}
	g, err := gateway.New(cfg, log, opts...)
	if err != nil {
		return nil, fmt.Errorf("configured gateway: %w", err)
	}
	if err := g.Start(context.Background()); err != nil {
		g.Close(context.Background())
		return nil, fmt.Errorf("configured gateway: start: %w", err)
	}
	info := childInfo{Role: Gateway, Bootstrap: g.Server.Addr(0).String()}
	if a := g.AdminAddr(); a != nil {
		info.Admin = a.String()
	}
	return &configured{
		info:        info,
		g:           g,
		withMetrics: withMetrics,
		rules:       len(cfg.Policy.Rules),
		log:         log,
	}, nil
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
	if err := g.g.Close(ctx); err != nil {
		g.log.Warn("gateway shutdown", "err", err)
	}
	st := &ChildStats{Metrics: g.withMetrics, PolicyRules: g.rules}
	if !g.withMetrics {
		return st
	}
	mfs, err := g.g.Registry.Gather()
	if err != nil {
		g.log.Warn("gather metrics", "err", err)
	}
	// Each counter the report carries, by its name without the namespace.
	into := map[string]*float64{
		"requests_total":                        &st.Requests,
		"policy_denials_total":                  &st.Denials,
		"audit_records_written_total":           &st.AuditWritten,
		"audit_records_dropped_total":           &st.AuditDropped,
		"single_port_piped_record_sets_total":   &st.PipedSets,
		"single_port_spilled_record_sets_total": &st.SpilledSets,
		"single_port_unpiped_fetch_parts_total": &st.UnpipedParts,
		"single_port_fetch_ahead_sent_total":    &st.AheadSent,
		"single_port_fetch_ahead_used_total":    &st.AheadUsed,
		"single_port_fetch_ahead_missed_total":  &st.AheadMissed,
	}
	for _, mf := range mfs {
		if dst, ok := into[strings.TrimPrefix(mf.GetName(), "tollgate_")]; ok {
			*dst = sumCounters(mf.GetMetric())
		}
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
