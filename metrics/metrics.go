// Package metrics holds tollgate's Prometheus collectors and the admin
// HTTP server (/metrics, /healthz, /readyz, /tap).
//
// The gateway and the broker feed it through the hook methods of
// Metrics; nothing here reaches into them. Everything registers into the
// prometheus.Registerer given to New, never the global one.
//
// Label values come from closed sets. API names come from kmsg's table
// (a key it does not know is "unknown"); outcomes, close reasons and
// malformed-frame causes are enums, and a value outside the enum becomes
// "other"; close reasons and malformed causes are the gateway's enums;
// listener names, rule names and broker ids come from configuration or
// the cluster; each of these is still capped (the first N
// distinct values get their own series, later ones share "other"). No
// client-controlled string — client id, topic named by a client, address
// — ever becomes a label on the gateway's metrics.
package metrics

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/tollgate-kafka/tollgate/audit"
)

const namespace = "tollgate"

// Outcome values for Request.
const (
	OutcomeOK         = "ok"          // forwarded and answered without a top-level error
	OutcomeError      = "error"       // answered with an error, or failed
	OutcomeDenied     = "denied"      // refused by policy
	OutcomeThrottled  = "throttled"   // delayed by a rate limit
	OutcomeNoResponse = "no_response" // Produce acks=0
)

// Outcomes and audit drop reasons are fixed enums: any other value is
// counted as "other".
var (
	outcomes    = []string{OutcomeOK, OutcomeError, OutcomeDenied, OutcomeThrottled, OutcomeNoResponse}
	dropReasons = []string{audit.DropQueueFull, audit.DropSinkError, audit.DropClosed, audit.DropTapSlow}
)

// Caps on label values that come from configuration or the cluster.
// Close reasons and malformed-frame causes are the gateway's own enums
// (proxy's closeReason names: client_closed, idle_timeout, shutdown,
// malformed_request, unsupported_version, upstream_error, ...), which
// grow with the code; they are capped rather than listed here so that a
// new reason shows up under its own name.
const (
	maxListeners = 64
	maxRules     = 1000
	maxBrokers   = 256
	maxReasons   = 32
)

// Metrics is every collector tollgate exports. Its methods are safe for
// concurrent use; a nil *Metrics ignores every call, so the gateway can
// run without metrics.
type Metrics struct {
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	bytes         *prometheus.CounterVec
	connsActive   *prometheus.GaugeVec
	connsTotal    *prometheus.CounterVec
	closes        *prometheus.CounterVec
	refused       *prometheus.CounterVec
	upConns       *prometheus.GaugeVec
	dialErrors    *prometheus.CounterVec
	dialLatency   *prometheus.HistogramVec
	denials       *prometheus.CounterVec
	throttles     *prometheus.CounterVec
	throttleSecs  *prometheus.CounterVec
	reloads       *prometheus.CounterVec
	pending       *prometheus.GaugeVec // fields a reload found changed that need a restart
	auditWritten  prometheus.Counter
	auditDropped  *prometheus.CounterVec
	rewrites      *prometheus.CounterVec
	malformed     *prometheus.CounterVec
	budgetBytes   prometheus.Gauge   // request bytes held in memory across connections
	budgetWaits   prometheus.Counter // reads that waited for the shared budget
	sniRefused    *prometheus.CounterVec
	vcRequests    *prometheus.CounterVec // by virtual cluster and API (proxy.VClusterHooks)
	vcRefused     *prometheus.CounterVec
	routeEvents   *prometheus.CounterVec
	fsync         prometheus.Histogram
	brokerBytes   *prometheus.CounterVec
	brokerProduce prometheus.Counter
	brokerFetch   prometheus.Counter

	reg        prometheus.Registerer
	apis       [apiSlots]atomic.Pointer[apiSeries]
	lc         listenerCache
	brokerOnce sync.Once
	broker     *brokerCollector
	listeners  *boundedSet
	rules      *boundedSet
	brokers    *boundedSet
	closeSet   *boundedSet
	causeSet   *boundedSet
	drops      map[string]prometheus.Counter // by audit drop reason, and "other"; read-only after New
}

var _ audit.Hooks = (*Metrics)(nil)

