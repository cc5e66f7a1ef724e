package proxy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// Acquisition locks in these tests: short where a test expects records
// whose acknowledgement was lost to come back (in seconds, not Kafka's
// 30 s), Kafka's default where it asserts each record is delivered once
// (a short lock could expire on a loaded machine while records wait in
// the client's buffer, and redeliver them).
const (
	shortShareLock   = "2000"
	defaultShareLock = "30000"
)

// startSharePort is startSinglePort with share groups tuned for tests:
// a short acquisition lock and the group's reset at the earliest offset.
func startSharePort(t *testing.T, topic string, partitions int, group string) (*kfake.Cluster, *proxy.Server, *nodeScanner) {
	t.Helper()
	return startSharePortLock(t, topic, partitions, group, shortShareLock)
}

func startSharePortLock(t *testing.T, topic string, partitions int, group, lockMs string) (*kfake.Cluster, *proxy.Server, *nodeScanner) {
	t.Helper()
	c := startUpstream(t, 3, kfake.SeedTopics(int32(partitions), topic), kfake.BrokerConfigs(map[string]string{
		"group.share.record.lock.duration.ms": lockMs,
		"share.record.lock.sweep.interval.ms": "100",
	}))
	spreadLeaders(t, c, topic, partitions, 3)
	c.SetGroupConfigs(group, map[string]string{"share.auto.offset.reset": "earliest"})
	srv := startGateway(t, c, func(o *proxy.Options) {
		o.Listeners[0].SinglePort = &proxy.SinglePortOptions{VirtualNode: testVirtual}
	})
	return c, srv, &nodeScanner{virtual: testVirtual, addr: srv.Addr(0).String()}
}

// shareTally counts what share consumers delivered, per record value.
type shareTally struct {
	mu        sync.Mutex
	delivered map[string]int
	maxCount  map[string]int32 // the highest DeliveryCount seen
	ackErrs   []error
	noFlush   bool // leave acknowledgements to ride on the next ShareFetch
	// pollBeforeAck calls consume's onPoll before a poll's records are
	// acknowledged (else after).
	pollBeforeAck bool
}

func newShareTally() *shareTally {
	return &shareTally{delivered: map[string]int{}, maxCount: map[string]int32{}}
}

func (st *shareTally) distinct() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.delivered)
}

// consume polls cl until stop, accepting every record it gets.
func (st *shareTally) consume(ctx context.Context, t *testing.T, cl *kgo.Client, onPoll func()) {
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollRecords(pctx, 20)
		cancel()
		fs.EachError(func(tp string, p int32, err error) {
			if ctx.Err() == nil && err != context.DeadlineExceeded {
				t.Logf("share fetch %s[%d]: %v", tp, p, err)
			}
		})
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			st.mu.Lock()
			st.delivered[string(r.Value)]++
			st.maxCount[string(r.Value)] = max(st.maxCount[string(r.Value)], r.DeliveryCount())
			st.mu.Unlock()
			recs = append(recs, r)
		})
		n := len(recs)
		if n > 0 && st.pollBeforeAck && onPoll != nil {
			onPoll()
		}
		for _, r := range recs {
			r.Ack(kgo.AckAccept)
		}
		if n > 0 {
			if !st.noFlush {
				if err := cl.FlushAcks(ctx); err != nil && ctx.Err() == nil {
					t.Logf("flush acks: %v", err)
				}
			}
			if onPoll != nil && !st.pollBeforeAck {
				onPoll()
			}
		}
	}
}

func (st *shareTally) ackCallback(_ *kgo.Client, rs kgo.ShareAckResults) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, r := range rs {
		if r.Err != nil {
			st.ackErrs = append(st.ackErrs, fmt.Errorf("%s[%d]: %w", r.Topic, r.Partition, r.Err))
		}
	}
}

func newShareConsumer(t *testing.T, srv *proxy.Server, scan *nodeScanner, topic, group string, st *shareTally) *kgo.Client {
	return newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.ConsumeTopics(topic), kgo.ShareGroup(group),
		kgo.FetchMaxWait(300*time.Millisecond), kgo.ShareAckCallback(st.ackCallback))
}

