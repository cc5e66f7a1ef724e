package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/configs"
)

// openGateway starts a gateway from YAML and returns a stop function (for
// restarts); the test's cleanup stops it too if the test did not.
func openGateway(t *testing.T, yaml string) (*Gateway, func()) {
	t.Helper()
	cfg, err := configs.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var stopped atomic.Bool
	stop := func() {
		if stopped.Swap(true) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	t.Cleanup(stop)
	return g, stop
}

// quotaBackends are the backends a quota test runs against: the built-in
// broker (quotas in its data directory by default), a kfake upstream
// (policy.quotas: enforce with a state file) through a port-per-broker
// listener, and a 3-broker kfake through a single-port one. seen reports
// whether the upstream received a quota request (it must not).
func quotaBackends(t *testing.T) map[string]func(t *testing.T) (yaml string, seen func() bool) {
	return map[string]func(t *testing.T) (string, func() bool){
		"builtin": func(t *testing.T) (string, func() bool) {
			return `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: ` + t.TempDir() + ` }
admin: { listen: "off" }
`, func() bool { return false }
		},
		"upstream": func(t *testing.T) (string, func() bool) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "up"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			var seen atomic.Bool
			for _, k := range []kmsg.Key{kmsg.DescribeClientQuotas, kmsg.AlterClientQuotas} {
				c.ControlKey(int16(k), func(kmsg.Request) (kmsg.Response, error, bool) {
					c.KeepControl()
					seen.Store(true)
					return nil, nil, false
				})
			}
			return `
listeners: [{ listen: "127.0.0.1:0", broker_port_base: 0 }]
upstream: { bootstrap: [` + c.ListenAddrs()[0] + `] }
admin: { listen: "off" }
policy: { default: allow, quotas: enforce, quotas_file: ` + filepath.Join(t.TempDir(), "quotas.json") + ` }
`, seen.Load
		},
		"single-port": func(t *testing.T) (string, func() bool) {
			c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "up"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			var seen atomic.Bool
			for _, k := range []kmsg.Key{kmsg.DescribeClientQuotas, kmsg.AlterClientQuotas} {
				c.ControlKey(int16(k), func(kmsg.Request) (kmsg.Response, error, bool) {
					c.KeepControl()
					seen.Store(true)
					return nil, nil, false
				})
			}
			return `
listeners: [{ listen: "127.0.0.1:0", brokers: single-port }]
upstream: { bootstrap: [` + strings.Join(c.ListenAddrs(), ",") + `] }
admin: { listen: "off" }
policy: { default: allow, quotas: enforce, quotas_file: ` + filepath.Join(t.TempDir(), "quotas.json") + ` }
`, seen.Load
		},
	}
}

func adminFor(t *testing.T, g *Gateway, opts ...kgo.Opt) (*kadm.Client, *kgo.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(g.Server.Addr(0).String())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl), cl
}

func strp(s string) *string { return &s }

// TestQuotasRoundTripAndRestart: kadm's AlterClientQuotas and
// DescribeClientQuotas round-trip on both backends, the gateway answers
// them (the upstream never sees them), and they survive a restart.
func TestQuotasRoundTripAndRestart(t *testing.T) {
	for name, backend := range quotaBackends(t) {
		t.Run(name, func(t *testing.T) {
			yaml, upstreamSaw := backend(t)
			g, stop := openGateway(t, yaml)
			adm, _ := adminFor(t, g)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			entries := []kadm.AlterClientQuotaEntry{
				{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: strp("alice")}, {Type: "client-id", Name: nil}},
					Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1048576}, {Key: "request_percentage", Value: 50}}},
				{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: strp("batch")}},
					Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 2048}}},
				{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: nil}},
					Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 10}}},
			}
			res, err := adm.AlterClientQuotas(ctx, entries)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					t.Fatalf("alter %v: %v (%s)", r.Entity, r.Err, r.ErrMessage)
				}
			}
			check := func(adm *kadm.Client) {
				t.Helper()
				all, err := adm.DescribeClientQuotas(ctx, false, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(all) != 3 {
					t.Fatalf("described %d quotas, want 3: %+v", len(all), all)
				}
				alice, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{
					{Type: "user", MatchName: strp("alice"), MatchType: 0}, {Type: "client-id", MatchType: 1}})
				if err != nil {
					t.Fatal(err)
				}
				if len(alice) != 1 || len(alice[0].Values) != 2 {
					t.Fatalf("alice: %+v", alice)
				}
				for _, v := range alice[0].Values {
					if v.Key == "producer_byte_rate" && v.Value != 1048576 || v.Key == "request_percentage" && v.Value != 50 {
						t.Errorf("alice %s = %v", v.Key, v.Value)
					}
				}
			}
			check(adm)
			bad, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
				Entity: kadm.ClientQuotaEntity{{Type: "user", Name: strp("mallory")}},
				Ops:    []kadm.AlterClientQuotaOp{{Key: "bogus_byte_rate", Value: 1}}}})
			if err != nil || !errors.Is(bad[0].Err, kerr.InvalidRequest) {
				t.Fatalf("alter an unknown key: %v %+v, want INVALID_REQUEST", err, bad)
			}
			if got := refusals(t, g, "AlterClientQuotas", "INVALID_REQUEST"); got != 1 {
				t.Errorf("tollgate_answer_refusals_total{api=AlterClientQuotas,error=INVALID_REQUEST} = %v, want 1", got)
			}
			stop()
			g2, _ := openGateway(t, yaml)
			adm2, _ := adminFor(t, g2)
			check(adm2)
			if upstreamSaw() {
				t.Error("the upstream received a quota request the gateway should have answered")
			}
		})
	}
}

