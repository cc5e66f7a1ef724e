package proxy_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// upFetch is one Fetch the gateway sent an upstream broker.
type upFetch struct {
	node, id, epoch int32
	parts, forgot   int
	keys            []string // topic-or-id/partition of the listed partitions
	forgotKeys      []string
}

// fetchTap records every Fetch reaching kfake (the gateway's upstream
// requests) and can answer one with a session error (evict).
type fetchTap struct {
	c     *kfake.Cluster
	mu    sync.Mutex
	seen  []upFetch
	evict int32 // node whose next incremental Fetch gets FETCH_SESSION_ID_NOT_FOUND (-1: none)
	fired []upFetch
}

func tapFetch(c *kfake.Cluster) *fetchTap {
	ft := &fetchTap{c: c, evict: -1}
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.FetchRequest)
		f := upFetch{node: c.CurrentNode(), id: r.SessionID, epoch: r.SessionEpoch}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				f.parts++
				f.keys = append(f.keys, fmt.Sprintf("%s%x/%d", t.Topic, t.TopicID[:2], p.Partition))
			}
		}
		for _, t := range r.ForgottenTopics {
			for _, p := range t.Partitions {
				f.forgot++
				f.forgotKeys = append(f.forgotKeys, fmt.Sprintf("%s%x/%d", t.Topic, t.TopicID[:2], p))
			}
		}
		ft.mu.Lock()
		defer ft.mu.Unlock()
		ft.seen = append(ft.seen, f)
		if ft.evict == f.node && f.epoch > 0 {
			ft.evict = -1
			ft.fired = append(ft.fired, f)
			resp := r.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
			return resp, nil, true
		}
		return nil, nil, false
	})
	return ft
}

func (ft *fetchTap) snapshot() []upFetch {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return append([]upFetch(nil), ft.seen...)
}

// idleIncremental counts, per node, incremental Fetches (epoch > 0)
// that list no partition: what a session saves over a full fetch.
func (ft *fetchTap) idleIncremental(from int) map[int32]int {
	out := map[int32]int{}
	for _, f := range ft.snapshot()[from:] {
		if f.epoch > 0 && f.parts == 0 && f.forgot == 0 {
			out[f.node]++
		}
	}
	return out
}

// waitFor polls cond until it holds or ctx ends.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// clientFetches is a kgo dialer recording the Fetch requests the client
// sends the gateway and what their answers say.
type clientFetches struct {
	mu   sync.Mutex
	reqs []kmsg.FetchRequest // topics dropped
	resp []clientFetchAnswer
}

type clientFetchAnswer struct {
	err, parts int
	id         int32
}

type clientFetchConn struct {
	net.Conn
	cf         *clientFetches
	mu         sync.Mutex
	wbuf, rbuf bytes.Buffer
	inflight   map[int32]int16 // corr → Fetch version
}

func (cf *clientFetches) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &clientFetchConn{Conn: c, cf: cf, inflight: map[int32]int16{}}, nil
}

func (c *clientFetchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.wbuf.Write(p)
	for c.wbuf.Len() >= 4 {
		b := c.wbuf.Bytes()
		n := int(binary.BigEndian.Uint32(b))
		if len(b) < 4+n {
			break
		}
		frame := b[4 : 4+n]
		if key, ver := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:])); key == int16(kmsg.Fetch) {
			corr := int32(binary.BigEndian.Uint32(frame[4:]))
			c.inflight[corr] = ver
			body := frame[8:]
			idLen := int(int16(binary.BigEndian.Uint16(body)))
			body = body[2+max(idLen, 0):]
			if ver >= 12 {
				body = body[1:] // empty header tags
			}
			r := kmsg.NewFetchRequest()
			r.Version = ver
			if err := r.ReadFrom(body); err == nil {
				r.Topics, r.ForgottenTopics = nil, nil
				c.cf.mu.Lock()
				c.cf.reqs = append(c.cf.reqs, r)
				c.cf.mu.Unlock()
			}
		}
		c.wbuf.Next(4 + n)
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *clientFetchConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.rbuf.Write(p[:n])
	for c.rbuf.Len() >= 8 {
		b := c.rbuf.Bytes()
		size := int(binary.BigEndian.Uint32(b))
		if len(b) < 4+size {
			break
		}
		corr := int32(binary.BigEndian.Uint32(b[4:]))
		if ver, ok := c.inflight[corr]; ok {
			delete(c.inflight, corr)
			body := b[8 : 4+size]
			if ver >= 12 {
				body = body[1:]
			}
			r := kmsg.NewFetchResponse()
			r.Version = ver
			if r.ReadFrom(body) == nil {
				a := clientFetchAnswer{err: int(r.ErrorCode), id: r.SessionID}
				for _, t := range r.Topics {
					a.parts += len(t.Partitions)
				}
				c.cf.mu.Lock()
				c.cf.resp = append(c.cf.resp, a)
				c.cf.mu.Unlock()
			}
		}
		c.rbuf.Next(4 + size)
	}
	c.mu.Unlock()
	return n, err
}