func produceValues(ctx context.Context, t *testing.T, srv *proxy.Server, topic string, n int) {
	t.Helper()
	prod := newClient(t, srv, nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// waitShareAcked polls kadm DescribeShareGroupOffsets (key 90, split per
// coordinator by the gateway) until every partition's share start offset
// is its end: every record was acknowledged upstream.
func waitShareAcked(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, parts, perPart int) {
	t.Helper()
	for {
		offs, err := adm.DescribeShareGroupOffsets(ctx, group)
		done := err == nil
		if err == nil {
			d := offs[group]
			if d.Err != nil {
				t.Fatalf("describe share group offsets: %v", d.Err)
			}
			for p := range int32(parts) {
				o, ok := d.Offsets.Lookup(topic, p)
				done = done && ok && o.Err == nil && o.StartOffset == int64(perPart)
			}
			if done {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not every record was acknowledged: %v %+v", err, offs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestSinglePortShareGroup: two kgo share consumers in one share group
// (KIP-932: ShareGroupHeartbeat, ShareFetch with piggybacked
// acknowledgements, ShareAcknowledge) through the one port consume every
// record of six partitions led by three brokers exactly once; every
// record is acknowledged upstream; ShareFetch reached all three brokers;
// no answer names a real node. kadm's share-group admin calls (describe,
// describe/alter/delete offsets) work through the gateway.
func TestSinglePortShareGroup(t *testing.T) {
	const topic, group, parts, n = "sh", "sh-group", 6, 120
	c, srv, scan := startSharePortLock(t, topic, parts, group, defaultShareLock)
	ctx := ctxT(t, 90*time.Second)
	nodes := countNodes(c, kmsg.ShareFetch)
	produceValues(ctx, t, srv, topic, n)

	st := newShareTally()
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	consumers := []*kgo.Client{newShareConsumer(t, srv, scan, topic, group, st), newShareConsumer(t, srv, scan, topic, group, st)}
	for _, cl := range consumers {
		wg.Add(1)
		go func() { defer wg.Done(); st.consume(cctx, t, cl, nil) }()
	}
	adm := kadm.NewClient(newClient(t, srv, nil, kgo.Dialer(scan.dial)))
	for st.distinct() < n && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond) // polling for a condition, not a timing threshold
	}
	waitShareAcked(ctx, t, adm, group, topic, parts, n/parts)

	described, err := adm.DescribeShareGroups(ctx, group)
	if err != nil {
		t.Fatalf("describe share groups: %v", err)
	}
	if g := described[group]; g.Err != nil || len(g.Members) != 2 || g.Coordinator.NodeID != testVirtual {
		t.Errorf("described %+v, want 2 members and the virtual coordinator", g)
	}
	stop()
	wg.Wait()
	for _, cl := range consumers {
		cl.Close()
	}

	st.mu.Lock()
	for i := range n {
		v := fmt.Sprint(i)
		if st.delivered[v] != 1 || st.maxCount[v] != 1 {
			t.Errorf("record %s delivered %d times (delivery count %d), want once", v, st.delivered[v], st.maxCount[v])
		}
	}
	for _, err := range st.ackErrs {
		t.Errorf("acknowledgement failed: %v", err)
	}
	st.mu.Unlock()
	nodes.assertAll(t, 3)

	shareOffsetsAdmin(ctx, t, adm, group, topic)
	scan.assertClean(t)
}

// shareOffsetsAdmin: with the group empty, kadm AlterShareGroupOffsets
// and DeleteShareGroupOffsets (keys 91, 92, to the group's coordinator)
// take effect.
func shareOffsetsAdmin(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string) {
	t.Helper()
	var alter kadm.Offsets
	alter.AddOffset(topic, 0, 3, -1)
	for {
		resp, err := adm.AlterShareGroupOffsets(ctx, group, alter)
		if err == nil && resp.Error() == nil {
			break
		}
		if ctx.Err() != nil { // the members' leave may take a heartbeat
			t.Fatalf("alter share group offsets: %v %v", err, resp.Error())
		}
		time.Sleep(50 * time.Millisecond)
	}
	offs, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs[group].Offsets.Lookup(topic, 0); !ok || o.StartOffset != 3 {
		t.Errorf("after alter, partition 0 start offset %+v, want 3", o)
	}
	del, err := adm.DeleteShareGroupOffsets(ctx, group, topic)
	if err != nil || del.Error() != nil {
		t.Fatalf("delete share group offsets: %v %v", err, del.Error())
	}
}

// TestSinglePortShareLeaderMove: a share consumer keeps consuming while
// every partition's leader moves to the next broker after each poll that
// got records. The gateway forgets each moved partition on its old
// broker's share session and adds it on the new one; every record is
// still delivered, and all of them end up acknowledged upstream (a
// record whose acknowledgement raced a move may be delivered again after
// its acquisition lock; none is lost).
func TestSinglePortShareLeaderMove(t *testing.T) {
	const topic, group, parts, n = "shmv", "shmv-group", 6, 120
	c, srv, scan := startSharePort(t, topic, parts, group)
	ctx := ctxT(t, 90*time.Second)
	nodes := countNodes(c, kmsg.ShareFetch)
	produceValues(ctx, t, srv, topic, n)

	st := newShareTally()
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var moves int
	move := func() {
		moves++
		for p := range int32(parts) {
			if err := c.MoveTopicPartition(topic, p, (p+int32(moves))%3); err != nil {
				t.Errorf("move: %v", err)
			}
		}
	}
	cl := newShareConsumer(t, srv, scan, topic, group, st)
	wg.Add(1)
	go func() { defer wg.Done(); st.consume(cctx, t, cl, move) }()
	adm := kadm.NewClient(newClient(t, srv, nil, kgo.Dialer(scan.dial)))
	for st.distinct() < n && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	waitShareAcked(ctx, t, adm, group, topic, parts, n/parts)
	stop()
	wg.Wait()
	if moves < 2 {
		t.Errorf("only %d leader moves happened during consumption", moves)
	}
	st.mu.Lock()
	redelivered := 0
	for i := range n {
		v := fmt.Sprint(i)
		if st.delivered[v] == 0 {
			t.Errorf("record %s never delivered", v)
		}
		if st.delivered[v] > 1 {
			redelivered++
		}
	}
	ackErrs := st.ackErrs
	st.mu.Unlock()
	t.Logf("%d leader moves; %d of %d records delivered more than once; %d acknowledgements failed (first: %v)", moves, redelivered, n, len(ackErrs), firstErr(ackErrs))
	nodes.assertAll(t, 3)
	scan.assertClean(t)
}

func firstErr(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// TestSinglePortShareSessionError: one broker answers an incremental
// ShareFetch with INVALID_SHARE_SESSION_EPOCH (kfake fault injection).
// The error reaches the client as the top-level error, the gateway drops
// its session, and the client's new session (epoch 0) reopens one on
// every broker; every record is still delivered and acknowledged.
func TestSinglePortShareSessionError(t *testing.T) {
	const topic, group, parts, n = "sherr", "sherr-group", 6, 60
	c, srv, scan := startSharePort(t, topic, parts, group)
	ctx := ctxT(t, 90*time.Second)
	var mu sync.Mutex
	opens := map[int32]int{} // epoch-0 ShareFetches per broker
	c.ControlKey(int16(kmsg.ShareFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if req.(*kmsg.ShareFetchRequest).ShareSessionEpoch == 0 {
			opens[c.CurrentNode()]++
		}
		return nil, nil, false
	})
	fired := false
	c.ControlKey(int16(kmsg.ShareFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.ShareFetchRequest)
		if c.CurrentNode() != 1 || r.ShareSessionEpoch <= 0 {
			return nil, nil, false // not handled: the control stays (no KeepControl, which would keep it for good)
		}
		mu.Lock()
		fired = true
		mu.Unlock()
		resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
		resp.ErrorCode = kerr.InvalidShareSessionEpoch.Code
		return resp, nil, true // once: the control is dropped
	})
	st := newShareTally()
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	cl := newShareConsumer(t, srv, scan, topic, group, st)
	wg.Add(1)
	go func() { defer wg.Done(); st.consume(cctx, t, cl, nil) }()
	// The records are produced after the fault, so the rebuilt sessions
	// are the ones that must deliver them.
	for ctx.Err() == nil {
		mu.Lock()
		f := fired
		mu.Unlock()
		if f {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	produceValues(ctx, t, srv, topic, n)
	adm := kadm.NewClient(newClient(t, srv, nil, kgo.Dialer(scan.dial)))
	for st.distinct() < n && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	waitShareAcked(ctx, t, adm, group, topic, parts, n/parts)
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if !fired {
		t.Fatal("the fault never fired")
	}
	for node := range int32(3) {
		if opens[node] < 2 {
			t.Errorf("broker %d saw %d new share sessions, want the first and the rebuild (%v)", node, opens[node], opens)
		}
	}
	scan.assertClean(t)
}

// TestSinglePortShareErrorReleases: broker 1 fails one incremental
// ShareFetch (INVALID_SHARE_SESSION_EPOCH, kfake fault injection) while
// brokers 0 and 2 acquire records in the same round. The client gets the
// error and no records; the gateway closes the upstream sessions, which
// releases what they acquired, so every record is delivered and
// acknowledged long before the acquisition lock (120 s here) would have
// let the dropped ones go (the test's whole budget is 60 s).
func TestSinglePortShareErrorReleases(t *testing.T) {
	const topic, group, parts, n = "shrel", "shrel-group", 6, 60
	// A 120 s lock and a 60 s budget: every record back within the
	// budget proves the release, with headroom on a loaded machine.
	c, srv, scan := startSharePortLock(t, topic, parts, group, "120000")
	ctx := ctxT(t, 60*time.Second)
	produceValues(ctx, t, srv, topic, n) // before consuming: every round finds records on every broker
	var mu sync.Mutex
	fired := false
	c.ControlKey(int16(kmsg.ShareFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.ShareFetchRequest)
		if c.CurrentNode() != 1 || r.ShareSessionEpoch < 3 {
			return nil, nil, false // not handled: the control stays
		}
		mu.Lock()
		fired = true
		mu.Unlock()
		resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
		resp.ErrorCode = kerr.InvalidShareSessionEpoch.Code
		return resp, nil, true // once: the control is dropped
	})
	st := newShareTally()
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.ConsumeTopics(topic), kgo.ShareGroup(group),
		kgo.FetchMaxWait(300*time.Millisecond), kgo.ShareAckCallback(st.ackCallback), kgo.ShareMaxRecords(2))
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); st.consume(cctx, t, cl, nil) }()
	adm := kadm.NewClient(newClient(t, srv, nil, kgo.Dialer(scan.dial)))
	for st.distinct() < n && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	waitShareAcked(ctx, t, adm, group, topic, parts, n/parts)
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if !fired {
		t.Fatal("the fault never fired")
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	again := 0
	for _, c := range st.maxCount {
		if c > 1 {
			again++
		}
	}
	if again == 0 {
		t.Error("no record came back with a second delivery: nothing the failed round acquired was released")
	}
	scan.assertClean(t)
}

// rawShare sends hand-made share requests for one member, as a
// misbehaving client would.
type rawShare struct {
	ctx           context.Context
	b             *kgo.Broker
	group, member string
	topic         [16]byte
}

// fetch is a ShareFetch at epoch for partitions 0-2, each acknowledging
// offset 0 when ack.
func (rs *rawShare) fetch(t *testing.T, epoch int32, ack bool) *kmsg.ShareFetchResponse {
	t.Helper()
	r := kmsg.NewPtrShareFetchRequest()
	r.GroupID, r.MemberID, r.ShareSessionEpoch, r.MaxWaitMillis, r.MaxBytes, r.MaxRecords, r.BatchSize = &rs.group, &rs.member, epoch, 10, 1<<20, 10, 10
	tp := kmsg.NewShareFetchRequestTopic()
	tp.TopicID = rs.topic
	for p := range int32(3) {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = p
		if ack {
			ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = 0, 0, []int8{1}
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
		}
		tp.Partitions = append(tp.Partitions, rp)
	}
	r.Topics = append(r.Topics, tp)
	resp, err := r.RequestWith(rs.ctx, rs.b)
	if err != nil {
		t.Fatalf("share fetch epoch %d: %v", epoch, err)
	}
	return resp
}

// ack is a ShareAcknowledge at epoch accepting offset 0 of partition 0
// (never acquired: its leader answers for it).
func (rs *rawShare) ack(t *testing.T, epoch int32) *kmsg.ShareAcknowledgeResponse {
	t.Helper()
	r := kmsg.NewPtrShareAcknowledgeRequest()
	r.GroupID, r.MemberID, r.ShareSessionEpoch = &rs.group, &rs.member, epoch
	tp := kmsg.NewShareAcknowledgeRequestTopic()
	tp.TopicID = rs.topic
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = 0, 0, []int8{1}
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	tp.Partitions = append(tp.Partitions, rp)
	r.Topics = append(r.Topics, tp)
	resp, err := r.RequestWith(rs.ctx, rs.b)
	if err != nil {
		t.Fatalf("share acknowledge epoch %d: %v", epoch, err)
	}
	return resp
}

// TestSinglePortShareHostile: share requests a broker would refuse are
// refused by the gateway the same way, on a connection that stays
// usable: an incremental or closing epoch with no session, acknowledgements
// on a new session, a ShareAcknowledge at epoch 0, a wrong epoch.
func TestSinglePortShareHostile(t *testing.T) {
	const topic, group = "shh", "shh-group"
	c, srv, scan := startSharePort(t, topic, 3, group)
	ctx := ctxT(t, 30*time.Second)
	acks := countNodes(c, kmsg.ShareAcknowledge)
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	raw := &rawShare{ctx: ctx, b: cl.Broker(testVirtual), group: group, member: "member-1", topic: md.Topics[topic].ID}
	fetch := func(epoch int32, ack bool) *kmsg.ShareFetchResponse { return raw.fetch(t, epoch, ack) }
	ackReq := func(epoch int32) *kmsg.ShareAcknowledgeResponse { return raw.ack(t, epoch) }
	var rightAck *kmsg.ShareAcknowledgeResponse
	for _, c := range []struct {
		name string
		got  int16
		want *kerr.Error
	}{
		{"incremental without a session", fetch(3, false).ErrorCode, kerr.ShareSessionNotFound},
		{"close without a session", fetch(-1, false).ErrorCode, kerr.ShareSessionNotFound},
		{"acknowledgements on a new session", fetch(0, true).ErrorCode, kerr.InvalidRequest},
		{"acknowledge at epoch 0", ackReq(0).ErrorCode, kerr.InvalidShareSessionEpoch},
		{"a new session", fetch(0, false).ErrorCode, nil},
		{"a wrong epoch", fetch(7, false).ErrorCode, kerr.InvalidShareSessionEpoch},
		{"the right epoch", fetch(1, false).ErrorCode, nil},
		{"acknowledge at the right epoch", func() int16 { rightAck = ackReq(2); return rightAck.ErrorCode }(), nil},
		{"close", fetch(-1, false).ErrorCode, nil},
		{"after the close", fetch(4, false).ErrorCode, kerr.ShareSessionNotFound},
	} {
		if got := kerr.ErrorForCode(c.got); got != c.want && !(c.want == nil && got == nil) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// The acknowledgement at the right epoch reached partition 0's
	// leader, which answered for it (the records were never acquired).
	if len(rightAck.Topics) != 1 || len(rightAck.Topics[0].Partitions) != 1 || rightAck.Topics[0].Partitions[0].ErrorCode == kerr.NotLeaderForPartition.Code {
		t.Errorf("acknowledge at the right epoch answered %+v, want partition 0 answered by its leader", rightAck.Topics)
	}
	acks.mu.Lock()
	reached := len(acks.seen[int16(kmsg.ShareAcknowledge)])
	acks.mu.Unlock()
	if reached != 1 {
		t.Errorf("ShareAcknowledge reached %d brokers, want partition 0's leader", reached)
	}
	scan.assertClean(t)
}

// TestSinglePortShareRefusedCounted: a share request a broker refuses
// for what it asked (an empty member id: INVALID_REQUEST) reaches the
// client as the broker's error, is counted as a request with
// outcome="error" and as a share_request_refused event (not as a lost
// session), and is logged at INFO, not WARN.
func TestSinglePortShareRefusedCounted(t *testing.T) {
	const topic = "shref"
	reg := prometheus.NewRegistry()
	lb := &logBuffer{}
	_, srv, _ := startSinglePort(t, topic, 3, withLog(lb), func(o *proxy.Options) { o.Hooks = metrics.New(reg) })
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, srv, nil)
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	g, empty := "shref-group", ""
	r := kmsg.NewPtrShareFetchRequest()
	r.GroupID, r.MemberID, r.MaxWaitMillis, r.MaxBytes, r.MaxRecords, r.BatchSize = &g, &empty, 1, 1<<20, 10, 10
	tp := kmsg.NewShareFetchRequestTopic()
	tp.TopicID = md.Topics[topic].ID
	for p := range int32(3) {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = p
		tp.Partitions = append(tp.Partitions, rp)
	}
	r.Topics = append(r.Topics, tp)
	resp, err := r.RequestWith(ctx, cl.Broker(testVirtual))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("an empty member id: %v, want INVALID_REQUEST", kerr.ErrorForCode(resp.ErrorCode))
	}
	waitFor(t, ctx, "the request accounted", func() bool {
		return counterValue(t, reg, "tollgate_requests_total", map[string]string{"api": "ShareFetch", "outcome": "error"}) == 1
	})
	if got := counterValue(t, reg, "tollgate_single_port_events_total", map[string]string{"event": "share_request_refused"}); got != 1 {
		t.Errorf("share_request_refused counted %v, want 1", got)
	}
	if got := counterValue(t, reg, "tollgate_single_port_events_total", map[string]string{"event": "share_session_reset"}); got != 0 {
		t.Errorf("share_session_reset counted %v, want 0", got)
	}
	for _, line := range strings.Split(lb.String(), "\n") {
		if strings.Contains(line, "single_port_share_request_refused") && !strings.Contains(line, "level=INFO") {
			t.Errorf("logged as %q, want INFO", line)
		}
	}
	if !strings.Contains(lb.String(), "single_port_share_request_refused") {
		t.Error("the refusal was not logged")
	}
}

// TestSinglePortShareBrokerRemoved: a broker leaves the cluster (kfake
// RemoveNode) during share consumption. Its part of the next ShareFetch
// fails, the client's session is reset, and the rebuilt one spans the
// two brokers left: every record is delivered and acknowledged.
func TestSinglePortShareBrokerRemoved(t *testing.T) {
	const topic, group, parts, n = "shrm", "shrm-group", 6, 60
	c, srv, scan := startSharePort(t, topic, parts, group)
	ctx := ctxT(t, 90*time.Second)
	produceValues(ctx, t, srv, topic, n)
	st := newShareTally()
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	removed := false
	remove := func() {
		if !removed {
			removed = true
			if err := c.RemoveNode(2); err != nil {
				t.Errorf("remove node 2: %v", err)
			}
		}
	}
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.ConsumeTopics(topic), kgo.ShareGroup(group),
		kgo.FetchMaxWait(300*time.Millisecond), kgo.ShareAckCallback(st.ackCallback), kgo.ShareMaxRecords(5))
	wg.Add(1)
	go func() { defer wg.Done(); st.consume(cctx, t, cl, remove) }()
	var dials atomic.Int32 // the admin client's connections to the gateway
	adm := kadm.NewClient(newClient(t, srv, nil, kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return scan.dial(ctx, network, addr)
	})))
	for st.distinct() < n && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	waitShareAcked(ctx, t, adm, group, topic, parts, n/parts)
	stop()
	wg.Wait()
	if !removed {
		t.Fatal("the broker was never removed")
	}
	// DescribeShareGroupOffsets to a coordinator that left is answered
	// COORDINATOR_NOT_AVAILABLE and looked up again, not a closed
	// connection (kgo keeps one connection per kind of request).
	if d := dials.Load(); d > 3 {
		t.Errorf("the admin client connected %d times: the gateway closed its connections", d)
	}
	scan.assertClean(t)
}

