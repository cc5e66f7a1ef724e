package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnBatch encodes a transactional batch of values from pid/epoch starting
// at sequence seq.
func txnBatch(pid int64, epoch int16, seq int32, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		body := r.AppendTo(nil)[1:]
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10,
		LastOffsetDelta: int32(len(values) - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: int32(len(values)), Records: recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

func produceTxn(t testing.TB, c *Conn, txnID, topic string, p int32, batch []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, -1, 5000
	req.TransactionID = kmsg.StringPtr(txnID)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return mustCall[*kmsg.ProduceResponse](t, c, req).Topics[0].Partitions[0].ErrorCode
}

func initTxn(t testing.TB, c *Conn, id string) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
	for {
		r := mustCall[*kmsg.InitProducerIDResponse](t, c, req)
		if r.ErrorCode == kerr.ConcurrentTransactions.Code {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if r.ErrorCode != 0 {
			t.Fatalf("init %s: %v", id, kerr.ErrorForCode(r.ErrorCode))
		}
		return r.ProducerID, r.ProducerEpoch
	}
}

func addPartition(t testing.TB, c *Conn, id string, pid int64, epoch int16, topic string, p int32) int16 {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{p}}}
	return mustCall[*kmsg.AddPartitionsToTxnResponse](t, c, req).Topics[0].Partitions[0].ErrorCode
}

func endTxn(t testing.TB, c *Conn, id string, pid int64, epoch int16, commit bool) int16 {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = 4
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return mustCall[*kmsg.EndTxnResponse](t, c, req).ErrorCode
}

func TestTxnProtocol(t *testing.T) {
	b := groupBroker(t, t.TempDir())
	srv := startServer(t, b)
	createTopic(t, srv.addr(), "tx", 1, nil)
	c := b.NewConn("test")
	defer c.Close()
	l := b.lookup("tx").partitions[0].log

	// A transactional produce needs the partition added first.
	pid, epoch := initTxn(t, c, "t1")
	if code := produceTxn(t, c, "t1", "tx", 0, txnBatch(pid, epoch, 0, "early")); code != kerr.InvalidTxnState.Code {
		t.Fatalf("produce before AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
	}
	if code := addPartition(t, c, "t1", pid, epoch, "tx", 0); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := addPartition(t, c, "t1", pid, epoch, "nope", 0); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", kerr.ErrorForCode(code))
	}
	if code := produceTxn(t, c, "t1", "tx", 0, txnBatch(pid, epoch, 0, "a", "b")); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	// The open transaction holds the last stable offset at its start.
	if lso, hw := l.LastStableOffset(), l.HighWatermark(); lso != 0 || hw != 2 {
		t.Fatalf("open transaction: lso %d hw %d", lso, hw)
	}
	cl := newClient(t, srv.addr())
	adm := kadm.NewClient(cl)
	dt, err := adm.DescribeTransactions(testCtx(t), "t1")
	if err != nil || dt["t1"].State != "Ongoing" || dt["t1"].ProducerID != pid || len(dt["t1"].Topics["tx"]) != 1 {
		t.Fatalf("describe: %+v %v", dt, err)
	}
	lt, err := adm.ListTransactions(testCtx(t), nil, []string{"Ongoing"})
	if err != nil || len(lt) != 1 {
		t.Fatalf("list ongoing: %+v %v", lt, err)
	}
	if code := endTxn(t, c, "t1", pid, epoch, true); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	// Commit marker at offset 2; the LSO moves past it.
	if lso, hw := l.LastStableOffset(), l.HighWatermark(); lso != 3 || hw != 3 {
		t.Fatalf("after commit: lso %d hw %d", lso, hw)
	}
	// A retried commit succeeds; an abort now is INVALID_TXN_STATE.
	if code := endTxn(t, c, "t1", pid, epoch, true); code != 0 {
		t.Fatalf("retried commit: %v", kerr.ErrorForCode(code))
	}
	if code := endTxn(t, c, "t1", pid, epoch, false); code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %v", kerr.ErrorForCode(code))
	}

	// Abort: the range is recorded for read_committed fetches.
	addPartition(t, c, "t1", pid, epoch, "tx", 0)
	if code := produceTxn(t, c, "t1", "tx", 0, txnBatch(pid, epoch, 2, "c")); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := endTxn(t, c, "t1", pid, epoch, false); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	ab := l.AbortedTransactions(0, l.HighWatermark())
	if len(ab) != 1 || ab[0].FirstOffset != 3 || ab[0].LastOffset != 4 || ab[0].ProducerID != pid {
		t.Fatalf("aborted transactions: %+v", ab)
	}

	// Fencing: a new InitProducerID bumps the epoch; the old one is fenced
	// everywhere.
	pid2, epoch2 := initTxn(t, c, "t1")
	if pid2 != pid || epoch2 != epoch+1 {
		t.Fatalf("re-init: %d/%d after %d/%d", pid2, epoch2, pid, epoch)
	}
	if code := addPartition(t, c, "t1", pid, epoch, "tx", 0); code != kerr.ProducerFenced.Code {
		t.Fatalf("fenced add partitions: %v", kerr.ErrorForCode(code))
	}
	if code := endTxn(t, c, "t1", pid, epoch, true); code != kerr.ProducerFenced.Code {
		t.Fatalf("fenced end: %v", kerr.ErrorForCode(code))
	}
	addPartition(t, c, "t1", pid2, epoch2, "tx", 0)
	if code := produceTxn(t, c, "t1", "tx", 0, txnBatch(pid, epoch, 3, "zombie")); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("fenced produce: %v", kerr.ErrorForCode(code))
	}
	// Re-initializing with a transaction open aborts it.
	if code := produceTxn(t, c, "t1", "tx", 0, txnBatch(pid2, epoch2, 0, "d")); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	_, epoch3 := initTxn(t, c, "t1")
	if epoch3 != epoch2+2 {
		t.Fatalf("epoch after fencing an open transaction: %d, want %d", epoch3, epoch2+2)
	}
	if lso, hw := l.LastStableOffset(), l.HighWatermark(); lso != hw {
		t.Fatalf("transaction left open: lso %d hw %d", lso, hw)
	}
}

