package proxy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
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

// TestSinglePortNextGenGroup: a KIP-848 consumer group (kgo's
// ServerSideBalancer: ConsumerGroupHeartbeat to the group coordinator)
// consumes and commits through the one port.
func TestSinglePortNextGenGroup(t *testing.T) {
	const n = 60
	c, srv, scan := startSinglePort(t, "ng", 3)
	hb := countNodes(c, kmsg.ConsumerGroupHeartbeat)
	ctx := ctxT(t, 60*time.Second)
	prod := newClient(t, srv, nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "ng", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.ConsumeTopics("ng"), kgo.ConsumerGroup("ng-group"),
		kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, n)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	hb.mu.Lock()
	beats := 0
	for _, c := range hb.seen[int16(kmsg.ConsumerGroupHeartbeat)] {
		beats += c
	}
	hb.mu.Unlock()
	if beats == 0 {
		t.Fatal("no ConsumerGroupHeartbeat reached the upstream: the group was not KIP-848")
	}
	scan.assertClean(t)
}
