package proxy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSinglePortKafkaGo: segmentio/kafka-go's Writer (balanced over the
// partitions, acks=all) and a consumer-group Reader through the one port.
func TestSinglePortKafkaGo(t *testing.T) {
	const n = 30
	c, srv, _ := startSinglePort(t, "skg", 3)
	nodes := countNodes(c, kmsg.Produce)
	addr := srv.Addr(0).String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := &kafkago.Writer{Addr: kafkago.TCP(addr), Topic: "skg", RequiredAcks: kafkago.RequireAll,
		Balancer: &kafkago.RoundRobin{}, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	for i := range n {
		if err := w.WriteMessages(ctx, kafkago.Message{Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{addr}, Topic: "skg", GroupID: "skg-group",
		StartOffset: kafkago.FirstOffset, MaxWait: 200 * time.Millisecond})
	defer r.Close()
	got := map[string]int{}
	for range n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read after %d: %v", len(got), err)
		}
		got[string(m.Value)]++
	}
	for i := range n {
		if got[fmt.Sprint(i)] != 1 {
			t.Errorf("message %d read %d times", i, got[fmt.Sprint(i)])
		}
	}
	nodes.assertAll(t, 3)
}