// TestSinglePortShareOffered: the single-port ApiVersions answer offers
// the share-group keys single-port serves, and never the inter-broker
// share-state keys.
func TestSinglePortShareOffered(t *testing.T) {
	_, srv, _ := startSharePort(t, "sho", 3, "sho-group")
	ctx := ctxT(t, 30*time.Second)
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, newClient(t, srv, nil))
	if err != nil {
		t.Fatal(err)
	}
	offered := map[int16]bool{}
	for _, k := range resp.ApiKeys {
		offered[k.ApiKey] = true
	}
	for _, k := range []kmsg.Key{kmsg.ShareGroupHeartbeat, kmsg.ShareGroupDescribe, kmsg.ShareFetch, kmsg.ShareAcknowledge,
		kmsg.DescribeShareGroupOffsets, kmsg.AlterShareGroupOffsets, kmsg.DeleteShareGroupOffsets} {
		if !offered[int16(k)] {
			t.Errorf("%s not offered", kmsg.NameForKey(int16(k)))
		}
	}
	for _, k := range []kmsg.Key{kmsg.ReadShareGroupState, kmsg.WriteShareGroupState} {
		if offered[int16(k)] {
			t.Errorf("inter-broker %s offered", kmsg.NameForKey(int16(k)))
		}
	}
}