// TestQuotaThrottlesProducer: once producer_byte_rate is set for a client
// id, its Produce answers carry throttle_time_ms (kgo reports them in its
// OnBrokerThrottle hook) while another client id's are never throttled.
func TestQuotaThrottlesProducer(t *testing.T) {
	for name, backend := range quotaBackends(t) {
		t.Run(name, func(t *testing.T) {
			yaml, _ := backend(t)
			g, _ := openGateway(t, yaml)
			adm, _ := adminFor(t, g)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
				Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: strp("slow")}},
				Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 4096}}}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("alter: %v %v", err, res)
			}
			produce := func(clientID string) int64 {
				var throttles atomic.Int64
				h := throttleHook{n: &throttles}
				cl, err := kgo.NewClient(kgo.SeedBrokers(g.Server.Addr(0).String()), kgo.ClientID(clientID),
					kgo.DefaultProduceTopic("up"), kgo.AllowAutoTopicCreation(), kgo.WithHooks(h), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				big := make([]byte, 6000)
				rand.Read(big) // incompressible either way
				for i := range 2 {
					if err := cl.ProduceSync(ctx, &kgo.Record{Value: big}).FirstErr(); err != nil {
						t.Fatalf("%s produce %d: %v", clientID, i, err)
					}
				}
				return throttles.Load()
			}
			if n := produce("slow"); n == 0 {
				t.Error("no throttle_time_ms reported to the client over its producer_byte_rate")
			}
			if n := produce("fast"); n != 0 {
				t.Errorf("%d throttles reported to a client id without a quota", n)
			}
		})
	}
}

type throttleHook struct{ n *atomic.Int64 }

