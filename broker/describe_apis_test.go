package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeProducersThroughKadm: an idempotent producer's id, epoch and
// last sequence, and a transactional producer's open transaction, as kadm
// reads them.
func TestDescribeProducersThroughKadm(t *testing.T) {
	_, srv := newBroker(t)
	createTopic(t, srv.addr(), "prod", 2, nil)
	ctx := testCtx(t)
	idem := newClient(t, srv.addr(), kgo.DefaultProduceTopic("prod"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 7 {
		if err := idem.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	idemID, idemEpoch, err := idem.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	txn := newClient(t, srv.addr(), kgo.DefaultProduceTopic("prod"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("describe-me"), kgo.TransactionTimeout(time.Minute))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	// Two records before the transaction, so its first offset is 2.
	if err := idem.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("a")}, &kgo.Record{Partition: 1, Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("in-txn")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txnID, txnEpoch, err := txn.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(newClient(t, srv.addr()))
	got, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"prod": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	p0 := got["prod"].Partitions[0]
	if p0.Err != nil || len(p0.ActiveProducers) != 1 {
		t.Fatalf("partition 0: %+v", p0)
	}
	d := p0.ActiveProducers[idemID]
	if d.ProducerEpoch != idemEpoch || d.LastSequence != 6 || d.CurrentTxnStartOffset != -1 {
		t.Fatalf("idempotent producer %d/%d: described %+v", idemID, idemEpoch, d)
	}
	p1 := got["prod"].Partitions[1]
	td, ok := p1.ActiveProducers[txnID]
	if !ok || td.ProducerEpoch != txnEpoch || td.CurrentTxnStartOffset != 2 || td.LastSequence != 0 {
		t.Fatalf("transactional producer %d/%d: described %+v (partition %+v)", txnID, txnEpoch, td, p1)
	}
	raw := kmsg.NewPtrDescribeProducersRequest()
	raw.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "missing", Partitions: []int32{0}}, {Topic: "prod", Partitions: []int32{7}}}
	kresp, err := newClient(t, srv.addr()).Broker(0).Request(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range kresp.(*kmsg.DescribeProducersResponse).Topics {
		if rt.Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("%s/%d described: %+v", rt.Topic, rt.Partitions[0].Partition, rt.Partitions[0])
		}
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	got, err = adm.DescribeProducers(ctx, kadm.TopicsSet{"prod": {1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if td := got["prod"].Partitions[1].ActiveProducers[txnID]; td.CurrentTxnStartOffset != -1 {
		t.Fatalf("after abort the transaction is still open: %+v", td)
	}
}

// describeTopicPartitions pages through DescribeTopicPartitions with limit
// partitions a page and returns every (topic, partition) and the pages.
func describeTopicPartitions(t *testing.T, cl *kgo.Client, topics []string, limit int32) ([]string, int) {
	t.Helper()
	var out []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	pages := 0
	for {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		for _, name := range topics {
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = name
			req.Topics = append(req.Topics, rt)
		}
		req.ResponsePartitionLimit, req.Cursor = limit, cursor
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, rt := range resp.Topics {
			if rt.ErrorCode != 0 {
				out = append(out, fmt.Sprintf("%s:%s", *rt.Topic, kerr.ErrorForCode(rt.ErrorCode)))
				continue
			}
			for _, p := range rt.Partitions {
				if p.LeaderID != 0 || len(p.Replicas) != 1 || len(p.ISR) != 1 {
					t.Fatalf("%s/%d: %+v", *rt.Topic, p.Partition, p)
				}
				out = append(out, fmt.Sprintf("%s/%d", *rt.Topic, p.Partition))
			}
		}
		if resp.NextCursor == nil {
			return out, pages
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
		if pages > 100 {
			t.Fatal("cursor never ends")
		}
	}
}

// TestDescribeTopicPartitionsCursor: pages of at most the limit, every
// partition exactly once in topic and partition order, for all topics and
// for named ones (an unknown one reported, not fatal).
func TestDescribeTopicPartitionsCursor(t *testing.T) {
	_, srv := newBroker(t)
	createTopic(t, srv.addr(), "b-five", 5, nil)
	createTopic(t, srv.addr(), "a-three", 3, nil)
	createTopic(t, srv.addr(), "c-one", 1, nil)
	cl := newClient(t, srv.addr())
	// All topics include Kafka's internal ones (internal_topics.go).
	want := "[__consumer_offsets/0 __transaction_state/0 a-three/0 a-three/1 a-three/2 b-five/0 b-five/1 b-five/2 b-five/3 b-five/4 c-one/0]"
	for _, limit := range []int32{1, 2, 3, 4, 9, 100} {
		got, pages := describeTopicPartitions(t, cl, nil, limit)
		if fmt.Sprint(got) != want {
			t.Fatalf("limit %d: %v, want %s", limit, got, want)
		}
		if wantPages := (11 + int(limit) - 1) / int(limit); pages != wantPages && pages != wantPages+1 {
			t.Fatalf("limit %d: %d pages, want %d", limit, pages, wantPages)
		}
	}
	got, _ := describeTopicPartitions(t, cl, []string{"c-one", "nope", "a-three"}, 2)
	if fmt.Sprint(got) != "[a-three/0 a-three/1 a-three/2 c-one/0 nope:UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition.]" {
		t.Fatalf("named topics: %v", got)
	}
}

// TestDescribeTopicPartitionsCursorTopicGone: a cursor naming a topic
// deleted since starts the listing at the next topic's first partition.
func TestDescribeTopicPartitionsCursorTopicGone(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "a", 1, nil)
	createTopic(t, srv.addr(), "b", 3, nil)
	createTopic(t, srv.addr(), "c", 2, nil)
	if err := b.deleteTopic(b.lookup("b")); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "b", Partition: 2}
	resp, err := req.RequestWith(testCtx(t), newClient(t, srv.addr()))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "c" || len(resp.Topics[0].Partitions) != 2 || resp.NextCursor != nil {
		t.Fatalf("after a cursor on a deleted topic: %+v", resp)
	}
}
