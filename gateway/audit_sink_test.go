package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/configs"
)

// readAudit consumes the audit topic of cluster seeds until it holds a
// request record for api by clientID, and returns it.
func readAudit(t *testing.T, seeds []string, api, clientID string) map[string]any {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("tollgate-audit"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no %s record from %s in the audit topic", api, clientID)
		}
		var found map[string]any
		fs.EachRecord(func(r *kgo.Record) {
			var rec map[string]any
			if json.Unmarshal(r.Value, &rec) != nil {
				t.Errorf("audit record is not JSON: %q", r.Value)
				return
			}
			if rec["api"] == api && rec["client_id"] == clientID {
				found = rec
			}
		})
		if found != nil {
			return found
		}
	}
}

func produceThrough(t *testing.T, addr, clientID, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(clientID), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestAuditSinkUpstream: audit.sink.kafka with no brokers writes the
// trail to the upstream cluster, where Kafka tools read it.
func TestAuditSinkUpstream(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "up", "tollgate-audit"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // after the gateway's, which flushes the trail to c
	g := startFrom(t, `
listeners: [{ listen: "127.0.0.1:0", broker_port_base: 0 }]
upstream: { bootstrap: [`+c.ListenAddrs()[0]+`] }
admin: { listen: "off" }
audit: { level: full, sink: { kafka: { topic: tollgate-audit } } }
`)
	produceThrough(t, g.Server.Addr(0).String(), "audited-client", "up")
	rec := readAudit(t, c.ListenAddrs(), "Produce", "audited-client")
	if rec["decision"] != "forwarded" || !strings.Contains(fmtJSON(rec["topics"]), `"name":"up"`) {
		t.Errorf("audit record: %v", rec)
	}
}

// TestAuditSinkCluster: the built-in broker's trail goes to a named
// cluster; without one the configuration is refused (the broker would
// audit its own audit writes).
func TestAuditSinkCluster(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "tollgate-audit"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // after the gateway's, which flushes the trail to c
	g := startFrom(t, `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: `+t.TempDir()+`, fsync: never }
admin: { listen: "off" }
audit: { level: summary, sink: { kafka: { topic: tollgate-audit, brokers: [`+c.ListenAddrs()[0]+`] } } }
`)
	produceThrough(t, g.Server.Addr(0).String(), "builtin-client", "local")
	readAudit(t, c.ListenAddrs(), "Produce", "builtin-client")

	_, err = configs.Parse([]byte("audit: { level: full, sink: { kafka: { topic: a } } }\n"), "a.yaml")
	if err == nil || !strings.Contains(err.Error(), "audit.sink.kafka.brokers") {
		t.Errorf("a kafka sink without brokers on the built-in broker: %v", err)
	}
}

func fmtJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