// Latency buckets: a gateway hop is sub-millisecond, a Fetch long poll
// waits up to its MaxWaitMillis (500 ms by default, more when set).
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// fsyncBuckets: a local SSD syncs in tens of microseconds to a few ms.
var fsyncBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}

// New builds every collector and registers it in reg, along with the Go
// runtime and process collectors (skipped where reg already has them, as
// the default registry does). Registering twice into one registry reuses
// the collectors already there.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg:       reg,
		listeners: newBoundedSet(maxListeners),
		rules:     newBoundedSet(maxRules),
		brokers:   newBoundedSet(maxBrokers),
		closeSet:  newBoundedSet(maxReasons),
		causeSet:  newBoundedSet(maxReasons),
	}
	m.requests = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "requests_total",
		Help: "Client requests by listener, API and outcome (ok, error, denied, throttled, no_response)."}, []string{"listener", "api", "outcome"}))
	m.latency = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "request_duration_seconds",
		Help: "Time from reading a request to writing its response, by API.", Buckets: latencyBuckets}, []string{"api"}))
	m.bytes = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "request_bytes_total",
		Help: "Request (in) and response (out) frame bytes by API."}, []string{"api", "direction"}))
	m.connsActive = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "connections_active",
		Help: "Open client connections by listener."}, []string{"listener"}))
	m.connsTotal = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "connections_total",
		Help: "Client connections accepted by listener."}, []string{"listener"}))
	m.closes = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "connection_closes_total",
		Help: "Client connections closed, by listener and reason."}, []string{"listener", "reason"}))
	m.refused = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "connections_refused_total",
		Help: "Client connections refused at accept, by listener and reason (max_connections, max_connections_per_address, connection_rate_per_address, auth_failures_per_address, shutting_down)."}, []string{"listener", "reason"}))
	m.upConns = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "upstream_connections",
		Help: "Open connections to upstream brokers, by broker node id."}, []string{"broker"}))
	m.dialErrors = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "upstream_dial_errors_total",
		Help: "Failed dials to upstream brokers, by broker node id."}, []string{"broker"}))
	m.dialLatency = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "upstream_dial_duration_seconds",
		Help: "Time to connect (TCP and TLS) to an upstream broker, successful or not.", Buckets: latencyBuckets}, []string{"broker"}))
	m.denials = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "policy_denials_total",
		Help: "Requests denied, by policy rule."}, []string{"rule"}))
	m.throttles = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "policy_throttles_total",
		Help: "Requests throttled, by policy rule."}, []string{"rule"}))
	m.throttleSecs = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "policy_throttle_seconds_total",
		Help: "Throttle time imposed, by policy rule."}, []string{"rule"}))
	m.reloads = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "policy_reloads_total",
		Help: "Policy reloads by result (ok, failed)."}, []string{"result"}))
	m.pending = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "config_reload_pending_restart",
		Help: "1 for each configuration field (YAML path) the configuration file changes from what runs and only a restart applies."}, []string{"field"}))
	m.auditWritten = register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "audit_records_written_total",
		Help: "Audit records written to the sink."}))
	m.auditDropped = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "audit_records_dropped_total",
		Help: "Audit records dropped, by reason (queue_full, sink_error, closed, tap_slow)."}, []string{"reason"}))
	m.rewrites = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "rewrites_total",
		Help: "Responses whose broker addresses were rewritten, by API."}, []string{"api"}))
	m.malformed = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "malformed_frames_total",
		Help: "Malformed client frames, by cause."}, []string{"cause"}))
	m.budgetBytes = register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "request_bytes_in_flight",
		Help: "Request body bytes held in memory across all connections (limits.max_request_bytes_in_flight)."}))
	m.budgetWaits = register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "request_budget_waits_total",
		Help: "Times a connection stopped reading because the request memory budget was spent."}))
	m.sniRefused = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "sni_refused_total",
		Help: "TLS hellos refused by an SNI listener, by listener and reason (no_sni, unknown_name, unknown_node)."}, []string{"listener", "reason"}))
	m.vcRequests = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "vcluster_requests_total",
		Help: "Requests of sessions in a virtual cluster, by virtual cluster (a configured name) and API."}, []string{"virtual_cluster", "api"}))
	m.vcRefused = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "vcluster_refusals_total",
		Help: "Virtual-cluster refusals, by virtual cluster (\"\" for a connection that matched none) and reason (no_virtual_cluster, unsupported_api, invalid_name, unscoped_request, unscoped_regex, cluster_resource)."}, []string{"virtual_cluster", "reason"}))
	m.routeEvents = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "single_port_events_total",
		Help: "Single-port routing events, by listener and event (part_failed, coordinator_lookup, view_refresh, share_session_limit, share_session_reset, share_request_refused, fetch_session_reset, fetch_session_limit)."}, []string{"listener", "event"}))
	m.fsync = register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "broker", Name: "fsync_duration_seconds",
		Help: "Built-in broker: time of one fsync of a partition log.", Buckets: fsyncBuckets}))
	m.brokerBytes = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "broker", Name: "bytes_total",
		Help: "Built-in broker: record bytes accepted by Produce and served by Fetch (direction produce, fetch)."}, []string{"direction"}))
	m.brokerProduce = m.brokerBytes.WithLabelValues("produce")
	m.brokerFetch = m.brokerBytes.WithLabelValues("fetch")
	for _, r := range []string{"ok", "failed"} {
		m.reloads.WithLabelValues(r)
	}
	// Every drop reason is present at 0, so that alerts on a rate see a
	// series before the first drop; the map is read-only from here on.
	m.drops = map[string]prometheus.Counter{other: m.auditDropped.WithLabelValues(other)}
	for _, r := range dropReasons {
		m.drops[r] = m.auditDropped.WithLabelValues(r)
	}
	registerOptional(reg, collectors.NewGoCollector())
	registerOptional(reg, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// register registers c, or returns the collector of the same description
// already registered (a second New on one registry).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		// Only a programming error (a bad name, a clashing help text)
		// gets here: the descriptions are constants.
		panic("metrics: register: " + err.Error())
	}
	return c
}

