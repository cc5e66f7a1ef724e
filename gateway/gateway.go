// Package gateway assembles a running tollgate from a validated
// configuration: the backend (an upstream cluster or the built-in broker),
// listener security (TLS, SASL), the gateway's own upstream identity, the
// policy engine, the audit trail, metrics and the admin server. The
// command and the benchmark start gateways through it, so what is
// measured is what runs.
package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/broker"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/lograte"
	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/proxy"
	"github.com/tollgate-kafka/tollgate/webui"
)

// Gateway is one assembled tollgate.
type Gateway struct {
	Server   *proxy.Server
	Broker   *broker.Broker // nil in upstream mode
	Metrics  *metrics.Metrics
	Registry *prometheus.Registry
	Trail    *audit.Trail

	cfg          *configs.Config
	plan         atomic.Pointer[Plan] // the plan in force (a reload swaps it); owned, closed with the gateway
	log          *slog.Logger
	admin        *metrics.AdminServer
	console      *webui.Console // nil unless the admin server serves /ui/
	policy       policyState
	quotas       *policy.Quotas // client quotas the gateway keeps (quotas.go); nil unless policy.quotas is enforce
	closeBackend func()
	newDataDir   string // created by Open for the built-in broker; removed if the start fails (datadir.go)
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

// New provisions cfg (Provision) and opens the plan (Open), without
// starting the gateway.
func New(cfg *configs.Config, log *slog.Logger, opts ...Option) (*Gateway, error) {
	plan, err := Provision(cfg, log)
	if err != nil {
		return nil, err
	}
	g, err := Open(plan, log, opts...)
	if err != nil {
		plan.Close()
		return nil, err
	}
	return g, nil
}

// Open assembles a gateway from a provisioned plan without starting it:
// the metrics, the audit trail and the backend (the built-in broker is
// opened and recovered here when there is no upstream). The gateway owns
// the plan from then on; on error the plan is still the caller's.
func Open(plan *Plan, log *slog.Logger, opts ...Option) (*Gateway, error) {
	var st settings
	for _, o := range opts {
		o(&st)
	}
	cfg := plan.Config
	g := &Gateway{cfg: cfg, log: log, Registry: prometheus.NewRegistry()}
	g.plan.Store(plan)
	g.Metrics = metrics.New(g.Registry)
	g.Metrics.WatchRecordPipes(proxy.RecordPipeStats)
	g.Metrics.WatchFetchAhead(proxy.FetchAheadStats)
	g.Metrics.WatchRequestFrames(proxy.RequestFrameStats)
	aopts := []audit.Option{audit.WithLogger(log)}
	var kafkaSink *audit.KafkaSink
	if k := cfg.Audit.Sink.Kafka; k != nil && cfg.Audit.Enabled() {
		var err error
		if kafkaSink, err = kafkaAuditSink(cfg, k); err != nil {
			return nil, err
		}
		aopts = append(aopts, audit.WithSink(kafkaSink)) // closed by the trail from here on
	}
	trail, err := audit.New(cfg.Audit, g.Metrics, aopts...)
	if err != nil {
		if kafkaSink != nil {
			kafkaSink.Close()
		}
		return nil, fmt.Errorf("audit: %w", err)
	}
	g.Trail = trail
	var obs broker.Observer
	if !st.noMetrics {
		obs = g.Metrics
	}
	popts := plan.proxy
	popts.Listeners = append([]proxy.ListenerOptions(nil), plan.proxy.Listeners...)
	if plan.broker != nil {
		g.newDataDir = newDataDir(plan.broker.DataDir)
	}
	b, closeBackend, err := openBackend(plan, &popts, log, obs)
	if err != nil {
		trail.Close()
		return nil, err
	}
	g.Broker, g.closeBackend = b, closeBackend
	if g.quotas, err = openQuotas(cfg, log); err != nil { // quotas.go
		g.closeBackend()
		trail.Close()
		return nil, err
	}
	popts.Quotas = g.quotas
	alog := lograte.New(log, lograte.Options{}) // the answerers' alter lines (client-triggered)
	closeBackend = g.closeBackend
	g.closeBackend = func() { closeBackend(); alog.Close() }
	refused := newAnswerRefusals(g.Registry)
	// After the ACL store's (plan.go, acls.go): quotas.go, scram.go.
	popts.Answerer = withAnswerer(popts.Answerer, newQuotaAnswerer(g.quotas, alog, refused, g.mayAlter))
	popts.Answerer = withAnswerer(popts.Answerer, newSCRAMAnswerer(popts.Listeners, alog, refused, g.mayAlter))
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
	if g.Server, err = proxy.New(popts); err != nil {
		g.discardNewDataDir()
		g.closeBackend()
		trail.Close()
		return nil, err
	}
	for _, w := range plan.Warnings {
		log.Warn("policy", "warning", w.String())
	}
	for _, w := range cfg.Warnings() {
		log.Warn("configuration", "warning", w)
	}
	g.Server.SetPolicy(plan.Policy)
	g.policy.installed(cfg.Policy, time.Now())
	return g, nil
}

// Start opens the listeners and, if configured, the admin server. After
// a failed Start the gateway can only be closed; a data directory Open
// created for the built-in broker is removed (datadir.go).
func (g *Gateway) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			g.discardNewDataDir()
		}
		g.newDataDir = ""
	}()
	if err := g.Server.Start(ctx); err != nil {
		return err
	}
	if g.cfg.Admin.Enabled() {
		admin, err := metrics.NewAdmin(g.cfg.Admin.Listen, g.Registry, g.Server.Ready, g.Trail)
		if err == nil {
			admin.CountRefusals(g.Registry)
			err = secureAdmin(admin, g.cfg.Admin)
		}
		if err == nil && g.cfg.Admin.UI.Enabled {
			err = g.mountConsole(admin)
		}
		if err != nil {
			if admin != nil {
				admin.Shutdown(context.Background())
			}
			g.Server.Shutdown(context.Background())
			return err
		}
		admin.Start()
		g.admin = admin
		g.log.Info("admin server", "addr", admin.Addr().String())
	}
	return nil
}

