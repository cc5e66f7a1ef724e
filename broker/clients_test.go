package broker

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
)

func TestSarama(t *testing.T) {
	_, srv := newBroker(t)
	createTopic(t, srv.addr(), "sarama", 1, nil)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Compression = sarama.CompressionSnappy
	prod, err := sarama.NewSyncProducer([]string{srv.addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := 0; i < 20; i++ {
		_, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sarama", Value: sarama.StringEncoder(fmt.Sprint("s", i))})
		if err != nil || off != int64(i) {
			t.Fatalf("send %d: offset %d, %v", i, off, err)
		}
	}
	cons, err := sarama.NewConsumer([]string{srv.addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("sarama", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	timeout := time.After(20 * time.Second)
	for i := 0; i < 20; i++ {
		select {
		case m := <-pc.Messages():
			if string(m.Value) != fmt.Sprint("s", i) || m.Offset != int64(i) {
				t.Fatalf("message %d: %q at %d", i, m.Value, m.Offset)
			}
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-timeout:
			t.Fatalf("sarama consumed %d of 20", i)
		}
	}
}

func TestKafkaGo(t *testing.T) {
	_, srv := newBroker(t)
	createTopic(t, srv.addr(), "kgo-seg", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := &kafkago.Writer{Addr: kafkago.TCP(srv.addr()), Topic: "kgo-seg", RequiredAcks: kafkago.RequireAll, BatchTimeout: 10 * time.Millisecond, Compression: kafkago.Lz4}
	defer w.Close()
	var msgs []kafkago.Message
	for i := 0; i < 20; i++ {
		msgs = append(msgs, kafkago.Message{Key: []byte("k"), Value: []byte(fmt.Sprint("m", i))})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{srv.addr()}, Topic: "kgo-seg", Partition: 0, MaxWait: 200 * time.Millisecond})
	defer r.Close()
	for i := 0; i < 20; i++ {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if string(m.Value) != fmt.Sprint("m", i) {
			t.Fatalf("message %d: %q", i, m.Value)
		}
	}
}

func TestKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed")
	}
	_, srv := newBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(stdin string, args ...string) string {
		cmd := exec.CommandContext(ctx, "kcat", append([]string{"-b", srv.addr()}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// -P auto-creates the topic through Metadata.
	run("one\ntwo\nthree\n", "-P", "-t", "kc", "-z", "gzip")
	if out := run("", "-L"); !strings.Contains(out, `topic "kc" with 1 partitions`) {
		t.Fatalf("kcat -L:\n%s", out)
	}
	if out := run("", "-C", "-t", "kc", "-o", "beginning", "-e", "-q"); out != "one\ntwo\nthree\n" {
		t.Fatalf("kcat -C got %q", out)
	}
}
