package broker

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// setGroupConfigs sets GROUP configs with IncrementalAlterConfigs.
func setGroupConfigs(t *testing.T, cl *kgo.Client, group string, kvs ...string) {
	t.Helper()
	setGroupConfigsB(t, cl, group, kvs...)
}

func setGroupConfigsB(t testing.TB, cl *kgo.Client, group string, kvs ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kvs); i += 2 {
		cf := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cf.Name, cf.Value = kvs[i], kmsg.StringPtr(kvs[i+1])
		res.Configs = append(res.Configs, cf)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("set group configs %v: %v", kvs, err)
	}
}

// produceKeys produces records keyed 0..n-1 to partition 0 of topic.
func produceKeys(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprint("v", i))})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// shareConsumer is a kgo share-group consumer of topic.
func shareConsumer(t *testing.T, addr, group, topic string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ShareGroup(group)}, opts...)...)
}

// shareStart describes the group's SPSO and lag on partition 0 of topic.
func shareStart(t *testing.T, cl *kgo.Client, group, topic string) (start, lag int64) {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	rg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: topic, Partitions: []int32{0}}}
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	g := resp.Groups[0]
	if g.ErrorCode == kerr.GroupIDNotFound.Code {
		return -1, -1 // no member has joined yet
	}
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		t.Fatalf("describe share offsets: %v", err)
	}
	p := g.Topics[0].Partitions[0]
	return p.StartOffset, p.Lag
}

// TestShareTwoConsumersSplitAPartition: two members of one share group on a
// one-partition topic both read it; what one holds the other never gets,
// and together they read every record once.
func TestShareTwoConsumersSplitAPartition(t *testing.T) {
	_, srv := newBroker(t)
	createTopic(t, srv.addr(), "q", 1, nil)
	admin := newClient(t, srv.addr())
	setGroupConfigs(t, admin, "sg", "share.auto.offset.reset", "earliest")
	const n = 400
	produceKeys(t, admin, "q", n)

	a := shareConsumer(t, srv.addr(), "sg", "q", kgo.ShareMaxRecords(50), kgo.ShareMaxRecordsStrict())
	b := shareConsumer(t, srv.addr(), "sg", "q", kgo.ShareMaxRecords(50), kgo.ShareMaxRecordsStrict())
	ctx := testCtx(t)
	held := map[string]bool{}
	for _, r := range a.PollRecords(ctx, 50).Records() {
		held[string(r.Key)] = true
	}
	if len(held) == 0 {
		t.Fatal("first consumer got nothing")
	}
	seen := map[string]int{}
	for k := range held {
		seen[k]++
	}
	// a holds its records (not yet acknowledged): b gets others.
	gotB := 0
	for gotB == 0 {
		fs := b.PollRecords(ctx, 50)
		if ctx.Err() != nil {
			t.Fatal("second consumer got nothing")
		}
		for _, r := range fs.Records() {
			if held[string(r.Key)] {
				t.Fatalf("record %s delivered to both consumers while held", r.Key)
			}
			seen[string(r.Key)]++
			gotB++
		}
	}
	for len(seen) < n {
		for _, cl := range []*kgo.Client{a, b} {
			pctx, cancel := context.WithTimeout(ctx, 200e6)
			for _, r := range cl.PollRecords(pctx, 50).Records() {
				seen[string(r.Key)]++
			}
			cancel()
		}
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d keys", len(seen), n)
		}
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("key %s delivered %d times", k, c)
		}
	}
	a.MarkAcks(kgo.AckAccept)
	b.MarkAcks(kgo.AckAccept)
	if err := a.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	if start, lag := shareStart(t, admin, "sg", "q"); start != n || lag != 0 {
		t.Fatalf("after every record was accepted: start %d lag %d, want %d and 0", start, lag, n)
	}
}

// shareFetchRaw opens a share session for member and acquires what it can
// of partition 0 of topic, never acknowledging (a consumer that dies
// holding records, its connection left open).
func shareFetchRaw(t *testing.T, cl *kgo.Client, group, member, topic string, id [16]byte) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = group, member, []string{topic}
	hresp, err := hb.RequestWith(testCtx(t), cl)
	if err != nil || hresp.ErrorCode != 0 {
		t.Fatalf("share heartbeat: %v %v", err, kerr.ErrorForCode(hresp.ErrorCode))
	}
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(group), kmsg.StringPtr(member)
	req.MaxRecords, req.MaxWaitMillis = 500, 0
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = id
	rt.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("share fetch: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	var out []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.AcquiredRecords...)
		}
	}
	return out
}