// TestSinglePortShareAckFollowsOpen: both partitions lead on broker 0,
// so the member's only upstream session is there. Partition 1 then
// moves to broker 1 while its records wait to be acknowledged: the next
// ShareFetch opens a session on broker 1 (epoch 0, which takes no
// acknowledgements) and the gateway sends the acknowledgements right
// after it in a ShareAcknowledge on the same connection. Every record is
// delivered once and acknowledged, with no acknowledgement error.
func TestSinglePortShareAckFollowsOpen(t *testing.T) {
	// Whether acknowledgements are due at broker 1 when its session opens
	// depends on kgo's fetch and poll timing: under load (three copies at
	// once) 3 runs in 36 sent no ShareAcknowledge there, the same on the
	// code before fetch-ahead. Such a run is tried again; a gateway that
	// never sends the follow-up fails all three.
	for attempt := 1; ; attempt++ {
		if shareAckFollowsOpen(t) {
			return
		}
		if attempt == 3 {
			t.Fatal("in 3 runs, no ShareAcknowledge reached broker 1: the gateway never sent the follow-up")
		}
		t.Logf("run %d: no ShareAcknowledge reached broker 1; again", attempt)
	}
}

// shareAckFollowsOpen is one run of TestSinglePortShareAckFollowsOpen;
// it reports whether a ShareAcknowledge reached broker 1.
func shareAckFollowsOpen(t *testing.T) bool {
	const topic, group, parts, n = "shf", "shf-group", 2, 40
	c, srv, scan, sink := startShareOnOneBroker(t, topic, parts, group)
	ctx := ctxT(t, 60*time.Second)
	acksAt := countNodes(c, kmsg.ShareAcknowledge)
	produceValues(ctx, t, srv, topic, n)
	st := newShareTally()
	st.noFlush = true // acknowledgements ride on the next ShareFetch
	// The move happens before the first records are acknowledged, so
	// their acknowledgements (partition 1's now due at broker 1, which
	// holds no session yet) cannot ride on a ShareFetch kgo sent before
	// the move; acknowledged first, they sometimes all reached broker 0.
	st.pollBeforeAck = true
	cl := newShareConsumer(t, srv, scan, topic, group, st)
	adm := kadm.NewClient(newClient(t, srv, nil, kgo.Dialer(scan.dial)))
	moved := false
	move := func() { // after the first poll: partition 1 to broker 1
		if moved {
			return
		}
		moved = true
		if err := c.MoveTopicPartition(topic, 1, 1); err != nil {
			t.Error(err)
		}
		if _, err := adm.Metadata(ctx, topic); err != nil { // the gateway's view learns the move
			t.Error(err)
		}
	}
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); st.consume(cctx, t, cl, move) }()
	for st.distinct() < n && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	waitShareAcked(ctx, t, adm, group, topic, parts, n/parts)
	stop()
	wg.Wait()
	st.assertOnce(t, n)
	assertShareFetchAudit(t, sink)
	scan.assertClean(t)
	acksAt.mu.Lock()
	defer acksAt.mu.Unlock()
	return acksAt.seen[int16(kmsg.ShareAcknowledge)][1] > 0 // the client sends none itself here: the gateway's follow-up
}

