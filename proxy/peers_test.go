package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kcatRun runs kcat (librdkafka) with args and stdin, failing the test on error.
func kcatRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (make deps installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// TestKcat: librdkafka lists only gateway addresses, produces (with
// compression, which librdkafka enables only if Produce min version is 0 —
// kfake says 3, the gateway must say 0) and consumes through the gateway.
func TestKcat(t *testing.T) {
	c := startUpstream(t, 3, kfake.SeedTopics(3, "kc"))
	srv := startGateway(t, c)
	addr := srv.Addr(0).String()

	meta := kcatRun(t, "", "-b", addr, "-L")
	if strings.Contains(meta, upstreamHost) {
		t.Fatalf("kcat -L shows an upstream address:\n%s", meta)
	}
	brokers := regexp.MustCompile(`broker (\d+) at ([0-9.]+):(\d+)`).FindAllStringSubmatch(meta, -1)
	if len(brokers) != 3 {
		t.Fatalf("kcat -L lists %d brokers, want 3:\n%s", len(brokers), meta)
	}
	for _, b := range brokers {
		if b[2] != "127.0.0.1" {
			t.Errorf("broker %s at %s:%s", b[1], b[2], b[3])
		}
	}

	// Record the codec of every batch the upstream receives.
	var codecs sync.Map
	c.ControlKey(0, func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			for _, p := range tp.Partitions {
				if len(p.Records) > 22 {
					codecs.Store(p.Records[22]&0x07, true)
				}
			}
		}
		return nil, nil, false
	})
	var lines []string
	for i := range 50 {
		lines = append(lines, fmt.Sprintf("line-%02d", i))
	}
	kcatRun(t, strings.Join(lines, "\n")+"\n", "-b", addr, "-t", "kc", "-P", "-z", "gzip", "-X", "acks=all")
	if _, gzip := codecs.Load(byte(1)); !gzip {
		t.Error("librdkafka did not compress with gzip: was Produce min version 0 advertised?")
	}
	out := kcatRun(t, "", "-b", addr, "-t", "kc", "-C", "-o", "beginning", "-e", "-q")
	got := strings.Fields(out)
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(lines, " ") {
		t.Fatalf("kcat consumed %d records, want %d:\n%s", len(got), len(lines), out)
	}
}

// TestSarama: IBM/sarama's sync producer and partition consumer through
// the gateway, with keys and headers.
func TestSarama(t *testing.T) { forEachBackend(t, testSarama) }

func testSarama(t *testing.T, b backend) {
	srv, _ := b.start(t, 2, "sar")
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Compression = sarama.CompressionSnappy
	cl, err := sarama.NewClient([]string{srv.Addr(0).String()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, b := range cl.Brokers() {
		if !strings.HasPrefix(b.Addr(), "127.0.0.1:") {
			t.Errorf("sarama learned broker %d at %s", b.ID(), b.Addr())
		}
	}
	prod, err := sarama.NewSyncProducerFromClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 40
	for i := range n {
		_, _, err := prod.SendMessage(&sarama.ProducerMessage{
			Topic: "sar", Partition: -1,
			Key:     sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value:   sarama.StringEncoder(fmt.Sprintf("v%d", i)),
			Headers: []sarama.RecordHeader{{Key: []byte("h"), Value: []byte("x")}},
		})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	cons, err := sarama.NewConsumerFromClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	for _, p := range []int32{0, 1} {
		newest, err := cl.GetOffset("sar", p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		if newest == 0 {
			continue
		}
		pc, err := cons.ConsumePartition("sar", p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		timeout := time.After(20 * time.Second)
	consume:
		for {
			select {
			case msg := <-pc.Messages():
				if len(msg.Headers) != 1 || string(msg.Headers[0].Key) != "h" || !strings.HasPrefix(string(msg.Value), "v") {
					t.Errorf("message %s/%s headers %v", msg.Key, msg.Value, msg.Headers)
				}
				got++
				if msg.Offset == newest-1 {
					break consume
				}
			case err := <-pc.Errors():
				t.Fatalf("sarama consumer: %v", err)
			case <-timeout:
				t.Fatalf("partition %d: consumed %d records, then nothing for 20s", p, got)
			}
		}
		pc.Close()
	}
	if got != n {
		t.Fatalf("sarama consumed %d, want %d", got, n)
	}
}
