package console_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-kafka/tollgate/console"
)

// TestCluster: `tollgate cluster` lists what Metadata says (kadm's view)
// on both backends: every broker with its address and the controller,
// every topic's partitions; -t narrows to topics, and an unknown one is
// an error.
func TestCluster(t *testing.T) {
	for i, start := range backends(t) {
		t.Run([]string{"builtin", "gateway"}[i], func(t *testing.T) {
			b := start(t)
			run(t, console.Topic, b.addr, "", "create", "orders", "-p", "3").ok(t, "create")
			run(t, console.Topic, b.addr, "", "create", "payments", "-p", "1").ok(t, "create")
			m, err := kadmFor(t, b.addr).Metadata(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var d console.ClusterDescription
			out := run(t, console.Cluster, b.addr, "", "--format", "json").ok(t, "cluster json").out
			if err := json.Unmarshal([]byte(out), &d); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
			if d.ClusterID != m.Cluster || d.Controller != m.Controller || len(d.Brokers) != len(m.Brokers) {
				t.Fatalf("cluster %+v, kadm %+v", d, m)
			}
			controllers := 0
			for i, br := range d.Brokers {
				kb := m.Brokers[i]
				if br.ID != kb.NodeID || br.Host != kb.Host || br.Port != kb.Port || br.Controller != (kb.NodeID == m.Controller) {
					t.Errorf("broker %+v, kadm %+v", br, kb)
				}
				if br.Controller {
					controllers++
				}
			}
			if controllers != 1 {
				t.Errorf("%d brokers marked controller", controllers)
			}
			topics := map[string]console.ClusterTopic{}
			for _, tp := range d.Topics {
				topics[tp.Name] = tp
			}
			if len(topics) != len(m.Topics) || len(topics["orders"].Partitions) != 3 || len(topics["payments"].Partitions) != 1 {
				t.Fatalf("topics %+v, kadm has %v", d.Topics, m.Topics.Names())
			}
			for _, p := range topics["orders"].Partitions {
				kp := m.Topics["orders"].Partitions[p.Partition]
				if p.Leader != kp.Leader || len(p.Replicas) != len(kp.Replicas) || len(p.ISR) != len(kp.ISR) {
					t.Errorf("orders[%d] %+v, kadm %+v", p.Partition, p, kp)
				}
			}

			text := run(t, console.Cluster, b.addr, "", "-t", "orders").ok(t, "cluster -t").out
			if !strings.Contains(text, "BROKER  ADDRESS") || !strings.Contains(text, "yes") ||
				strings.Count(text, "\norders ") != 3 || strings.Contains(text, "payments") {
				t.Errorf("cluster -t orders:\n%s", text)
			}
			run(t, console.Cluster, b.addr, "", "-t", "nope").oneLineError(t, "unknown topic", console.ExitFailed, "UNKNOWN_TOPIC_OR_PARTITION")
		})
	}
}