// startShareOnOneBroker is a single-port gateway, with a full audit
// trail, over a 3-broker kfake whose partitions of topic all lead on
// broker 0 (Kafka's default acquisition lock: each record is delivered
// once).
func startShareOnOneBroker(t *testing.T, topic string, parts int32, group string) (*kfake.Cluster, *proxy.Server, *nodeScanner, *syncBuffer) {
	t.Helper()
	c := startUpstream(t, 3, kfake.SeedTopics(parts, topic), kfake.BrokerConfigs(map[string]string{
		"group.share.record.lock.duration.ms": defaultShareLock,
		"share.record.lock.sweep.interval.ms": "100",
	}))
	for p := range parts {
		if err := c.MoveTopicPartition(topic, p, 0); err != nil {
			t.Fatal(err)
		}
	}
	c.SetGroupConfigs(group, map[string]string{"share.auto.offset.reset": "earliest"})
	sink := &syncBuffer{}
	trail, err := audit.New(configs.Audit{Level: "full", Mode: "best-effort", Queue: 10000}, nil, audit.WithSink(sink))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trail.Close() }) // after the gateway's cleanup (LIFO)
	srv := startGateway(t, c, func(o *proxy.Options) {
		o.Listeners[0].SinglePort = &proxy.SinglePortOptions{VirtualNode: testVirtual}
		o.Audit = trail
	})
	return c, srv, &nodeScanner{virtual: testVirtual, addr: srv.Addr(0).String()}, sink
}