// TestShareLockExpiryRedelivers: a member acquires every record and goes
// silent with its connection open; once the acquisition lock expires the
// records go to another member, with delivery count 2. The short lock
// applies to the silent member only: once its locks have expired the
// group's lock is set back to 30 s, so a slow machine cannot expire the
// live member's locks too.
func TestShareLockExpiryRedelivers(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "locks", 1, nil)
	admin := newClient(t, srv.addr())
	setGroupConfigs(t, admin, "lg", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "1000")
	const n = 20
	produceKeys(t, admin, "locks", n)

	dead := newClient(t, srv.addr())
	got := shareFetchRaw(t, dead, "lg", "dead-member-0000000000000000000001", "locks", b.lookup("locks").id)
	if acquiredRanges(got).count() != n {
		t.Fatalf("silent member acquired %v, want all %d records", got, n)
	}
	ctx := testCtx(t)
	for b.ShareCounters().LockExpired < n { // poll: the sweep runs every 100 ms
		if ctx.Err() != nil {
			t.Fatalf("lock expiries counted %d, want %d", b.ShareCounters().LockExpired, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	setGroupConfigs(t, admin, "lg", "share.record.lock.duration.ms", "30000")
	live := shareConsumer(t, srv.addr(), "lg", "locks")
	first := map[string]int32{} // delivery count of each key's first delivery to live
	for len(first) < n {
		for _, r := range live.PollRecords(ctx, 0).Records() {
			if _, ok := first[string(r.Key)]; !ok {
				first[string(r.Key)] = r.DeliveryCount()
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("got %d of %d records after the lock expired", len(first), n)
		}
	}
	for i := range n {
		if dc, ok := first[strconv.Itoa(i)]; !ok || dc != 2 {
			t.Errorf("key %d: first delivery count %d (delivered %v), want 2", i, dc, ok)
		}
	}
	if len(first) != n {
		t.Errorf("delivered keys %v, want exactly 0..%d", first, n-1)
	}
	if st := b.ShareStats(); len(st) != 1 || st[0].Group != "lg" || st[0].Topic != "locks" {
		t.Errorf("share stats %+v", st)
	}
}

// TestShareRejectAndDeliveryLimit: rejected records are never delivered
// again; records released every time are delivered up to the group's
// delivery count limit, then archived; the start offset then passes all.
func TestShareRejectAndDeliveryLimit(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "lim", 1, nil)
	admin := newClient(t, srv.addr())
	setGroupConfigs(t, admin, "rg", "share.auto.offset.reset", "earliest", "share.delivery.count.limit", "3")
	const n = 30
	produceKeys(t, admin, "lim", n)
	cl := shareConsumer(t, srv.addr(), "rg", "lim")
	ctx := testCtx(t)
	deliveries := map[int][]int32{}
	for {
		if start, _ := shareStart(t, admin, "rg", "lim"); start == n {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, 300e6)
		rs := cl.PollRecords(pctx, 0).Records()
		cancel()
		for _, r := range rs {
			k, _ := strconv.Atoi(string(r.Key))
			deliveries[k] = append(deliveries[k], r.DeliveryCount())
			if k%2 == 0 {
				r.Ack(kgo.AckReject)
			} else {
				r.Ack(kgo.AckRelease)
			}
		}
		if err := cl.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatalf("start offset never reached %d; deliveries %v", n, deliveries)
		}
	}
	for k := range n {
		want := []int32{1}
		if k%2 == 1 {
			want = []int32{1, 2, 3}
		}
		if fmt.Sprint(deliveries[k]) != fmt.Sprint(want) {
			t.Errorf("key %d delivered with counts %v, want %v", k, deliveries[k], want)
		}
	}
	if c := b.ShareCounters(); c.Archived != n/2 {
		t.Errorf("archived at the delivery limit: %d, want %d", c.Archived, n/2)
	}
	if st := b.ShareStats(); len(st) != 1 || st[0].StartOffset != n || st[0].Lag != 0 || st[0].Acquired != 0 {
		t.Errorf("share stats after everything was rejected or archived: %+v", st)
	}
}

// TestShareStateSurvivesRestart: acknowledged records are not delivered
// again after a restart; records acquired but not acknowledged are, with
// their delivery count kept.
func TestShareStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	srv := startServer(t, b)
	createTopic(t, srv.addr(), "dur", 1, nil)
	admin := newClient(t, srv.addr())
	setGroupConfigs(t, admin, "dg", "share.auto.offset.reset", "earliest")
	const n = 100
	produceKeys(t, admin, "dur", n)
	cl := shareConsumer(t, srv.addr(), "dg", "dur", kgo.ShareMaxRecords(30), kgo.ShareMaxRecordsStrict())
	ctx := testCtx(t)
	accepted := map[string]bool{}
	for len(accepted) < 30 {
		rs := cl.PollRecords(ctx, 30-len(accepted)).Records()
		for _, r := range rs {
			accepted[string(r.Key)] = true
			r.Ack(kgo.AckAccept)
		}
		if err := cl.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatal("timeout")
		}
	}
	// Acquire more, never acknowledge, then restart the broker.
	raw := newClient(t, srv.addr())
	held := shareFetchRaw(t, raw, "dg", "holder-00000000000000000000000000001", "dur", b.lookup("dur").id)
	if len(held) == 0 {
		t.Fatal("holder acquired nothing")
	}
	cl.Close()
	raw.Close()
	srv.close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := openBroker(t, dir)
	srv2 := startServer(t, b2)
	cl2 := shareConsumer(t, srv2.addr(), "dg", "dur")
	seen := map[string]int32{}
	for len(seen)+len(accepted) < n {
		for _, r := range cl2.PollRecords(ctx, 0).Records() {
			if accepted[string(r.Key)] {
				t.Fatalf("accepted record %s delivered again after restart", r.Key)
			}
			seen[string(r.Key)] = r.DeliveryCount()
		}
		if ctx.Err() != nil {
			t.Fatalf("after restart read %d, want %d", len(seen), n-len(accepted))
		}
	}
	for _, ar := range held {
		for o := ar.FirstOffset; o <= ar.LastOffset; o++ {
			if dc := seen[strconv.Itoa(int(o))]; dc != int32(ar.DeliveryCount)+1 {
				t.Errorf("offset %d held before the restart: delivery count %d after, want %d", o, dc, ar.DeliveryCount+1)
			}
		}
	}
}

