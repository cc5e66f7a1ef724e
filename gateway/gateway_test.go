package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/configs"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startFrom assembles and starts a gateway from YAML, and closes it at the
// end of the test.
func startFrom(t *testing.T, yaml string) *Gateway {
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
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return g
}

// TestBuiltinFromConfig: a configuration with no upstream assembles the
// built-in broker, metrics on the admin server, and a policy.
func TestBuiltinFromConfig(t *testing.T) {
	g := startFrom(t, `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: `+t.TempDir()+` }
admin: { listen: "127.0.0.1:0" }
policy:
  rules:
    - { name: no-delete, match: { api: [DeleteTopics] }, action: deny }
`)
	if g.Broker == nil {
		t.Fatal("no built-in broker assembled")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.Server.Addr(0).String()), kgo.DefaultProduceTopic("auto"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The write loop counts a request after its response has gone out, so
	// the client can read the answer before the counter moves: poll.
	wants := []string{`tollgate_requests_total{api="Produce"`, `tollgate_broker_log_end_offset{partition="0",topic="auto"} 1`,
		"tollgate_request_frames_mapped_bytes ", "tollgate_single_port_record_pipes "} // the process-wide gauges are wired too
	missing := wants
	for deadline := time.Now().Add(10 * time.Second); len(missing) > 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		missing = missingMetrics(t, "http://"+g.admin.Addr().String()+"/metrics", wants)
	}
	for _, m := range missing {
		t.Errorf("/metrics lacks %s", m)
	}
	if g.Server.Policy() == nil || g.Server.Policy().Rules() != 1 {
		t.Error("the policy section was not installed")
	}
}

// TestUpstreamFromConfig: a configuration with an upstream forwards to it.
func TestUpstreamFromConfig(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "up"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // after the gateway's (cleanups run last-in first-out)
	g := startFrom(t, `
listeners: [{ listen: "127.0.0.1:0", broker_port_base: 0 }]
upstream: { bootstrap: [`+c.ListenAddrs()[0]+`] }
admin: { listen: "off" }
`)
	if g.Broker != nil {
		t.Fatal("a built-in broker was opened in upstream mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.Server.Addr(0).String()), kgo.DefaultProduceTopic("up"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if hw := c.PartitionInfo("up", 0).HighWatermark; hw != 1 {
		t.Fatalf("upstream high watermark %d, want 1", hw)
	}
}

// missingMetrics returns the strings of wants that url's body lacks.
func missingMetrics(t *testing.T, url string, wants []string) []string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var missing []string
	for _, want := range wants {
		if !strings.Contains(string(body), want) {
			missing = append(missing, want)
		}
	}
	return missing
}