// assertOnce: every one of n records was delivered exactly once, and no
// acknowledgement failed.
func (st *shareTally) assertOnce(t *testing.T, n int) {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := range n {
		if v := fmt.Sprint(i); st.delivered[v] != 1 {
			t.Errorf("record %s delivered %d times", v, st.delivered[v])
		}
	}
	for _, err := range st.ackErrs {
		t.Errorf("acknowledgement failed: %v", err)
	}
}

// assertShareFetchAudit: the ShareFetch audit records name real upstream
// brokers only (a follow-up is recorded as its broker), and one reached
// brokers 0 and 1.
func assertShareFetchAudit(t *testing.T, sink *syncBuffer) {
	t.Helper()
	both := false
	for _, r := range sink.records(t) {
		if r.API != "ShareFetch" {
			continue
		}
		for _, n := range r.UpstreamNodes {
			if n < 0 || n > 2 {
				t.Errorf("ShareFetch audit record names upstream node %d", n)
			}
		}
		both = both || slices.Equal(r.UpstreamNodes, []int32{0, 1})
	}
	if !both {
		t.Error("no ShareFetch audit record names brokers 0 and 1")
	}
}

// TestSinglePortShareRecordLimit: a kgo share consumer in strict
// record-limit mode (KIP-1206, ShareMaxRecordsStrict: at most
// ShareMaxRecords per fetch) through the one port never gets more than
// its limit in one poll, though three brokers lead its partitions: with
// a limit of 5 the brokers share it, with a limit of 1 they take turns.
func TestSinglePortShareRecordLimit(t *testing.T) {
	for _, tc := range []struct{ limit, n int }{{5, 60}, {1, 18}} {
		t.Run(fmt.Sprintf("limit %d", tc.limit), func(t *testing.T) {
			shareRecordLimit(t, tc.limit, tc.n)
		})
	}
}

