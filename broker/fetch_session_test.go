package broker

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessFixture is a broker with one 3-partition topic and a connection.
type sessFixture struct {
	t  *testing.T
	b  *Broker
	c  *Conn
	tp *topic
}

func newSessFixture(t *testing.T) *sessFixture {
	b := openBroker(t, t.TempDir())
	c := b.NewConn("test")
	t.Cleanup(c.Close)
	s, err := b.checkCreate("sess", 3, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := b.createTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	return &sessFixture{t: t, b: b, c: c, tp: tp}
}

func (f *sessFixture) append(p int32, values ...string) {
	f.t.Helper()
	var vs [][]byte
	for _, v := range values {
		vs = append(vs, []byte(v))
	}
	_, durable, err := f.tp.partitions[p].log.Append(makeBatch(vs...), storageAppend(time.Now()))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := <-durable; err != nil {
		f.t.Fatal(err)
	}
}

// req builds a Fetch for (partition, offset) pairs; v13+ names the topic by id.
func (f *sessFixture) req(v int16, id, epoch int32, parts map[int32]int64, forget ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.SessionID, req.SessionEpoch, req.MaxBytes = v, id, epoch, 1<<20
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "sess", f.tp.id
		keys := make([]int32, 0, len(parts))
		for p := range parts {
			keys = append(keys, p)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		for _, p := range keys {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, parts[p], 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = "sess", f.tp.id, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// do sends req and decodes the answer, checking it against kmsg's encoding.
func (f *sessFixture) do(req *kmsg.FetchRequest) *kmsg.FetchResponse {
	f.t.Helper()
	body, err := call(f.c, req)
	if err != nil {
		f.t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := body.WriteTo(&buf); err != nil {
		f.t.Fatal(err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(buf.Bytes()); err != nil {
		f.t.Fatalf("decode: %v", err)
	}
	if again := resp.AppendTo(nil); !bytes.Equal(again, buf.Bytes()) {
		f.t.Fatalf("body differs from kmsg's encoding")
	}
	return resp
}

// summary is "partition:records:hw" for each partition in the response.
func summary(resp *kmsg.FetchResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			n := 0
			raw := p.RecordBatches
			for len(raw) >= 61 {
				var rb kmsg.RecordBatch
				if rb.ReadFrom(raw) != nil {
					break
				}
				n += int(rb.NumRecords)
				raw = raw[12+rb.Length:]
			}
			s := fmt.Sprintf("%d:%d:%d", p.Partition, n, p.HighWatermark)
			if p.ErrorCode != 0 {
				s += ":" + kerr.ErrorForCode(p.ErrorCode).Error()
			}
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func wantSummary(t *testing.T, step string, resp *kmsg.FetchResponse, want ...string) {
	t.Helper()
	got := summary(resp)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: partitions %v, want %v", step, got, want)
	}
}

// TestFetchSessionLifecycle walks one session through creation,
// incremental fetches, updates, forgotten partitions and closing, for a
// topic-name version (12) and a topic-id version (13+).
func TestFetchSessionLifecycle(t *testing.T) {
	for _, v := range []int16{7, 12, 13, 18} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			f := newSessFixture(t)
			f.append(0, "a", "b")
			f.append(1, "c")

			// Epoch 0 creates a session; the answer is full.
			resp := f.do(f.req(v, 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0}))
			if resp.ErrorCode != 0 || resp.SessionID == 0 {
				t.Fatalf("create: error %d, session id %d", resp.ErrorCode, resp.SessionID)
			}
			id := resp.SessionID
			wantSummary(t, "create", resp, "0:2:2", "1:1:1", "2:0:0")

			// Nothing new and no offsets moved in the request: partitions
			// 0 and 1 are still at offset 0 in the session, so they return
			// their records again; 2 has nothing and is left out.
			resp = f.do(f.req(v, id, 1, nil))
			if resp.ErrorCode != 0 || resp.SessionID != id {
				t.Fatalf("epoch 1: error %d, session id %d", resp.ErrorCode, resp.SessionID)
			}
			wantSummary(t, "epoch 1", resp, "0:2:2", "1:1:1")

			// The client moves its offsets: nothing changed, nothing sent.
			resp = f.do(f.req(v, id, 2, map[int32]int64{0: 2, 1: 1}))
			wantSummary(t, "epoch 2", resp)

			// New data on 2 only: only 2 comes back.
			f.append(2, "d", "e", "f")
			resp = f.do(f.req(v, id, 3, nil))
			wantSummary(t, "epoch 3", resp, "2:3:3")

			// Forget 2, then append to it and to 0: only 0 comes back.
			resp = f.do(f.req(v, id, 4, map[int32]int64{}, 2))
			wantSummary(t, "epoch 4 (forget 2)", resp)
			f.append(2, "g")
			f.append(0, "h")
			resp = f.do(f.req(v, id, 5, nil))
			wantSummary(t, "epoch 5", resp, "0:1:3")

			// Re-add 2 at its end: first sight in this session, so sent.
			resp = f.do(f.req(v, id, 6, map[int32]int64{0: 3, 2: 4}))
			wantSummary(t, "epoch 6 (re-add 2)", resp, "2:0:4")

			// Errors are always sent: an offset past the end.
			resp = f.do(f.req(v, id, 7, map[int32]int64{1: 50}))
			wantSummary(t, "epoch 7", resp, "1:0:-1:"+kerr.OffsetOutOfRange.Error())
			resp = f.do(f.req(v, id, 8, map[int32]int64{1: 1}))
			wantSummary(t, "epoch 8 (error cleared)", resp, "1:0:1")

			// Wrong epochs.
			for _, e := range []int32{8, 10, 1} {
				resp = f.do(f.req(v, id, e, nil))
				if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(resp.Topics) != 0 {
					t.Fatalf("epoch %d (want 9): error %d, %d topics", e, resp.ErrorCode, len(resp.Topics))
				}
			}
			// The failed attempts did not move the epoch.
			resp = f.do(f.req(v, id, 9, nil))
			if resp.ErrorCode != 0 {
				t.Fatalf("epoch 9: %v", kerr.ErrorForCode(resp.ErrorCode))
			}

			// Epoch -1 closes the session; the request is served in full,
			// sessionless.
			resp = f.do(f.req(v, id, -1, map[int32]int64{0: 0}))
			if resp.ErrorCode != 0 || resp.SessionID != 0 {
				t.Fatalf("close: error %d, session id %d", resp.ErrorCode, resp.SessionID)
			}
			wantSummary(t, "close", resp, "0:3:3")
			resp = f.do(f.req(v, id, 10, nil))
			if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
				t.Fatalf("after close: %v", kerr.ErrorForCode(resp.ErrorCode))
			}
			if n := f.b.fetchSessions().len(); n != 0 {
				t.Fatalf("%d sessions cached after close", n)
			}
		})
	}
}

func TestFetchSessionEdgeCases(t *testing.T) {
	f := newSessFixture(t)
	f.append(0, "a")

	// A full request naming a session closes it and opens a new one.
	id1 := f.do(f.req(12, 0, 0, map[int32]int64{0: 0})).SessionID
	resp := f.do(f.req(12, id1, 0, map[int32]int64{0: 1}))
	id2 := resp.SessionID
	if id2 == 0 || id2 == id1 {
		t.Fatalf("re-create: ids %d then %d", id1, id2)
	}
	if resp := f.do(f.req(12, id1, 1, nil)); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("old session still open: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// Switching between topic names and ids mid-session.
	if resp := f.do(f.req(13, id2, 1, nil)); resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("v13 on a v12 session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// Forgetting every partition closes the session: answered sessionless.
	resp = f.do(f.req(12, id2, 1, nil, 0))
	if resp.ErrorCode != 0 || resp.SessionID != 0 || len(resp.Topics) != 0 {
		t.Fatalf("emptied session: error %d, id %d, %d topics", resp.ErrorCode, resp.SessionID, len(resp.Topics))
	}
	if resp := f.do(f.req(12, id2, 2, nil)); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("emptied session still open: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// Id 0 with epoch > 0 names no session.
	if resp := f.do(f.req(12, 0, 3, nil)); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("id 0 epoch 3: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// A full request without partitions creates no session.
	if resp := f.do(f.req(12, 0, 0, nil)); resp.SessionID != 0 {
		t.Fatalf("empty full fetch created session %d", resp.SessionID)
	}

	// v4-6 have no sessions.
	if resp := f.do(f.req(6, 0, 0, map[int32]int64{0: 0})); len(summary(resp)) != 1 {
		t.Fatalf("v6: %v", summary(resp))
	}

	// An incremental long poll wakes on new data in a session partition.
	id := f.do(f.req(12, 0, 0, map[int32]int64{0: 1, 1: 0})).SessionID
	req := f.req(12, id, 1, nil)
	req.MaxWaitMillis, req.MinBytes = 5000, 1
	go func() {
		time.Sleep(50 * time.Millisecond)
		f.append(1, "x", "y")
	}()
	start := time.Now()
	resp = f.do(req)
	if time.Since(start) > 4*time.Second {
		t.Fatalf("long poll did not wake on new data")
	}
	wantSummary(t, "long poll", resp, "1:2:2")
}

func TestFetchSessionCacheEvictsLRU(t *testing.T) {
	c := newFetchSessionCache(3)
	var ids []int32
	for range 3 {
		ids = append(ids, c.add(&fetchSession{}))
	}
	c.get(ids[0]) // 1 is now the least recently used
	id4 := c.add(&fetchSession{})
	if c.get(ids[1]) != nil {
		t.Fatal("least recently used session was not evicted")
	}
	for _, id := range []int32{ids[0], ids[2], id4} {
		if c.get(id) == nil {
			t.Fatalf("session %d evicted", id)
		}
	}
	if c.len() != 3 {
		t.Fatalf("cache holds %d, want 3", c.len())
	}
	seen := map[int32]bool{}
	for _, id := range append(ids, id4) {
		if id <= 0 || seen[id] {
			t.Fatalf("bad or repeated session id %d", id)
		}
		seen[id] = true
	}
	if nextEpoch(math.MaxInt32) != 1 || nextEpoch(1) != 2 {
		t.Fatal("nextEpoch")
	}
}

// TestFetchSessionWithBrokerCacheFull fills the broker's cache: the oldest
// session is evicted, its client gets FETCH_SESSION_ID_NOT_FOUND.
func TestFetchSessionWithBrokerCacheFull(t *testing.T) {
	f := newSessFixture(t)
	first := f.do(f.req(12, 0, 0, map[int32]int64{0: 0})).SessionID
	for range maxFetchSessions {
		if id := f.do(f.req(12, 0, 0, map[int32]int64{0: 0})).SessionID; id == 0 {
			t.Fatal("no session created")
		}
	}
	if n := f.b.fetchSessions().len(); n != maxFetchSessions {
		t.Fatalf("cache holds %d sessions, bound is %d", n, maxFetchSessions)
	}
	if resp := f.do(f.req(12, first, 1, nil)); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("evicted session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestFetchSessionKgo consumes with franz-go, which uses sessions by
// default, while producing: every record arrives once, in order, and the
// broker holds the client's session.
func TestFetchSessionKgo(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "kgo-sess", 6, nil)
	prod := newClient(t, srv.addr(), kgo.DefaultProduceTopic("kgo-sess"))
	const n = 3000
	go func() {
		for i := range n {
			prod.Produce(testCtx(t), &kgo.Record{Key: []byte(fmt.Sprint(i % 17)), Value: []byte(fmt.Sprint(i))}, nil)
			if i%500 == 0 {
				time.Sleep(20 * time.Millisecond) // let incremental fetches see new data arrive
			}
		}
	}()
	recs := consumeN(t, srv.addr(), "kgo-sess", n)
	if len(recs) != n {
		t.Fatalf("consumed %d records, want %d", len(recs), n)
	}
	next := map[int32]int64{}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, next[r.Partition]-1)
		}
		next[r.Partition]++
		if seen[string(r.Value)] {
			t.Fatalf("record %s twice", r.Value)
		}
		seen[string(r.Value)] = true
	}
	if b.fetchSessions().len() == 0 {
		t.Fatal("kgo's consumer has no fetch session on the broker")
	}
}