// TestShareTopicRecreated: a topic deleted and created again under the
// same name is read from its own start, not from the old topic's state.
func TestShareTopicRecreated(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "re", 1, nil)
	admin := newClient(t, srv.addr())
	setGroupConfigs(t, admin, "reg", "share.auto.offset.reset", "earliest")
	produceKeys(t, admin, "re", 10)
	c := b.NewConn("test")
	defer c.Close()
	const member = "member-0000000000000000000000000001"
	r := shareConnFetch(t, c, "reg", member, 0, b.lookup("re").id, nil)
	if acquiredRanges(r.Topics[0].Partitions[0].AcquiredRecords).count() != 10 {
		t.Fatalf("first topic: %+v", r.Topics)
	}
	r = shareConnFetch(t, c, "reg", member, 1, b.lookup("re").id, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ackBatchOf(0, 9, 1)})
	if code := r.Topics[0].Partitions[0].AcknowledgeErrorCode; code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if err := b.deleteTopic(b.lookup("re")); err != nil {
		t.Fatal(err)
	}
	createTopic(t, srv.addr(), "re", 1, nil)
	produceKeys(t, newClient(t, srv.addr()), "re", 3) // a client without the old topic id cached
	r = shareConnFetch(t, c, "reg", member, 0, b.lookup("re").id, nil)
	got := r.Topics[0].Partitions[0].AcquiredRecords
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 2 || got[0].DeliveryCount != 1 {
		t.Fatalf("recreated topic: acquired %+v, want offsets 0-2 at delivery 1", got)
	}
}
