package metrics

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/configs"
)

// startAdmin runs an admin server on a kernel-chosen port for one test.
func startAdmin(t *testing.T, reg *prometheus.Registry, ready func() error, tap TapSource) string {
	t.Helper()
	a, err := NewAdmin("127.0.0.1:0", reg, ready, tap)
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return "http://" + a.Addr().String()
}

// scrape fetches /metrics over HTTP and parses it.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of family name with exactly the
// given labels (name=value pairs), and whether it exists.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if want[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func mustValue(t *testing.T, fams map[string]*dto.MetricFamily, want float64, name string, labels ...string) {
	t.Helper()
	got, ok := value(fams, name, labels...)
	if !ok {
		t.Errorf("%s%v: no such series", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

type fakeBroker struct{}

func (fakeBroker) Partitions() []PartitionStat {
	return []PartitionStat{{Topic: "orders", Partition: 0, LogStartOffset: 5, LogEndOffset: 42, SizeBytes: 4096},
		{Topic: "state", Partition: 1, Compacted: true, DirtyRatio: 0.25, CleanerRuns: 3, CleanerReclaimedBytes: 9000, KeylessRefused: 2}}
}
func (fakeBroker) GroupLag() []GroupLag {
	return []GroupLag{{Group: "billing", Topic: "orders", Partition: 0, Lag: 7, Members: 3}}
}
func (fakeBroker) ActiveTransactions() int    { return 2 }
func (fakeBroker) OffsetsTopicDropped() int64 { return 4 }

func TestCountersMatchCalls(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	base := startAdmin(t, reg, nil, nil)

	m.ConnOpened("outside")
	m.ConnOpened("outside")
	m.ConnOpened("inside")
	m.ConnClosed("outside", "client_closed")
	for range 3 {
		m.Request("outside", 0, OutcomeOK, 2*time.Millisecond, 100, 20)
	}
	m.Request("outside", 1, OutcomeDenied, time.Millisecond, 50, 0)
	m.Request("inside", 0, "weird-outcome", time.Millisecond, 1, 1)
	m.UpstreamDial(1, 3*time.Millisecond, nil)
	m.UpstreamDial(1, 3*time.Millisecond, errors.New("refused"))
	m.UpstreamConns(1, 1)
	m.UpstreamConns(1, 2)
	m.UpstreamConns(-1, 2)
	m.Rewrite(3)
	m.Malformed("frame_too_large")
	m.Denied("no-admin")
	m.Throttled("slow", 1500*time.Millisecond)
	m.PolicyReload(true)
	m.PolicyReload(false)
	m.PolicyReload(false)
	m.AuditWritten()
	m.AuditDropped(audit.DropQueueFull)
	m.AuditDropped("made-up")
	m.FsyncObserved(time.Millisecond)
	m.BrokerBytes(1000, 300)
	m.WatchBroker(fakeBroker{})

	f := scrape(t, base)
	mustValue(t, f, 1, "tollgate_connections_active", "listener", "outside")
	mustValue(t, f, 4, "tollgate_broker_consumer_offsets_dropped_total")
	mustValue(t, f, 2, "tollgate_connections_total", "listener", "outside")
	mustValue(t, f, 1, "tollgate_connections_active", "listener", "inside")
	mustValue(t, f, 1, "tollgate_connection_closes_total", "listener", "outside", "reason", "client_closed")
	mustValue(t, f, 3, "tollgate_requests_total", "listener", "outside", "api", "Produce", "outcome", "ok")
	mustValue(t, f, 1, "tollgate_requests_total", "listener", "outside", "api", "Fetch", "outcome", "denied")
	mustValue(t, f, 1, "tollgate_requests_total", "listener", "inside", "api", "Produce", "outcome", "other")
	mustValue(t, f, 4, "tollgate_request_duration_seconds", "api", "Produce")
	mustValue(t, f, 301, "tollgate_request_bytes_total", "api", "Produce", "direction", "in")
	mustValue(t, f, 61, "tollgate_request_bytes_total", "api", "Produce", "direction", "out")
	mustValue(t, f, 2, "tollgate_upstream_dial_duration_seconds", "broker", "1")
	mustValue(t, f, 1, "tollgate_upstream_dial_errors_total", "broker", "1", "reason", "other") // a plain error: no proxy dial reason
	mustValue(t, f, 1, "tollgate_upstream_connections", "broker", "1")
	mustValue(t, f, 0, "tollgate_upstream_connections", "broker", "2")
	mustValue(t, f, 1, "tollgate_rewrites_total", "api", "Metadata")
	mustValue(t, f, 1, "tollgate_malformed_frames_total", "cause", "frame_too_large")
	mustValue(t, f, 1, "tollgate_policy_denials_total", "rule", "no-admin")
	mustValue(t, f, 1, "tollgate_policy_throttles_total", "rule", "slow")
	mustValue(t, f, 1.5, "tollgate_policy_throttle_seconds_total", "rule", "slow")
	mustValue(t, f, 1, "tollgate_policy_reloads_total", "result", "ok")
	mustValue(t, f, 2, "tollgate_policy_reloads_total", "result", "failed")
	mustValue(t, f, 1, "tollgate_audit_records_written_total")
	mustValue(t, f, 1, "tollgate_audit_records_dropped_total", "reason", "queue_full")
	mustValue(t, f, 1, "tollgate_audit_records_dropped_total", "reason", "other")
	mustValue(t, f, 1, "tollgate_broker_fsync_duration_seconds")
	mustValue(t, f, 1000, "tollgate_broker_bytes_total", "direction", "produce")
	mustValue(t, f, 300, "tollgate_broker_bytes_total", "direction", "fetch")
	mustValue(t, f, 42, "tollgate_broker_log_end_offset", "topic", "orders", "partition", "0")
	mustValue(t, f, 5, "tollgate_broker_log_start_offset", "topic", "orders", "partition", "0")
	mustValue(t, f, 4096, "tollgate_broker_log_size_bytes", "topic", "orders", "partition", "0")
	mustValue(t, f, 0.25, "tollgate_broker_log_dirty_ratio", "topic", "state", "partition", "1")
	mustValue(t, f, 3, "tollgate_broker_log_cleaner_runs_total", "topic", "state", "partition", "1")
	mustValue(t, f, 9000, "tollgate_broker_log_cleaner_reclaimed_bytes_total", "topic", "state", "partition", "1")
	mustValue(t, f, 2, "tollgate_broker_compacted_keyless_refused_total", "topic", "state", "partition", "1")
	for _, m := range f["tollgate_broker_log_dirty_ratio"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetValue() == "orders" {
				t.Error("dirty ratio exported for a partition that is not compacted")
			}
		}
	}
	mustValue(t, f, 7, "tollgate_broker_consumer_group_lag", "group", "billing", "topic", "orders", "partition", "0")
	mustValue(t, f, 3, "tollgate_broker_consumer_group_members", "group", "billing")
	mustValue(t, f, 2, "tollgate_broker_active_transactions")
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if f[name] == nil {
			t.Errorf("%s missing: runtime/process collectors not registered", name)
		}
	}
}

func TestNewTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := New(reg), New(reg)
	a.Denied("r")
	b.Denied("r")
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "tollgate_policy_denials_total" && f.GetMetric()[0].GetCounter().GetValue() != 2 {
			t.Fatalf("two Metrics on one registry do not share collectors")
		}
	}
	var nilM *Metrics
	nilM.Request("x", 0, OutcomeOK, 0, 0, 0) // a nil *Metrics is a no-op
	nilM.WatchBroker(fakeBroker{})
}

// Client-controlled values never become labels, and the ones that come
// from configuration are capped.
func TestLabelCardinalityBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	base := startAdmin(t, reg, nil, nil)
	// 10,000 distinct client ids: the hooks take no client id at all;
	// what a client controls is the API key, and the listener/rule/
	// reason names are capped in case a caller passes something unbounded.
	for i := range 10000 {
		m.Request("default", int16(1000+i%20000), OutcomeOK, time.Microsecond, 1, 1)
		m.Request(fmt.Sprintf("client-%d", i), 0, OutcomeOK, time.Microsecond, 1, 1)
		m.Denied(fmt.Sprintf("rule-%d", i))
		m.ConnClosed("default", fmt.Sprintf("reason-%d", i))
		m.Malformed(fmt.Sprintf("cause-%d", i))
		m.UpstreamConns(1, int32(i))
	}
	f := scrape(t, base)
	limits := map[string]int{
		"tollgate_requests_total":           maxListeners + 2, // listeners + "other", times one api (two for default)
		"tollgate_policy_denials_total":     maxRules + 1,
		"tollgate_connection_closes_total":  maxReasons + 1,
		"tollgate_malformed_frames_total":   maxReasons + 1,
		"tollgate_upstream_connections":     maxBrokers + 1,
		"tollgate_request_duration_seconds": 2, // Produce and unknown
	}
	for name, limit := range limits {
		n := len(f[name].GetMetric())
		if n == 0 || n > limit {
			t.Errorf("%s has %d series, want 1..%d", name, n, limit)
		}
	}
	mustValue(t, f, 10000, "tollgate_request_duration_seconds", "api", "unknown")
	if v, _ := value(f, "tollgate_policy_denials_total", "rule", "other"); v != 10000-maxRules {
		t.Errorf("rules beyond the cap counted as other: %v, want %d", v, 10000-maxRules)
	}
}

