package proxy_test

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestFetchRateThrottleVisible: a fetch_bytes_per_second rule that slows a
// consumer shows in tollgate_policy_throttles_total and
// tollgate_policy_throttle_seconds_total under its rule, and in the audit
// records of the Fetches that carry it (decision throttled, the rule).
func TestFetchRateThrottleVisible(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	sink := &syncBuffer{}
	trail, err := audit.New(configs.Audit{Level: "full", Mode: "best-effort", Queue: 100000}, m, audit.WithSink(sink))
	if err != nil {
		t.Fatal(err)
	}
	srv := startBuiltinWith(t, func(o *proxy.Options) { o.Hooks, o.Audit = m, trail })
	ctx := ctxT(t, 60*time.Second)
	prod := newClient(t, srv, nil, kgo.DefaultProduceTopic("rated"), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := make([]byte, 1000)
	// 600 KB at 500 KB/s after a 64 KiB burst: a second of
	// throttling, however fast or loaded the machine (at 1 MB/s a
	// consumer on a loaded CI machine could read 1.5 MB without ever
	// passing the rate).
	const n = 600
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	wg.Wait()
	setPolicy(t, srv, `
policy:
  rules:
    - name: slow-readers
      match: { client_id: { prefix: slow- } }
      rate: { fetch_bytes_per_second: 500KB, burst: 64KiB }
      action: allow
`)
	cons := newClient(t, srv, nil, kgo.ClientID("slow-1"), kgo.ConsumeTopics("rated"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(64<<10), kgo.FetchMaxWait(200*time.Millisecond))
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, n)
		}
		got += fs.NumRecords()
	}
	// A fetch rate is charged after the answer left (throttle.go), so the
	// last charge may follow the last records.
	waitFor(t, ctx, "tollgate_policy_throttles_total and throttle_seconds_total for the fetch rule", func() bool {
		return counterValue(t, reg, "tollgate_policy_throttles_total", map[string]string{"rule": "slow-readers"}) > 0 &&
			counterValue(t, reg, "tollgate_policy_throttle_seconds_total", map[string]string{"rule": "slow-readers"}) > 0
	})
	waitFor(t, ctx, "a throttled Fetch audit record", func() bool {
		for _, r := range sink.records(t) {
			if r.API == "Fetch" && r.Decision == audit.Throttled && r.Rule == "slow-readers" && r.ThrottleMs > 0 {
				return true
			}
		}
		return false
	})
}
