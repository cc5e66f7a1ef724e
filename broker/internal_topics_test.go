package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInternalTopics: __consumer_offsets and __transaction_state are in
// Metadata as internal topics led by the broker, a produce or a delete of
// them is refused, a classic regex consumer matching everything (which
// filters on IsInternal) does not read them, a KIP-848 regex naming one is
// assigned it (Kafka resolves broker-side regexes over all topics), and a
// restart keeps exactly one of each.
func TestInternalTopics(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	addr := startGateway(t, b)
	createTopic(t, addr, "plain", 2, nil)
	cl := newClient(t, addr)
	ctx := testCtx(t)

	req := kmsg.NewPtrMetadataRequest() // all topics
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	internal := map[string]bool{}
	for _, mt := range resp.Topics {
		if mt.IsInternal {
			internal[*mt.Topic] = true
			if len(mt.Partitions) == 0 || mt.Partitions[0].Leader != 0 || mt.ErrorCode != 0 {
				t.Fatalf("internal topic %s: %+v", *mt.Topic, mt)
			}
		} else if *mt.Topic != "plain" {
			t.Fatalf("unexpected topic %s", *mt.Topic)
		}
	}
	if !internal[offsetsTopic] || !internal[txnStateTopic] || len(internal) != 2 {
		t.Fatalf("internal topics in Metadata: %v", internal)
	}

	err = cl.ProduceSync(ctx, &kgo.Record{Topic: offsetsTopic, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to %s: %v, want INVALID_TOPIC_EXCEPTION", offsetsTopic, err)
	}
	dresp, err := kadm.NewClient(cl).DeleteTopics(ctx, offsetsTopic, txnStateTopic)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range dresp {
		if !errors.Is(r.Err, kerr.InvalidTopicException) {
			t.Fatalf("delete %s: %v, want INVALID_TOPIC_EXCEPTION", r.Topic, r.Err)
		}
	}

	// A classic regex consumer of every name reads only "plain".
	produceValues(t, newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "plain", "p", 0, 10)
	s := &seen{m: map[string]bool{}}
	m := startMember(t, addr, "g-all", ".*", s, kgo.ConsumeRegex(), kgo.MetadataMinAge(100*time.Millisecond))
	checkFor(t, func() bool { return s.len() == 10 })
	if topics := m.cl.GetConsumeTopics(); len(topics) != 1 || topics[0] != "plain" {
		t.Fatalf("classic regex .* consumes %v, want only plain", topics)
	}
	m.leave()
	// A KIP-848 regex naming __consumer_offsets is assigned it.
	m = startMember(t, addr, "g-848", "plain|__consumer_offsets", &seen{m: map[string]bool{}}, kgo.ConsumeRegex(), kgo.ServerSideBalancer(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.MetadataMinAge(100*time.Millisecond))
	c := b.NewConn("check")
	dreq := kmsg.NewPtrConsumerGroupDescribeRequest()
	dreq.Groups = []string{"g-848"}
	checkFor(t, func() bool {
		g := mustCall[*kmsg.ConsumerGroupDescribeResponse](t, c, dreq).Groups[0]
		return len(g.Members) == 1 && len(g.Members[0].Assignment.TopicPartitions) == 2
	})
	c.Close()
	m.leave()

	// Reopen: the internal topics are loaded, not created again.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := openBroker(t, dir)
	n := 0
	for _, tp := range b2.sortedTopics() {
		if isInternalTopic(tp.name) {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d internal topics after a restart, want 2", n)
	}
}

// partitionStat is the stats of one partition (the internal topics are
// listed too, so a test cannot take the first entry as its own).
func partitionStat(tb testing.TB, b *Broker, topic string, p int32) PartitionStat {
	tb.Helper()
	for _, st := range b.PartitionStats() {
		if st.Topic == topic && st.Partition == p {
			return st
		}
	}
	tb.Fatalf("no stats for %s/%d", topic, p)
	return PartitionStat{}
}
