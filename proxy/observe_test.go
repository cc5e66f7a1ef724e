package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// syncBuffer is an audit sink the test can read while the trail writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) records(t testing.TB) []audit.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []audit.Record
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line is not JSON: %v\n%s", err, sc.Text())
		}
		out = append(out, r)
	}
	return out
}

// TestAuditAndMetrics: a kgo producer and consumer through the gateway
// (upstream kfake) with a policy that denies one topic; the full-level
// audit trail names every API the client called, in order per connection,
// with topics, record counts and decisions, and /metrics (parsed with the
// Prometheus text parser) counts the same traffic.
func TestAuditAndMetrics(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "audited", "forbidden"))
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	sink := &syncBuffer{}
	trail, err := audit.New(configs.Audit{Level: "full", Mode: "best-effort", Queue: 10000}, m, audit.WithSink(sink))
	if err != nil {
		t.Fatal(err)
	}
	srv := startGateway(t, c, func(o *proxy.Options) { o.Hooks, o.Audit = m, trail })
	setPolicy(t, srv, "policy:\n  rules:\n    - name: no-forbidden\n      match: { topic: forbidden, api: [Produce] }\n      action: deny\n")
	admin, err := metrics.NewAdmin("127.0.0.1:0", reg, func() error { return nil }, trail)
	if err != nil {
		t.Fatal(err)
	}
	admin.Start()
	t.Cleanup(func() { admin.Shutdown(ctxT(t, 5*time.Second)) })

	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, srv, nil, kgo.ClientID("audit-test"))
	const n = 25
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "audited", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "forbidden", Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("produce to the forbidden topic succeeded")
	}
	cons := newClient(t, srv, nil, kgo.ClientID("audit-test"), kgo.ConsumeTopics("audited"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, n)
		}
		got += fs.NumRecords()
	}
	cons.Close()
	cl.Close()
	trail.Close() // flush the queue

	recs := sink.records(t)
	var produced, denied int
	apis := map[string]int{}
	for _, r := range recs {
		if r.Event != audit.EventRequest {
			continue
		}
		apis[r.API]++
		if r.ClientID != "audit-test" {
			t.Errorf("record without the client id: %+v", r)
		}
		if r.API != "Produce" {
			continue
		}
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Fatalf("produce record without its partition: %+v", r)
		}
		switch r.Topics[0].Name {
		case "audited":
			if r.Decision != audit.Forwarded || r.Topics[0].Partitions[0].Records != 1 {
				t.Errorf("produce record %+v", r)
			}
			produced++
		case "forbidden":
			if r.Decision != audit.Denied || r.Rule != "no-forbidden" {
				t.Errorf("denied produce recorded as %s (rule %q)", r.Decision, r.Rule)
			}
			denied++
		}
	}
	fetchedBytes := 0
	for _, r := range recs {
		if r.API == "Fetch" {
			for _, tp := range r.Topics {
				for _, p := range tp.Partitions {
					if tp.Name == "audited" {
						fetchedBytes += p.Bytes
					}
				}
			}
		}
	}
	if fetchedBytes == 0 {
		t.Error("no Fetch record reports the bytes it returned (streamed responses)")
	}
	if produced != n || denied == 0 {
		t.Errorf("audit has %d forwarded and %d denied produce records, want %d and at least 1", produced, denied, n)
	}
	for _, api := range []string{"ApiVersions", "Metadata", "InitProducerID", "Produce"} {
		if apis[api] == 0 {
			t.Errorf("audit trail never names %s: %v", api, apis)
		}
	}
	if recs[0].Event != audit.EventConnect {
		t.Errorf("first record is %q, want a connect record", recs[0].Event)
	}

	// /metrics over HTTP, parsed as Prometheus text.
	resp, err := http.Get("http://" + admin.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("metrics do not parse: %v", err)
	}
	count := func(family string, labels map[string]string) float64 {
		var sum float64
		for _, m := range families[family].GetMetric() {
			match := true
			for k, v := range labels {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == k && lp.GetValue() == v {
						found = true
					}
				}
				match = match && found
			}
			if match {
				sum += m.GetCounter().GetValue()
			}
		}
		return sum
	}
	var names []string
	for k := range families {
		names = append(names, k)
	}
	reqFamily := ""
	for _, k := range names {
		if strings.HasPrefix(k, "tollgate_requests") && strings.HasSuffix(k, "_total") {
			reqFamily = k
		}
	}
	if got := count(reqFamily, map[string]string{"api": "Produce", "outcome": "ok"}); got != n {
		t.Errorf("%s{api=Produce,outcome=ok} = %v, want %d (families: %v)", reqFamily, got, n, names)
	}
	if got := count(reqFamily, map[string]string{"api": "Produce", "outcome": "denied"}); got < 1 {
		t.Errorf("%s{api=Produce,outcome=denied} = %v, want >= 1", reqFamily, got)
	}
}