func TestTxnTimeoutAndRecovery(t *testing.T) {
	dir := t.TempDir()
	b := groupBroker(t, dir)
	srv := startServer(t, b)
	createTopic(t, srv.addr(), "tt", 1, nil)
	c := b.NewConn("test")
	defer c.Close()
	l := b.lookup("tt").partitions[0].log

	// A transaction open at a crash is aborted on recovery.
	pid, epoch := initTxn(t, c, "crash")
	addPartition(t, c, "crash", pid, epoch, "tt", 0)
	produceTxn(t, c, "crash", "tt", 0, txnBatch(pid, epoch, 0, "x", "y"))
	b2 := groupBroker(t, crashCopy(t, dir))
	l2 := b2.lookup("tt").partitions[0].log
	if lso, hw := l2.LastStableOffset(), l2.HighWatermark(); lso != hw || hw != 3 {
		t.Fatalf("after recovery: lso %d hw %d (want the abort marker at 2)", lso, hw)
	}
	if ab := l2.AbortedTransactions(0, 3); len(ab) != 1 || ab[0].FirstOffset != 0 {
		t.Fatalf("recovered abort: %+v", ab)
	}
	if st := b2.txns.get("crash", false); st.state != txnCompleteAbort || st.epoch != epoch+1 {
		t.Fatalf("recovered state %s epoch %d", st.state, st.epoch)
	}

	// A transaction open longer than its timeout is aborted and fenced.
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("slow"), 300
	r := mustCall[*kmsg.InitProducerIDResponse](t, c, req)
	if r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	if code := addPartition(t, c, "slow", r.ProducerID, r.ProducerEpoch, "tt", 0); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code := produceTxn(t, c, "slow", "tt", 0, txnBatch(r.ProducerID, r.ProducerEpoch, 0, "z")); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	// (The "crash" transaction is still open in b, so the LSO stays at 0.)
	checkFor(t, func() bool {
		st := b.txns.get("slow", false)
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.state == txnCompleteAbort
	})
	if ab := l.AbortedTransactions(0, l.HighWatermark()); len(ab) != 1 || ab[0].FirstOffset != 2 {
		t.Fatalf("timed-out transaction's abort: %+v", ab)
	}
	if code := endTxn(t, c, "slow", r.ProducerID, r.ProducerEpoch, true); code != kerr.ProducerFenced.Code {
		t.Fatalf("commit after a timeout: %v", kerr.ErrorForCode(code))
	}
	// KIP-360: the producer may recover with its old epoch.
	req.Version, req.ProducerID, req.ProducerEpoch = 4, r.ProducerID, r.ProducerEpoch
	if r2 := mustCall[*kmsg.InitProducerIDResponse](t, c, req); r2.ErrorCode != 0 || r2.ProducerEpoch != r.ProducerEpoch+2 {
		t.Fatalf("recover after timeout: %v epoch %d", kerr.ErrorForCode(r2.ErrorCode), r2.ProducerEpoch)
	}
}