// assertOneSession: the client opened one session (one epoch-0 fetch)
// and kept it (never told of a session error).
func (cf *clientFetches) assertOneSession(t *testing.T) {
	t.Helper()
	cf.mu.Lock()
	defer cf.mu.Unlock()
	full, incr := 0, 0
	for _, r := range cf.reqs {
		switch {
		case r.SessionEpoch == 0:
			full++
		case r.SessionEpoch > 0:
			incr++
		}
	}
	if full != 1 || incr == 0 {
		t.Errorf("client sent %d full and %d incremental fetches, want 1 full and then incremental ones", full, incr)
	}
	for i, a := range cf.resp {
		if a.err != 0 {
			t.Errorf("client fetch answer %d: error %v", i, kerr.ErrorForCode(int16(a.err)))
		}
	}
}

func produceSeq(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// consumeUntil polls cl until want distinct records are in got.
func consumeUntil(t *testing.T, ctx context.Context, cl *kgo.Client, got map[string]int, want int) {
	t.Helper()
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(got), want)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)]++ })
	}
}

// TestSinglePortFetchSessionIncremental: a kgo consumer (fetch sessions
// by default) reads every record through the one port; once it has, the
// gateway's upstream Fetches are incremental and list no partition, the
// client's session is incremental too and its idle answers list none,
// and records produced later still arrive.
func TestSinglePortFetchSessionIncremental(t *testing.T) {
	const topic, parts = "fsi", 6
	c, srv, scan := startSinglePort(t, topic, parts)
	tap := tapFetch(c)
	ctx := ctxT(t, 60*time.Second)
	prod := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceSeq(t, ctx, prod, topic, 0, 60)
	cf := &clientFetches{}
	cons := newClient(t, srv, nil, kgo.Dialer(cf.dial), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	got := map[string]int{}
	consumeUntil(t, ctx, cons, got, 60)
	mark := len(tap.snapshot())
	waitUntil(t, ctx, "idle incremental upstream fetches on every broker", func() bool {
		m := tap.idleIncremental(mark)
		return m[0] >= 2 && m[1] >= 2 && m[2] >= 2
	})
	produceSeq(t, ctx, prod, topic, 60, 30)
	consumeUntil(t, ctx, cons, got, 90)
	for i := range 90 {
		if got[fmt.Sprint(i)] != 1 {
			t.Errorf("record %d read %d times", i, got[fmt.Sprint(i)])
		}
	}
	// Every upstream Fetch after a broker's first is incremental and
	// lists at most that broker's two partitions.
	first := map[int32]bool{}
	for _, f := range tap.snapshot() {
		if !first[f.node] {
			first[f.node] = true
			if f.epoch != 0 || f.parts != 2 {
				t.Errorf("node %d: first fetch epoch %d with %d partitions, want a full one (epoch 0) with 2", f.node, f.epoch, f.parts)
			}
			continue
		}
		if f.epoch <= 0 || f.parts > 2 {
			t.Errorf("node %d: fetch epoch %d session %d with %d partitions, want incremental", f.node, f.epoch, f.id, f.parts)
		}
	}
	cons.Close()
	cf.assertOneSession(t)
	cf.mu.Lock()
	idle := 0
	for _, a := range cf.resp {
		if a.id != 0 && a.parts == 0 {
			idle++
		}
	}
	cf.mu.Unlock()
	if idle == 0 {
		t.Error("no answer of the client's session was an empty incremental one")
	}
	scan.assertClean(t)
}

// TestSinglePortFetchSessionEvicted: a broker answers the gateway's
// incremental Fetch FETCH_SESSION_ID_NOT_FOUND (its session was
// evicted); the gateway's next Fetch there is a full one closing the old
// id, the client never sees the error (its own session carries on), and
// every record arrives once.
func TestSinglePortFetchSessionEvicted(t *testing.T) {
	const topic, parts = "fse", 6
	c, srv, scan := startSinglePort(t, topic, parts)
	tap := tapFetch(c)
	ctx := ctxT(t, 60*time.Second)
	prod := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceSeq(t, ctx, prod, topic, 0, 30)
	cf := &clientFetches{}
	cons := newClient(t, srv, nil, kgo.Dialer(cf.dial), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	got := map[string]int{}
	consumeUntil(t, ctx, cons, got, 30)
	tap.mu.Lock()
	tap.evict = 1
	tap.mu.Unlock()
	waitUntil(t, ctx, "the eviction to be answered", func() bool {
		tap.mu.Lock()
		defer tap.mu.Unlock()
		return len(tap.fired) == 1
	})
	tap.mu.Lock()
	evicted := tap.fired[0]
	from := len(tap.seen)
	tap.mu.Unlock()
	produceSeq(t, ctx, prod, topic, 30, 30)
	consumeUntil(t, ctx, cons, got, 60)
	waitUntil(t, ctx, "node 1 to be incremental again", func() bool {
		reopened := false
		for _, f := range tap.snapshot()[from:] {
			if f.node != 1 {
				continue
			}
			if !reopened {
				if f.epoch != 0 || f.id != evicted.id || f.parts != 2 {
					t.Fatalf("node 1 after the eviction: epoch %d session %d with %d partitions, want a full fetch closing session %d", f.epoch, f.id, f.parts, evicted.id)
				}
				reopened = true
				continue
			}
			if f.epoch > 0 {
				return true
			}
		}
		return false
	})
	for i := range 60 {
		if got[fmt.Sprint(i)] != 1 {
			t.Errorf("record %d read %d times", i, got[fmt.Sprint(i)])
		}
	}
	cons.Close()
	cf.assertOneSession(t)
}

// TestSinglePortFetchSessionLeaderMove: partitions move between brokers
// while a session consumer reads; each move forgets the partition in the
// old leader's upstream session and adds it to the new one's (kgo
// opens a new session on the NOT_LEADER_OR_FOLLOWER, which reopens the
// upstream ones), the session carries on incrementally on the new
// leaders, and every record arrives.
func TestSinglePortFetchSessionLeaderMove(t *testing.T) {
	const topic, parts = "fsm", 3
	c, srv, scan := startSinglePort(t, topic, parts)
	tap := tapFetch(c)
	ctx := ctxT(t, 15*time.Second)
	prod := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	cons := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	got := map[string]int{}
	produceSeq(t, ctx, prod, topic, 0, 30)
	consumeUntil(t, ctx, cons, got, 30)
	for round := 1; round <= 3; round++ {
		mark := len(tap.snapshot())
		for p := range int32(parts) {
			if err := c.MoveTopicPartition(topic, p, (p+int32(round))%3); err != nil {
				t.Fatal(err)
			}
		}
		produceSeq(t, ctx, prod, topic, 30*round, 30)
		consumeUntil(t, ctx, cons, got, 30*(round+1))
		// kgo answers the NOT_LEADER_OR_FOLLOWER of a moved partition by
		// opening a new session (epoch 0), which the gateway passes on
		// as full upstream fetches closing the old sessions; the session
		// then carries on incrementally on the new leaders.
		waitUntil(t, ctx, fmt.Sprintf("round %d: incremental upstream fetches on the new leaders", round), func() bool {
			m := tap.idleIncremental(mark)
			return m[0] > 0 && m[1] > 0 && m[2] > 0
		})
	}
	// At least once: kgo re-reads from an earlier offset after some
	// moves over kfake, with or without the gateway's sessions (the
	// same test with sessions off reads records twice too).
	for i := range 120 {
		if got[fmt.Sprint(i)] == 0 {
			t.Errorf("record %d not read", i)
		}
	}
	scan.assertClean(t)
}

func containsSuffix(keys []string, suffix string) bool {
	for _, k := range keys {
		if len(k) >= len(suffix) && k[len(k)-len(suffix):] == suffix {
			return true
		}
	}
	return false
}

// topicID asks for topic's metadata through cl and returns the request
// (to ask again) and the topic's id.
func topicID(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) (*kmsg.MetadataRequest, [16]byte) {
	t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata: %v", err)
	}
	return md, mresp.Topics[0].TopicID
}

// sessionFetch is a Fetch of session sid at epoch listing offsets
// (partition → fetch offset) of topic's partitions, 1 MiB each, waiting
// at most maxWait ms for one byte.
func sessionFetch(topic string, id [16]byte, parts int, maxWait, sid, epoch int32, offsets map[int32]int64) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.MaxWaitMillis, r.MinBytes, r.MaxBytes = maxWait, 1, 1<<20
	r.SessionID, r.SessionEpoch = sid, epoch
	if len(offsets) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		for p := range int32(parts) {
			if off, ok := offsets[p]; ok {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// TestSinglePortFetchSessionRules: hand-made Fetches get Kafka's session
// answers from the gateway (FetchManager.newContext): a full fetch opens
// a session and lists every partition, an incremental one lists only
// what changed, a wrong epoch or an unknown id is an error, epoch -1
// closes the session (and the upstream ones), and a sessionless fetch
// lists every partition with session id 0.
func TestSinglePortFetchSessionRules(t *testing.T) {
	const topic, parts = "fsr", 3
	c, srv, scan := startSinglePort(t, topic, parts)
	tap := tapFetch(c)
	ctx := ctxT(t, 30*time.Second)
	prod := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceSeq(t, ctx, prod, topic, 0, 3)
	raw := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	md, id := topicID(t, ctx, raw, topic)
	fetch := func(sid, epoch int32, offsets map[int32]int64, forget ...int32) *kmsg.FetchResponse {
		t.Helper()
		r := sessionFetch(topic, id, parts, 10, sid, epoch, offsets)
		if len(forget) > 0 {
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID, ft.Partitions = topic, id, forget
			r.ForgottenTopics = append(r.ForgottenTopics, ft)
		}
		// One broker object, so one connection: a session belongs to the
		// connection that opened it.
		kr, err := raw.Broker(testVirtual).Request(ctx, r)
		if err != nil {
			t.Fatalf("fetch session %d epoch %d: %v", sid, epoch, err)
		}
		resp := kr.(*kmsg.FetchResponse)
		if err != nil {
			t.Fatalf("fetch session %d epoch %d: %v", sid, epoch, err)
		}
		return resp
	}
	count := func(r *kmsg.FetchResponse) (n, records int) {
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				n++
				if len(p.RecordBatches) > 0 {
					records++
				}
			}
		}
		return n, records
	}
	all := map[int32]int64{0: 0, 1: 0, 2: 0}
	full := fetch(0, 0, all)
	if n, rec := count(full); full.ErrorCode != 0 || full.SessionID == 0 || n != 3 || rec != 3 {
		t.Fatalf("full fetch: error %d session %d, %d partitions (%d with records), want a session and 3 with records", full.ErrorCode, full.SessionID, n, rec)
	}
	sid := full.SessionID
	// Move on past the records of partition 0 only: the other two are
	// asked for again at 0 and answer records, in one answer or over two
	// (the gateway answers once a part in carries records and holds the
	// other broker's for the next fetch, route_fetch_hold.go); partition
	// 0 has nothing new and is never listed.
	epoch := int32(1)
	next := map[int32]int64{0: 1}
	got := map[int32]bool{}
	for len(got) < 2 && epoch <= 2 {
		r := fetch(sid, epoch, next)
		epoch++
		if r.ErrorCode != 0 || r.SessionID != sid {
			t.Fatalf("incremental: error %d session %d", r.ErrorCode, r.SessionID)
		}
		next = map[int32]int64{}
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				if p.Partition == 0 || len(p.RecordBatches) == 0 || got[p.Partition] {
					t.Errorf("incremental fetch listed partition %d (%d record bytes), want only partitions 1 and 2 with their records, once", p.Partition, len(p.RecordBatches))
				}
				got[p.Partition] = true
				next[p.Partition] = 1
			}
		}
	}
	if len(got) != 2 {
		t.Fatalf("incremental fetches listed partitions %v, want 1 and 2", got)
	}
	if r := fetch(sid, epoch, next); r.ErrorCode != 0 {
		t.Fatalf("incremental with nothing new: error %d; upstream %+v", r.ErrorCode, tap.snapshot())
	} else if n, _ := count(r); n != 0 {
		t.Errorf("incremental fetch with nothing new listed %d partitions, want 0", n)
	}
	epoch++
	// Partition 1 moves to node 0; a Metadata answer through the gateway
	// teaches it the new leader before the next fetch, which forgets the
	// partition in node 1's session (its only one: closed) and adds it
	// to node 0's, both incrementally.
	if err := c.MoveTopicPartition(topic, 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := md.RequestWith(ctx, raw); err != nil {
		t.Fatal(err)
	}
	mark := len(tap.snapshot())
	if r := fetch(sid, epoch, nil); r.ErrorCode != 0 {
		t.Fatalf("fetch after the move: error %d", r.ErrorCode)
	}
	moved := false
	for _, f := range tap.snapshot()[mark:] {
		switch f.node {
		case 0:
			moved = f.epoch > 0 && f.parts == 1 && containsSuffix(f.keys, "/1")
		case 1:
			if f.epoch != -1 || f.id == 0 {
				t.Errorf("node 1 after the move: epoch %d session %d, want its session closed", f.epoch, f.id)
			}
		}
	}
	if !moved {
		t.Errorf("partition 1 was not added to node 0's session incrementally: %+v", tap.snapshot()[mark:])
	}
	if r := fetch(sid, epoch, nil); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || r.SessionID != 0 {
		t.Errorf("a repeated epoch: error %d session %d, want INVALID_FETCH_SESSION_EPOCH", r.ErrorCode, r.SessionID)
	}
	epoch++
	if r := fetch(sid+1000, epoch, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("an unknown session: error %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}
	// Forget partition 2 (node 2's only one: its upstream session is
	// closed): later answers never list it.
	produceSeq(t, ctx, prod, topic, 3, 3)
	mark = len(tap.snapshot())
	if r := fetch(sid, epoch, nil, 2); r.ErrorCode != 0 {
		t.Fatalf("forget: error %d", r.ErrorCode)
	} else {
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				if p.Partition == 2 {
					t.Errorf("forgotten partition 2 answered")
				}
			}
		}
	}
	closed := fetch(sid, -1, all)
	if n, _ := count(closed); closed.SessionID != 0 || n != 3 {
		t.Errorf("closing fetch: session %d with %d partitions, want 0 and all 3", closed.SessionID, n)
	}
	closes := 0
	for _, f := range tap.snapshot()[mark:] {
		if f.epoch == -1 && f.id != 0 {
			closes++
		}
	}
	if closes != 2 { // node 2's by the forget, node 0's (both partitions, since the move) by the close
		t.Errorf("%d upstream sessions closed, want 2", closes)
	}
	if r := fetch(sid, epoch+1, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Errorf("the closed session: error %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}
	if r := fetch(0, -1, all); r.SessionID != 0 || r.ErrorCode != 0 {
		t.Errorf("sessionless: error %d session %d", r.ErrorCode, r.SessionID)
	} else if n, _ := count(r); n != 3 {
		t.Errorf("sessionless fetch listed %d partitions, want 3", n)
	}
	scan.assertClean(t)
}

// TestSinglePortFetchSessionDropsUnknownTags: the partitions a client's
// fetch session keeps are re-encoded into later upstream Fetches, after
// the frame they were decoded from went back to its pool; kmsg leaves
// unknown tagged fields aliasing that frame, so the session keeps none
// and no upstream Fetch carries the client's (it carried another
// request's bytes, or unmapped memory, before).
func TestSinglePortFetchSessionDropsUnknownTags(t *testing.T) {
	const topic, parts = "tags", 3
	c, srv, scan := startSinglePort(t, topic, parts)
	var fetches, tagged atomic.Int32
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fetches.Add(1)
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				if rp.UnknownTags.Len() > 0 {
					tagged.Add(1)
				}
			}
		}
		return nil, nil, false
	})
	ctx := ctxT(t, 30*time.Second)
	raw := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	_, id := topicID(t, ctx, raw, topic)
	sid := int32(0)
	for epoch := int32(0); epoch < 3; epoch++ {
		r := sessionFetch(topic, id, parts, 10, sid, epoch, map[int32]int64{0: 0, 1: 0, 2: 0})
		for i := range r.Topics[0].Partitions {
			r.Topics[0].Partitions[i].UnknownTags.Set(99, []byte("client tag"))
		}
		kr, err := raw.Broker(testVirtual).Request(ctx, r)
		if err != nil {
			t.Fatalf("fetch epoch %d: %v", epoch, err)
		}
		resp := kr.(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch epoch %d: %v", epoch, kerr.ErrorForCode(resp.ErrorCode))
		}
		sid = resp.SessionID
	}
	if fetches.Load() == 0 {
		t.Fatal("no upstream Fetch seen")
	}
	if n := tagged.Load(); n != 0 {
		t.Errorf("%d upstream Fetch partitions carried the client's unknown tags", n)
	}
}