func shareRecordLimit(t *testing.T, limit, n int) {
	const parts = 6
	topic, group := fmt.Sprintf("shl%d", limit), fmt.Sprintf("shl%d-group", limit)
	c, srv, scan := startSharePort(t, topic, parts, group)
	ctx := ctxT(t, 60*time.Second)
	nodes := countNodes(c, kmsg.ShareFetch)
	produceValues(ctx, t, srv, topic, n)
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.ConsumeTopics(topic), kgo.ShareGroup(group),
		kgo.FetchMaxWait(300*time.Millisecond), kgo.ShareMaxRecords(int32(limit)), kgo.ShareMaxRecordsStrict())
	seen := map[string]int{}
	over := 0
	for len(seen) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if got := fs.NumRecords(); got > limit {
			over++
			if over <= 3 {
				t.Errorf("one poll returned %d records, over the strict limit %d", got, limit)
			}
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	if len(seen) < n {
		t.Fatalf("consumed %d of %d (%d polls over the limit)", len(seen), n, over)
	}
	nodes.assertAll(t, 3)
	scan.assertClean(t)
}

// TestSinglePortShareMalformed: a ShareFetch and a ShareAcknowledge
// whose bodies do not decode (truncated, a group id overrunning the
// frame) close that connection with no reply and a log line; the
// gateway keeps serving share consumers.
func TestSinglePortShareMalformed(t *testing.T) {
	const topic, group = "shm", "shm-group"
	lb := &logBuffer{}
	c := startUpstream(t, 3, kfake.SeedTopics(3, topic))
	spreadLeaders(t, c, topic, 3, 3)
	c.SetGroupConfigs(group, map[string]string{"share.auto.offset.reset": "earliest"})
	srv := startGateway(t, c, withLog(lb), func(o *proxy.Options) {
		o.Listeners[0].SinglePort = &proxy.SinglePortOptions{VirtualNode: testVirtual}
	})
	// size, key, version 1, correlation id 7, client id "x", empty header tags, then the body
	frame := func(key int16, body string) []byte {
		h := binary.BigEndian.AppendUint16(nil, uint16(key))
		h = append(h, 0, 1, 0, 0, 0, 7, 0, 1, 'x', 0)
		h = append(h, body...)
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(h))), h...)
	}
	for _, tc := range []struct {
		name, want string
		in         []byte
	}{
		{"ShareFetch truncated", "decode ShareFetch v1 request", frame(int16(kmsg.ShareFetch), "\x02g")},
		{"ShareFetch group id overruns the frame", "decode ShareFetch v1 request", frame(int16(kmsg.ShareFetch), "\x7fgroup")},
		{"ShareAcknowledge truncated", "decode ShareAcknowledge v1 request", frame(int16(kmsg.ShareAcknowledge), "\x02g\x02m\x00\x00")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := strings.Count(lb.String(), tc.want)
			conn, err := net.Dial("tcp", srv.Addr(0).String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write(tc.in)
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := io.Copy(io.Discard, conn); (err != nil && !errors.Is(err, syscall.ECONNRESET)) || n != 0 {
				t.Fatalf("want the gateway to close with no reply, got %d bytes, err %v", n, err)
			}
			ctx := ctxT(t, 5*time.Second)
			waitFor(t, ctx, "the close logged as "+tc.want, func() bool {
				return strings.Count(lb.String(), tc.want) > before && strings.Contains(lb.String(), "reason=malformed_request")
			})
		})
	}
	scan := &nodeScanner{virtual: testVirtual, addr: srv.Addr(0).String()}
	ctx := ctxT(t, 30*time.Second)
	produceValues(ctx, t, srv, topic, 9)
	st := newShareTally()
	cl := newShareConsumer(t, srv, scan, topic, group, st)
	for st.distinct() < 9 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { st.delivered[string(r.Value)]++ })
	}
	if st.distinct() < 9 {
		t.Fatalf("after bad input, a share consumer got %d of 9 records", st.distinct())
	}
}
