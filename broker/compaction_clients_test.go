package broker

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactedTopicOtherClients reads a cleaned topic -- gaps, rewritten
// batches, a tombstone, and an empty batch kept for a producer whose last
// write was superseded -- with kcat (librdkafka) and sarama, besides kgo.
func TestCompactedTopicOtherClients(t *testing.T) {
	b, srv := newBroker(t, manualCleaner)
	topic := "compact-clients"
	compactedTopic(t, srv.addr(), topic, nil)
	first := newClient(t, srv.addr(), kgo.ProducerLinger(0))
	want := produceHistory(t, first, topic, 10, 5, map[int]bool{3: true})
	if err := first.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Key: []byte("x"), Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	second := newClient(t, srv.addr(), kgo.ProducerLinger(0))
	r, err := second.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Key: []byte("x"), Value: []byte("second")}).First()
	if err != nil {
		t.Fatal(err)
	}
	want["x"] = produced{r.Offset, []byte("second")}
	fill(t, second, topic, 30)
	if n := b.cleanAll(time.Now(), false); n != 1 {
		t.Fatalf("cleaned %d partitions", n)
	}
	ends, err := kadm.NewClient(second).ListEndOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	end := ends[topic][0].Offset
	got := map[string][]produced{}
	if _, err := exec.LookPath("kcat"); err == nil {
		got = readKcat(t, srv.addr(), topic)
		checkClientRead(t, "kcat", got, want)
	} else {
		t.Log("kcat not installed; sarama only")
	}
	checkClientRead(t, "sarama", readSarama(t, srv.addr(), topic, end), want)
}

// checkClientRead: each history key once with its latest value at its
// offset; the tombstoned key at most as a null.
func checkClientRead(t *testing.T, client string, got map[string][]produced, want map[string]produced) {
	t.Helper()
	for k, w := range want {
		g := got[k]
		switch {
		case w.value == nil && (len(g) > 1 || len(g) == 1 && g[0].value != nil):
			t.Fatalf("%s: deleted key %s reads %+v", client, k, g)
		case w.value == nil:
		case len(g) != 1 || g[0].off != w.off || string(g[0].value) != string(w.value):
			t.Fatalf("%s: key %s reads %+v, want %q at %d", client, k, g, w.value, w.off)
		}
	}
}

func readKcat(t *testing.T, addr, topic string) map[string][]produced {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kcat", "-b", addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-Z",
		"-f", "%k\t%o\t%s\n").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	got := map[string][]produced{}
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			t.Fatalf("kcat line %q", line)
		}
		off, _ := strconv.ParseInt(f[1], 10, 64)
		var v []byte
		if f[2] != "NULL" {
			v = []byte(f[2])
		}
		got[f[0]] = append(got[f[0]], produced{off, v})
	}
	return got
}

func readSarama(t *testing.T, addr, topic string, end int64) map[string][]produced {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cons, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	got := map[string][]produced{}
	timeout := time.After(20 * time.Second)
	for last := int64(-1); last < end-1; {
		select {
		case m := <-pc.Messages():
			got[string(m.Key)] = append(got[string(m.Key)], produced{m.Offset, m.Value})
			last = m.Offset
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-timeout:
			t.Fatalf("sarama read to offset %d of %d", last, end)
		}
	}
	return got
}