func (h throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// TestQuotaControllerMutation: over controller_mutation_rate, CreateTopics
// (v6+) is refused with THROTTLING_QUOTA_EXCEEDED (KIP-599) and the topic
// is not created.
func TestQuotaControllerMutation(t *testing.T) {
	for name, backend := range quotaBackends(t) {
		t.Run(name, func(t *testing.T) {
			yaml, _ := backend(t)
			g, _ := openGateway(t, yaml)
			adm, kcl := adminFor(t, g, kgo.ClientID("creator"), kgo.RetryTimeout(time.Second))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
				Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: strp("creator")}},
				Ops:    []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 1}}}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("alter: %v %v", err, res)
			}
			// 30 partitions: the 11-partition budget goes 19 s into debt. The
			// connection is muted for that long (and kgo waits it out), so
			// the refusal is seen by another connection of the same client
			// id, as in Kafka.
			if _, err := adm.CreateTopic(ctx, 30, 1, nil, "first"); err != nil {
				t.Fatalf("first create: %v", err)
			}
			_, kcl = adminFor(t, g, kgo.ClientID("creator"), kgo.RetryTimeout(time.Second))
			req := kmsg.NewPtrCreateTopicsRequest()
			req.TimeoutMillis = 5000
			tp := kmsg.NewCreateTopicsRequestTopic()
			tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "second", 1, 1
			req.Topics = append(req.Topics, tp)
			resp, err := req.RequestWith(ctx, kcl)
			if err != nil {
				t.Fatal(err)
			}
			if req.Version < 6 {
				t.Fatalf("kgo sent CreateTopics v%d", req.Version)
			}
			if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); !errors.Is(err, kerr.ThrottlingQuotaExceeded) || resp.ThrottleMillis <= 0 {
				t.Fatalf("second create: %v, throttle %d ms; want THROTTLING_QUOTA_EXCEEDED with a throttle", err, resp.ThrottleMillis)
			}
			topics, err := adm.ListTopics(ctx, "second")
			if err != nil {
				t.Fatal(err)
			}
			if topics.Has("second") {
				t.Error("the refused topic was created")
			}

			// Topic by topic within one request, as Kafka: the first topic
			// puts a fresh budget into debt, the next is refused.
			res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
				Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: strp("splitter")}},
				Ops:    []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 1}}}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("alter: %v %v", err, res)
			}
			_, split := adminFor(t, g, kgo.ClientID("splitter"), kgo.RetryTimeout(time.Second))
			req = kmsg.NewPtrCreateTopicsRequest()
			req.TimeoutMillis = 5000
			for _, tc := range []struct {
				name string
				n    int32
			}{{"split-a", 30}, {"split-b", 1}} {
				tp := kmsg.NewCreateTopicsRequestTopic()
				tp.Topic, tp.NumPartitions, tp.ReplicationFactor = tc.name, tc.n, 1
				req.Topics = append(req.Topics, tp)
			}
			resp, err = req.RequestWith(ctx, split)
			if err != nil {
				t.Fatal(err)
			}
			codes := map[string]int16{}
			for _, tp := range resp.Topics {
				codes[tp.Topic] = tp.ErrorCode
			}
			if len(codes) != 2 || codes["split-a"] != 0 || codes["split-b"] != kerr.ThrottlingQuotaExceeded.Code || resp.ThrottleMillis <= 0 {
				t.Fatalf("split create: %v, throttle %d ms; want split-a created, split-b THROTTLING_QUOTA_EXCEEDED", codes, resp.ThrottleMillis)
			}
			topics, err = adm.ListTopics(ctx, "split-a", "split-b")
			if err != nil {
				t.Fatal(err)
			}
			if !topics.Has("split-a") || topics.Has("split-b") {
				t.Errorf("after the split create: split-a %v, split-b %v; want only split-a", topics.Has("split-a"), topics.Has("split-b"))
			}
		})
	}
}

// TestQuotasOnConsolePolicyPage: the policy page lists the quotas the
// gateway keeps (HTML and JSON).
func TestQuotasOnConsolePolicyPage(t *testing.T) {
	g := startFrom(t, `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: `+t.TempDir()+` }
admin: { listen: "127.0.0.1:0" }
`)
	adm, _ := adminFor(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: strp("alice")}, {Type: "client-id"}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	get := func(accept string) string {
		req, _ := http.NewRequest(http.MethodGet, "http://"+g.AdminAddr().String()+"/ui/policy", nil)
		req.Header.Set("Accept", accept)
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("policy page: %s %s", resp.Status, b)
		}
		return string(b)
	}
	var st struct {
		QuotaMode string `json:"quota_mode"`
		Quotas    []struct {
			User     string `json:"user"`
			ClientID string `json:"client_id"`
			Values   string `json:"values"`
		} `json:"quotas"`
	}
	if err := json.Unmarshal([]byte(get("application/json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.QuotaMode != "enforce" || len(st.Quotas) != 1 || st.Quotas[0].User != "alice" || st.Quotas[0].ClientID != "<default>" || st.Quotas[0].Values != "producer_byte_rate=1024" {
		t.Errorf("policy page JSON: %+v", st)
	}
	if html := get("text/html"); !strings.Contains(html, `id="quotas"`) || !strings.Contains(html, "producer_byte_rate=1024") {
		t.Errorf("policy page HTML lacks the quota table")
	}
}

// TestThrottledConnectionDoesNotHoldShutdown: a connection muted for a
// quota throttle (11 s here) stops at the drain like an idle one, so
// Close finishes within its drain bound (10 s in openGateway) instead of
// waiting the mute out.
func TestThrottledConnectionDoesNotHoldShutdown(t *testing.T) {
	yaml, _ := quotaBackends(t)["builtin"](t)
	g, stop := openGateway(t, yaml)
	adm, _ := adminFor(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: strp("muted")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}}}); err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	var throttles atomic.Int64
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.Server.Addr(0).String()), kgo.ClientID("muted"), kgo.DefaultProduceTopic("m"),
		kgo.AllowAutoTopicCreation(), kgo.WithHooks(throttleHook{n: &throttles}), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 1000)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if throttles.Load() == 0 {
		t.Fatal("not throttled")
	}
	stop() // fails the test if the drain runs out (10 s, less than the mute)
}