// AdminAddr is the admin server's bound address (nil when it is off or
// not started).
func (g *Gateway) AdminAddr() net.Addr {
	if g.admin == nil {
		return nil
	}
	return g.admin.Addr()
}

// adminShutdownTimeout bounds the admin server's shutdown in Close: a
// request still running after it (a console page waiting on Kafka, a
// scrape) has its connection closed.
const adminShutdownTimeout = 5 * time.Second

// Close drains the gateway (bounded by ctx, or the drain timeout when ctx
// has no deadline), then closes the admin server, the backend and the
// audit trail.
func (g *Gateway) Close(ctx context.Context) error {
	err := g.Server.Shutdown(ctx)
	if g.admin != nil {
		// ctx may be spent by the drain: the admin server gets its own bound.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adminShutdownTimeout)
		g.admin.Shutdown(actx)
		cancel()
	}
	if g.console != nil {
		g.console.Close()
	}
	g.closeBackend()
	g.Trail.Close()
	g.plan.Load().Close()
	return err
}

// openBackend opens the plan's backend: nothing in upstream mode, the
// built-in broker otherwise (installed as opts.Local).
func openBackend(plan *Plan, opts *proxy.Options, log *slog.Logger, obs broker.Observer) (*broker.Broker, func(), error) {
	if plan.broker == nil {
		return nil, func() {}, nil
	}
	bc := *plan.broker
	bc.Observer = obs
	b, err := broker.Open(bc)
	if err != nil {
		return nil, nil, fmt.Errorf("open built-in broker: %w", err)
	}
	log.Info("built-in broker", "data_dir", plan.Config.Broker.DataDir, "fsync", plan.Config.Broker.Fsync)
	opts.Local = proxy.LocalFunc(func(remote string) proxy.LocalConn { return b.NewConn(remote) })
	return b, func() {
		if err := b.Close(); err != nil {
			log.Error("close built-in broker", "err", err)
		}
	}, nil
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
			LogStartOffset: p.LogStartOffset, LogEndOffset: p.LogEndOffset, SizeBytes: p.SizeBytes,
			Compacted: p.Compacted, DirtyRatio: p.DirtyRatio, CleanerRuns: p.CleanerRuns, CleanerReclaimedBytes: p.CleanerReclaim,
			KeylessRefused: p.KeylessRefused}
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

// OffsetsTopicDropped feeds tollgate_broker_consumer_offsets_dropped_total.
func (s brokerStats) OffsetsTopicDropped() int64 { return s.b.OffsetsTopicDropped() }

var _ metrics.ShareStatsSource = brokerStats{}

func (s brokerStats) ShareStats() []metrics.ShareStat {
	ss := s.b.ShareStats()
	out := make([]metrics.ShareStat, len(ss))
	for i, st := range ss {
		out[i] = metrics.ShareStat{Group: st.Group, Topic: st.Topic, Partition: st.Partition,
			StartOffset: st.StartOffset, Acquired: st.Acquired, Lag: st.Lag}
	}
	return out
}

func (s brokerStats) ShareCounters() metrics.ShareCounters {
	c := s.b.ShareCounters()
	return metrics.ShareCounters{LockExpired: c.LockExpired, Archived: c.Archived, AckErrors: c.AckErrors}
}