// TestTxnKgoExactlyOnce runs a kgo GroupTransactSession consume-transform-
// produce loop, aborting its first transaction, and checks that the output
// holds every input exactly once in committed data.
func TestTxnKgoExactlyOnce(t *testing.T) {
	b := groupBroker(t, t.TempDir())
	addr := startGateway(t, b)
	createTopic(t, addr, "eos-in", 3, nil)
	createTopic(t, addr, "eos-out", 3, nil)
	const n = 300
	produceValues(t, newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "eos-in", "e", 0, n)

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr), kgo.TransactionalID("eos"), kgo.ConsumerGroup("eos-g"),
		kgo.ConsumeTopics("eos-in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.HeartbeatInterval(200*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx := testCtx(t)
	done, aborted := 0, false
	for done < n {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("transformed %d of %d", done, n)
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, r := range recs {
			wg.Add(1)
			sess.Produce(ctx, &kgo.Record{Topic: "eos-out", Value: append([]byte("out-"), r.Value...)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("transactional produce: %v", err)
				}
				wg.Done()
			})
		}
		wg.Wait()
		commit := kgo.TryCommit
		if !aborted {
			commit, aborted = kgo.TryAbort, true
		}
		committed, err := sess.End(ctx, commit)
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		if committed {
			done += len(recs)
		}
	}
	if done != n {
		t.Fatalf("committed %d transformed records, want %d", done, n)
	}
	// The group's offsets moved with the commits.
	checkFor(t, func() bool {
		total := int64(0)
		for _, l := range b.GroupLag() {
			if l.Group == "eos-g" {
				total += l.Committed
			}
		}
		return total == n
	})
	// The output has the aborted batch too, marked aborted: every
	// partition is stable and the aborted ranges are recorded.
	var abortedRecords int64
	for _, p := range b.lookup("eos-out").partitions {
		l := p.log
		if l.LastStableOffset() != l.HighWatermark() {
			t.Fatalf("eos-out/%d left unstable", p.idx)
		}
		for _, a := range l.AbortedTransactions(0, l.HighWatermark()) {
			abortedRecords += a.LastOffset - a.FirstOffset
		}
	}
	if abortedRecords == 0 {
		t.Fatal("the aborted transaction left no aborted range")
	}
	readCommittedOutput(t, b, addr, n)
}

// readCommittedOutput reads eos-out at read_committed and checks that each
// input appears exactly once: the broker must serve the aborted ranges, and
// kgo must drop the aborted records by them.
func readCommittedOutput(t *testing.T, b *Broker, addr string, n int) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes, req.IsolationLevel, req.SessionEpoch = 12, 1<<20, 1, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "eos-out"
	for p := int32(0); p < 3; p++ {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.LogStartOffset = p, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := mustCall[*kmsg.FetchResponse](t, b.NewConn("test"), req)
	served := false
	for _, p := range resp.Topics[0].Partitions {
		if len(p.AbortedTransactions) > 0 {
			served = true
		}
	}
	if !served {
		t.Fatal("read_committed Fetch reports no aborted transaction for eos-out")
	}
	// kgo's default versions through the gateway: Fetch v16+ (NodeEndpoints;
	// the gateway passes the broker's streamed body through untouched).
	cl := newClient(t, addr, kgo.ConsumeTopics("eos-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx := testCtx(t)
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if mx, ok := v.KeyMaxVersion(1); v.Err != nil || !ok || mx < 16 {
			t.Fatalf("Fetch through the gateway: max v%d (%v)", mx, v.Err)
		}
	}
	got := map[string]int{}
	for len(got) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)]++ })
	}
	// Everything is stable already; one more short poll catches an aborted
	// record served after the last committed one.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	cl.PollFetches(short).EachRecord(func(r *kgo.Record) { got[string(r.Value)]++ })
	if len(got) != n {
		t.Fatalf("read_committed output has %d distinct records, want %d", len(got), n)
	}
	for v, c := range got {
		if c != 1 {
			t.Fatalf("%s seen %d times", v, c)
		}
	}
}

func TestTxnKgoFencing(t *testing.T) {
	b := groupBroker(t, t.TempDir())
	addr := startGateway(t, b)
	createTopic(t, addr, "fence", 1, nil)
	ctx := testCtx(t)
	a := newClient(t, addr, kgo.TransactionalID("fenced"), kgo.DefaultProduceTopic("fence"))
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := a.ProduceSync(ctx, &kgo.Record{Value: []byte("a1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A second producer with the same transactional id fences the first
	// and aborts its open transaction.
	bb := newClient(t, addr, kgo.TransactionalID("fenced"), kgo.DefaultProduceTopic("fence"))
	if err := bb.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := bb.ProduceSync(ctx, &kgo.Record{Value: []byte("b1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := bb.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	err := a.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer's commit: %v", err)
	}
	l := b.lookup("fence").partitions[0].log
	if ab := l.AbortedTransactions(0, l.HighWatermark()); len(ab) != 1 {
		t.Fatalf("the fenced transaction was not aborted: %+v", ab)
	}
	dt, err := kadm.NewClient(newClient(t, addr)).DescribeTransactions(ctx, "fenced")
	if err != nil || dt["fenced"].State != "CompleteCommit" {
		t.Fatalf("describe: %+v %v", dt, err)
	}
}