// registerOptional registers c unless reg already has it.
func registerOptional(reg prometheus.Registerer, c prometheus.Collector) {
	_ = reg.Register(c)
}

// APILabel is the api label for key: kmsg's name, or "unknown".
func APILabel(key int16) string { return audit.APIName(key) }

// ConnOpened counts an accepted client connection.
func (m *Metrics) ConnOpened(listener string) {
	if m == nil {
		return
	}
	l := m.listener(listener)
	l.active.Inc()
	l.total.Inc()
}

// ConnClosed counts a closed client connection and its reason.
func (m *Metrics) ConnClosed(listener, reason string) {
	if m == nil {
		return
	}
	l := m.listener(listener)
	l.active.Dec()
	m.closes.WithLabelValues(l.label, m.closeSet.label(reason)).Inc()
}

// Request counts one request with its outcome, latency and frame sizes.
func (m *Metrics) Request(listener string, key int16, outcome string, latency time.Duration, bytesIn, bytesOut int) {
	if m == nil {
		return
	}
	m.requestCounter(m.listener(listener), key, outcome).Inc()
	a := m.api(key)
	a.latency.Observe(latency.Seconds())
	if bytesIn > 0 {
		a.in.Add(float64(bytesIn))
	}
	if bytesOut > 0 {
		a.out.Add(float64(bytesOut))
	}
}

func (m *Metrics) brokerLabel(node int32) string {
	return m.brokers.label(strconv.FormatInt(int64(node), 10))
}

// UpstreamDial records one dial to an upstream broker.
func (m *Metrics) UpstreamDial(node int32, d time.Duration, err error) {
	if m == nil {
		return
	}
	b := m.brokerLabel(node)
	m.dialLatency.WithLabelValues(b).Observe(d.Seconds())
	if err != nil {
		m.dialErrors.WithLabelValues(b).Inc()
	}
}

// UpstreamConns adds delta (+1 open, -1 closed) to a broker's connections.
func (m *Metrics) UpstreamConns(delta int, node int32) {
	if m == nil {
		return
	}
	m.upConns.WithLabelValues(m.brokerLabel(node)).Add(float64(delta))
}

// Rewrite counts a response whose addresses were rewritten.
func (m *Metrics) Rewrite(key int16) {
	if m == nil {
		return
	}
	m.rewriteCounter(key).Inc()
}

