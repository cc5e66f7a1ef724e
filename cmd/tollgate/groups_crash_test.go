package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupsAndTransactionsSurviveKill9: the binary is killed with SIGKILL
// while a consumer group has committed progress and a transaction is open.
// After the restart the committed offsets are intact, the group resumes
// exactly where it committed (nothing committed is read again), and the
// open transaction is aborted: a read_committed consumer never sees its
// records, and the partition is not stuck behind it.
func TestGroupsAndTransactionsSurviveKill9(t *testing.T) {
	bin := tollgateBinary(t)
	dir := t.TempDir()
	c, err := startTollgate(t, bin, dir, "127.0.0.1:0", "--fsync", "always")
	if err != nil {
		t.Fatal(err)
	}
	addr := c.addr
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createTestTopic(t, addr, "in", 1)
	createTestTopic(t, addr, "out", 1)

	prod := testClient(t, addr, kgo.DefaultProduceTopic("in"))
	for i := range 100 {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// A group member reads 40 records and commits them.
	// A short session timeout: after the crash the dead member holds the
	// group until it expires, as in Kafka.
	cons := testClient(t, addr, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"), kgo.SessionTimeout(6*time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxBytes(4<<10))
	var read []*kgo.Record
	for len(read) < 40 {
		fs := cons.PollRecords(ctx, 40-len(read))
		if ctx.Err() != nil {
			t.Fatalf("read %d of 40", len(read))
		}
		read = append(read, fs.Records()...)
	}
	if err := cons.CommitRecords(ctx, read...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	committed := read[len(read)-1].Offset + 1
	// A transaction is left open with records in the log.
	txp := testClient(t, addr, kgo.TransactionalID("tx-crash"), kgo.DefaultProduceTopic("out"),
		kgo.TransactionTimeout(60*time.Second))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := txp.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("uncommitted-", i))).FirstErr(); err != nil {
			t.Fatalf("produce in transaction: %v", err)
		}
	}

	c.kill()
	cons.Close()
	txp.Close()
	c = restartOn(t, bin, dir, addr, "--fsync", "always")
	t.Cleanup(func() { c.stop() })

	adm := kadm.NewClient(testClient(t, addr))
	offs, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("in", 0); !ok || o.At != committed {
		t.Fatalf("committed offset after kill -9: %+v (found %v), want %d", o, ok, committed)
	}
	// The group resumes where it committed.
	again := testClient(t, addr, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6*time.Second))
	for {
		fs := again.PollRecords(ctx, 1)
		if ctx.Err() != nil {
			t.Fatal("the group never resumed after the restart")
		}
		if recs := fs.Records(); len(recs) > 0 {
			if recs[0].Offset != committed {
				t.Fatalf("group resumed at offset %d, want %d (committed before the kill)", recs[0].Offset, committed)
			}
			break
		}
	}
	// The open transaction was aborted, and read_committed readers move on.
	after := testClient(t, addr, kgo.DefaultProduceTopic("out"))
	if err := after.ProduceSync(ctx, kgo.StringRecord("after-restart")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rc := testClient(t, addr, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for {
		fs := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("read_committed consumer never got past the transaction open at the crash")
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != "after-restart" {
				t.Errorf("read_committed consumer saw %q from a transaction open at the crash", r.Value)
			}
			done = true
		})
		if done {
			break
		}
	}
}