func TestHealthAndReady(t *testing.T) {
	reg := prometheus.NewRegistry()
	var readyErr error = errors.New("upstream unreachable: dial tcp 127.0.0.1:1: connection refused")
	base := startAdmin(t, reg, func() error { return readyErr }, nil)
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "upstream unreachable") {
		t.Fatalf("/readyz not ready = %d %q", code, body)
	}
	readyErr = nil
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("/readyz ready = %d", code)
	}
	if code, _ := get("/tap"); code != 503 {
		t.Fatalf("/tap without a source = %d", code)
	}
}

func TestTapStreamsFilteredRecords(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr, err := audit.New(configs.Default().Audit, New(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	base := startAdmin(t, reg, nil, tr)

	if resp, err := http.Get(base + "/tap?colour=red"); err != nil || resp.StatusCode != 400 {
		t.Fatalf("bad filter: %v %v", resp.Status, err)
	}
	resp, err := http.Get(base + "/tap?api=Produce&topic=orders&client=console*")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/tap: %s", resp.Status)
	}
	// The handler subscribes before it answers, and the trail is off, so
	// its level turns full exactly when the subscription is in place.
	if tr.Level() != audit.Full {
		t.Fatal("subscription not in place after the response header")
	}
	mk := func(corr int32, key int16, client, topic string) *audit.Record {
		return &audit.Record{Time: time.Now(), Event: audit.EventRequest, Key: key, API: audit.APIName(key), Correlation: corr,
			ClientID: client, Topics: []audit.Topic{{Name: topic}}}
	}
	tr.Log(mk(1, 0, "console-producer", "orders"))
	tr.Log(mk(2, 1, "console-consumer", "orders"))   // wrong API
	tr.Log(mk(3, 0, "kafka-go", "orders"))           // wrong client
	tr.Log(mk(4, 0, "console-producer", "payments")) // wrong topic
	tr.Log(mk(5, 0, "console-producer", "orders"))
	sc := bufio.NewScanner(resp.Body)
	var got []int32
	for len(got) < 2 && sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		got = append(got, r.Correlation)
	}
	if fmt.Sprint(got) != "[1 5]" {
		t.Fatalf("tap streamed correlations %v, want [1 5]", got)
	}
	resp.Body.Close()
	// The subscription ends when the client goes away.
	deadline := time.Now().Add(5 * time.Second)
	for tr.Level() != audit.Off {
		if time.Now().After(deadline) {
			t.Fatal("subscription still open after the client left")
		}
		tr.Log(mk(6, 0, "console-producer", "orders")) // a write notices the closed connection
		time.Sleep(5 * time.Millisecond)
	}
}