// ConnRefused counts a connection refused at accept (the gateway's
// refusal enum; capped like close reasons).
func (m *Metrics) ConnRefused(listener, reason string) {
	if m == nil {
		return
	}
	m.refused.WithLabelValues(m.listener(listener).label, m.closeSet.label(reason)).Inc()
}

// Malformed counts a malformed client frame.
func (m *Metrics) Malformed(cause string) {
	if m == nil {
		return
	}
	m.malformed.WithLabelValues(m.causeSet.label(cause)).Inc()
}

// RequestBudget reports the request bytes held in memory across
// connections, and whether a read had to wait for them.
func (m *Metrics) RequestBudget(inFlight int64, waited bool) {
	if m == nil {
		return
	}
	m.budgetBytes.Set(float64(inFlight))
	if waited {
		m.budgetWaits.Inc()
	}
}

// SNIRefused counts a TLS hello an SNI listener refused (proxy.SNIHooks).
func (m *Metrics) SNIRefused(listener, reason string) {
	if m == nil {
		return
	}
	m.sniRefused.WithLabelValues(m.listener(listener).label, m.causeSet.label(reason)).Inc()
}

// VClusterRequest counts a request of a virtual cluster's session
// (proxy.VClusterHooks); the names are the configured ones.
func (m *Metrics) VClusterRequest(vcluster string, key int16) {
	if m == nil {
		return
	}
	m.vcRequests.WithLabelValues(vcluster, APILabel(key)).Inc()
}

// VClusterRefused counts a virtual-cluster refusal (proxy.VClusterHooks).
func (m *Metrics) VClusterRefused(vcluster, reason string) {
	if m == nil {
		return
	}
	m.vcRefused.WithLabelValues(vcluster, m.causeSet.label(reason)).Inc()
}

// SinglePortEvent counts a single-port routing event (proxy.RouteHooks).
func (m *Metrics) SinglePortEvent(listener, event string) {
	if m == nil {
		return
	}
	m.routeEvents.WithLabelValues(m.listener(listener).label, m.causeSet.label(event)).Inc()
}

// Denied counts a request denied by rule.
func (m *Metrics) Denied(rule string) {
	if m == nil {
		return
	}
	m.denials.WithLabelValues(m.rules.label(rule)).Inc()
}

// Throttled counts a request throttled by rule for d.
func (m *Metrics) Throttled(rule string, d time.Duration) {
	if m == nil {
		return
	}
	r := m.rules.label(rule)
	m.throttles.WithLabelValues(r).Inc()
	m.throttleSecs.WithLabelValues(r).Add(d.Seconds())
}

// PolicyReload counts a policy reload.
func (m *Metrics) PolicyReload(ok bool) {
	if m == nil {
		return
	}
	r := "ok"
	if !ok {
		r = "failed"
	}
	m.reloads.WithLabelValues(r).Inc()
}

// PendingRestart sets tollgate_config_reload_pending_restart to 1 for
// exactly fields (YAML paths): those the configuration file changes from
// what runs and only a restart applies. A field a later reload brings
// back is cleared.
func (m *Metrics) PendingRestart(fields []string) {
	if m == nil {
		return
	}
	m.pending.Reset()
	for _, f := range fields {
		m.pending.WithLabelValues(f).Set(1)
	}
}

// AuditWritten counts a record written (audit.Hooks).
func (m *Metrics) AuditWritten() {
	if m == nil {
		return
	}
	m.auditWritten.Inc()
}

// AuditDropped counts a record dropped (audit.Hooks).
func (m *Metrics) AuditDropped(reason string) {
	if m == nil {
		return
	}
	c, ok := m.drops[reason]
	if !ok {
		c = m.drops[other]
	}
	c.Inc()
}

// FsyncObserved records one fsync of the built-in broker's storage.
func (m *Metrics) FsyncObserved(d time.Duration) {
	if m == nil {
		return
	}
	m.fsync.Observe(d.Seconds())
}

// BrokerBytes counts record bytes the built-in broker accepted and served.
func (m *Metrics) BrokerBytes(produce, fetch int) {
	if m == nil {
		return
	}
	if produce > 0 {
		m.brokerProduce.Add(float64(produce))
	}
	if fetch > 0 {
		m.brokerFetch.Add(float64(fetch))
	}
}
