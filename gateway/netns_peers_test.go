//go:build linux

package gateway

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
)

// The topics of the sarama and kafka-go round in the namespace (three
// partitions each, one led by each upstream broker).
const (
	nsSarama  = "ns-sarama"
	nsKafkaGo = "ns-kafkago"
)

// netnsPeersResult is what the sarama and kafka-go round reports.
type netnsPeersResult struct {
	SaramaBrokers    []netnsBroker // the brokers sarama's client learned
	SaramaProduced   map[int32]int // acknowledged records per partition
	SaramaConsumed   int
	KafkaGoRead      map[int]int // records per partition, as read back by the group
	KafkaGoCommitted int         // messages whose offsets the group reader committed
}

func (r *netnsPeersResult) check(t *testing.T, tunnel string) {
	t.Helper()
	if len(r.SaramaBrokers) != 1 || r.SaramaBrokers[0].ID != nsVirtual || r.SaramaBrokers[0].addr() != tunnel {
		t.Errorf("sarama learned brokers %+v, want only node %d at %s", r.SaramaBrokers, nsVirtual, tunnel)
	}
	for p := range int32(3) {
		if r.SaramaProduced[p] != nsRecords/3 {
			t.Errorf("sarama produced %d records to %s[%d], want %d (per partition %v)", r.SaramaProduced[p], nsSarama, p, nsRecords/3, r.SaramaProduced)
		}
		if r.KafkaGoRead[int(p)] != nsRecords/3 {
			t.Errorf("kafka-go's group read %d records of %s[%d], want %d (per partition %v)", r.KafkaGoRead[int(p)], nsKafkaGo, p, nsRecords/3, r.KafkaGoRead)
		}
	}
	if r.SaramaConsumed != nsRecords {
		t.Errorf("sarama consumed %d records, want %d", r.SaramaConsumed, nsRecords)
	}
	if r.KafkaGoCommitted != nsRecords {
		t.Errorf("kafka-go's group committed %d messages, want %d", r.KafkaGoCommitted, nsRecords)
	}
}

// netnsPeers: sarama (a sync producer, round robin, acks=all, and a
// partition consumer) and kafka-go (a Writer, round robin, acks=all,
// and a consumer-group Reader that commits) through the one port.
func netnsPeers(ctx context.Context, t *testing.T, seed string) netnsPeersResult {
	var res netnsPeersResult
	netnsSarama(ctx, t, seed, &res)
	netnsKafkaGo(ctx, t, seed, &res)
	return res
}

func netnsSarama(ctx context.Context, t *testing.T, seed string, res *netnsPeersResult) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewRoundRobinPartitioner
	cl, err := sarama.NewClient([]string{seed}, cfg)
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	defer cl.Close()
	for _, b := range cl.Brokers() {
		host, port, _ := net.SplitHostPort(b.Addr())
		p, _ := strconv.Atoi(port)
		res.SaramaBrokers = append(res.SaramaBrokers, netnsBroker{ID: b.ID(), Host: host, Port: int32(p)})
	}
	prod, err := sarama.NewSyncProducerFromClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	res.SaramaProduced = map[int32]int{}
	for i := range nsRecords {
		p, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: nsSarama, Partition: -1, Value: sarama.StringEncoder(fmt.Sprint(i))})
		if err != nil {
			t.Fatalf("sarama send %d: %v", i, err)
		}
		res.SaramaProduced[p]++
	}
	cons, err := sarama.NewConsumerFromClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for p, n := range res.SaramaProduced {
		pc, err := cons.ConsumePartition(nsSarama, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("sarama consume %s[%d]: %v", nsSarama, p, err)
		}
		for range n {
			select {
			case <-pc.Messages():
				res.SaramaConsumed++
			case err := <-pc.Errors():
				t.Fatalf("sarama consumer: %v", err)
			case <-ctx.Done():
				t.Fatalf("sarama consumed %d: %v", res.SaramaConsumed, ctx.Err())
			}
		}
		pc.Close()
	}
}

func netnsKafkaGo(ctx context.Context, t *testing.T, seed string, res *netnsPeersResult) {
	w := &kafkago.Writer{Addr: kafkago.TCP(seed), Topic: nsKafkaGo, RequiredAcks: kafkago.RequireAll,
		Balancer: &kafkago.RoundRobin{}, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	for i := range nsRecords {
		if err := w.WriteMessages(ctx, kafkago.Message{Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("kafka-go write %d: %v", i, err)
		}
	}
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{seed}, Topic: nsKafkaGo, GroupID: "ns-kafkago-group",
		StartOffset: kafkago.FirstOffset, MaxWait: 200 * time.Millisecond})
	defer r.Close()
	res.KafkaGoRead = map[int]int{}
	for range nsRecords {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go read after %d: %v", res.KafkaGoCommitted, err)
		}
		res.KafkaGoRead[m.Partition]++
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("kafka-go commit: %v", err)
		}
		res.KafkaGoCommitted++
	}
}
