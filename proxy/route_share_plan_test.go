package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/lograte"
	"github.com/tollgate-kafka/tollgate/wire"
)

// The share-session planner's rules (route_share.go), step by step over
// one client session: which broker gets which epoch, adds and forgets.
// The peer tests (route_share_test.go) run the same code against kfake.

var shareTopic = [16]byte{1}

func shareReq(epoch int32, parts []int32, acked []int32, forget []int32) *kmsg.ShareFetchRequest {
	r := kmsg.NewPtrShareFetchRequest()
	r.SetVersion(1)
	g, m := "g", "m"
	r.GroupID, r.MemberID, r.ShareSessionEpoch, r.MaxWaitMillis = &g, &m, epoch, 5000
	tp := kmsg.NewShareFetchRequestTopic()
	tp.TopicID = shareTopic
	for _, p := range parts {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = p
		if slices.Contains(acked, p) {
			b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
			b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = 0, 0, []int8{1}
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
		}
		tp.Partitions = append(tp.Partitions, rp)
	}
	if len(parts) > 0 {
		r.Topics = append(r.Topics, tp)
	}
	if len(forget) > 0 {
		ft := kmsg.NewShareFetchRequestForgottenTopicsData()
		ft.TopicID, ft.Partitions = shareTopic, forget
		r.ForgottenTopicsData = append(r.ForgottenTopicsData, ft)
	}
	return r
}

// partSummary is one broker's part: its epoch, listed and forgotten
// partitions, and whether it carries acknowledgements.
type partSummary struct {
	epoch          int32
	listed, forgot []int32
	acks           bool
	wait           int32
}

func summarize(plan sharePlan) map[int32]partSummary {
	out := map[int32]partSummary{}
	for n, req := range plan.parts {
		r := req.(*kmsg.ShareFetchRequest)
		s := partSummary{epoch: r.ShareSessionEpoch, wait: r.MaxWaitMillis}
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				s.listed = append(s.listed, p.Partition)
				s.acks = s.acks || len(p.AcknowledgementBatches) > 0
			}
		}
		for _, ft := range r.ForgottenTopicsData {
			s.forgot = append(s.forgot, ft.Partitions...)
		}
		out[n] = s
	}
	return out
}

func leadersOf(m map[int32]int32) map[sharePart]int32 {
	out := map[sharePart]int32{}
	for p, n := range m {
		out[sharePart{shareTopic, p}] = n
	}
	return out
}

func TestSharePlanSessionLifecycle(t *testing.T) {
	tun := fuzzTunnel()
	st := tun.shares()
	key := shareMemberKey{"g", "m"}
	leaders := leadersOf(map[int32]int32{0: 0, 1: 1, 2: 2, 3: 0})

	// Epoch 0: every leader opens its own session with its partitions.
	got := summarize(st.planShareFetch(key, shareReq(0, []int32{0, 1, 2, 3}, nil, nil), leaders))
	want := map[int32]partSummary{
		0: {epoch: 0, listed: []int32{0, 3}, wait: fetchPartWait},
		1: {epoch: 0, listed: []int32{1}, wait: fetchPartWait},
		2: {epoch: 0, listed: []int32{2}, wait: fetchPartWait},
	}
	checkParts(t, "open", got, want)

	// Epoch 1, nothing changed, acks for partition 1: every broker gets
	// a part at its epoch 1; only broker 1 lists a partition (for its ack).
	got = summarize(st.planShareFetch(key, shareReq(1, []int32{1}, []int32{1}, nil), leaders))
	checkParts(t, "incremental", got, map[int32]partSummary{
		0: {epoch: 1, wait: fetchPartWait},
		1: {epoch: 1, listed: []int32{1}, acks: true, wait: fetchPartWait},
		2: {epoch: 1, wait: fetchPartWait},
	})

	// Partition 3 moves from broker 0 to broker 2: forgotten on 0, added on 2.
	leaders[sharePart{shareTopic, 3}] = 2
	got = summarize(st.planShareFetch(key, shareReq(2, nil, nil, nil), leaders))
	checkParts(t, "leader move", got, map[int32]partSummary{
		0: {epoch: 2, forgot: []int32{3}, wait: fetchPartWait},
		1: {epoch: 2, wait: fetchPartWait},
		2: {epoch: 2, listed: []int32{3}, wait: fetchPartWait},
	})

	// The client forgets partition 0: broker 0 leads nothing now, gets
	// the forget and is not made to wait.
	got = summarize(st.planShareFetch(key, shareReq(3, nil, nil, []int32{0}), leaders))
	checkParts(t, "forget", got, map[int32]partSummary{
		0: {epoch: 3, forgot: []int32{0}, wait: 0},
		1: {epoch: 3, wait: fetchPartWait},
		2: {epoch: 3, wait: fetchPartWait},
	})

	// A wrong epoch is answered by the gateway; nothing is sent.
	if p := st.planShareFetch(key, shareReq(9, nil, nil, nil), leaders); p.errCode != kerr.InvalidShareSessionEpoch.Code || len(p.parts) != 0 {
		t.Errorf("wrong epoch: code %d, %d parts", p.errCode, len(p.parts))
	}

	// Epoch 4: broker 0 holds an empty session now and needs no part.
	got = summarize(st.planShareFetch(key, shareReq(4, nil, nil, nil), leaders))
	checkParts(t, "idle broker", got, map[int32]partSummary{
		1: {epoch: 4, wait: fetchPartWait},
		2: {epoch: 4, wait: fetchPartWait},
	})

	// Epoch -1 closes every broker's session, the idle one too, with
	// the acknowledgements for the partitions each leads.
	got = summarize(st.planShareFetch(key, shareReq(-1, []int32{2}, []int32{2}, nil), leaders))
	checkParts(t, "close", got, map[int32]partSummary{
		0: {epoch: -1, wait: 5000},
		1: {epoch: -1, wait: 5000},
		2: {epoch: -1, listed: []int32{2}, acks: true, wait: 5000},
	})
	if p := st.planShareFetch(key, shareReq(1, nil, nil, nil), leaders); p.errCode != kerr.ShareSessionNotFound.Code {
		t.Errorf("after close: code %d, want SHARE_SESSION_NOT_FOUND", p.errCode)
	}
}

// A broker that gets a new session cannot take acknowledgements on it
// (Kafka refuses them on epoch 0): they follow in a ShareAcknowledge at
// epoch 1 on the same connection, and its answer is each partition's
// AcknowledgeErrorCode.
func TestSharePlanAckOnNewBroker(t *testing.T) {
	tun := fuzzTunnel()
	st := tun.shares()
	key := shareMemberKey{"g", "m"}
	leaders := leadersOf(map[int32]int32{0: 0, 1: 0})
	st.planShareFetch(key, shareReq(0, []int32{0, 1}, nil, nil), leaders)
	leaders[sharePart{shareTopic, 1}] = 1
	req := shareReq(1, []int32{1}, []int32{1}, nil)
	plan := st.planShareFetch(key, req, leaders)
	checkParts(t, "moved", summarize(plan), map[int32]partSummary{
		0: {epoch: 1, forgot: []int32{1}, wait: fetchPartWait},
		1: {epoch: 0, listed: []int32{1}, wait: fetchPartWait},
	})
	f := plan.follow[1]
	if len(plan.unacked) != 0 || f == nil || f.ShareSessionEpoch != 1 || len(f.Topics) != 1 || len(f.Topics[0].Partitions[0].AcknowledgementBatches) != 1 {
		t.Fatalf("unacked %v, follow-up %+v: want partition 1's batch at epoch 1", plan.unacked, f)
	}
	ackResp := kmsg.NewPtrShareAcknowledgeResponse()
	tp := kmsg.NewShareAcknowledgeResponseTopic()
	tp.TopicID = shareTopic
	ap := kmsg.NewShareAcknowledgeResponseTopicPartition()
	ap.Partition, ap.ErrorCode = 1, kerr.InvalidRecordState.Code
	tp.Partitions = append(tp.Partitions, ap)
	ackResp.Topics = append(ackResp.Topics, tp)
	out := tun.mergeShareFetch(req, plan, map[int32]kmsg.Response{
		0: kmsg.NewPtrShareFetchResponse(), 1: kmsg.NewPtrShareFetchResponse(), followKey(1): ackResp,
	})
	if out.ErrorCode != 0 || len(out.Topics) != 1 || out.Topics[0].Partitions[0].AcknowledgeErrorCode != kerr.InvalidRecordState.Code {
		t.Errorf("merged %+v, want partition 1's acknowledgement answered INVALID_RECORD_STATE", out)
	}
	// Broker 1 took epochs 0 and 1: it expects 2 next.
	got := summarize(st.planShareFetch(key, shareReq(2, nil, nil, nil), leaders))
	if got[1].epoch != 2 {
		t.Errorf("broker 1 next epoch %d, want 2", got[1].epoch)
	}
	// A follow-up that never answered fails the answer like any part.
	plan = sharePlan{key: key, parts: map[int32]kmsg.Request{1: req}, follow: map[int32]*kmsg.ShareAcknowledgeRequest{1: f}}
	if out := tun.mergeShareFetch(req, plan, map[int32]kmsg.Response{1: kmsg.NewPtrShareFetchResponse()}); out.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Errorf("missing follow-up: code %d", out.ErrorCode)
	}
}

// An acknowledgement for a partition whose leader leads none of the
// session's partitions (it was forgotten in the same request) has no
// session to go to: answered NOT_LEADER_OR_FOLLOWER.
func TestSharePlanAckNowhere(t *testing.T) {
	tun := fuzzTunnel()
	st := tun.shares()
	key := shareMemberKey{"g", "m"}
	leaders := leadersOf(map[int32]int32{0: 0, 1: 1})
	st.planShareFetch(key, shareReq(0, []int32{0}, nil, nil), leaders)
	plan := st.planShareFetch(key, shareReq(1, []int32{1}, []int32{1}, []int32{1}), leaders)
	if len(plan.unacked) != 1 || plan.unacked[0].partition != 1 {
		t.Fatalf("unacked %v, want partition 1", plan.unacked)
	}
	out := tun.mergeShareFetch(shareReq(1, nil, nil, nil), plan, map[int32]kmsg.Response{0: kmsg.NewPtrShareFetchResponse()})
	if out.ErrorCode != 0 || len(out.Topics) != 1 || out.Topics[0].Partitions[0].AcknowledgeErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("merged %+v", out)
	}
}

// A part failing with a session error reaches the client as a top-level
// error and ends the gateway's session: it no longer counts, only a new
// session (epoch 0) is accepted next, and every upstream session that
// may still hold records is closed (epoch -1 releases them) before the
// next request is routed.
func TestSharePlanSessionErrorResets(t *testing.T) {
	tun := fuzzTunnel()
	st := tun.shares()
	key := shareMemberKey{"g", "m"}
	leaders := leadersOf(map[int32]int32{0: 0, 1: 1, 2: 2})
	st.planShareFetch(key, shareReq(0, []int32{0, 1, 2}, nil, nil), leaders)
	plan := st.planShareFetch(key, shareReq(1, nil, nil, nil), leaders)
	bad := kmsg.NewPtrShareFetchResponse()
	bad.ErrorCode = kerr.InvalidShareSessionEpoch.Code
	gone := kmsg.NewPtrShareFetchResponse()
	gone.ErrorCode = kerr.ShareSessionNotFound.Code
	acquired := kmsg.NewPtrShareFetchResponse()
	tp := kmsg.NewShareFetchResponseTopic()
	tp.TopicID = shareTopic
	p := kmsg.NewShareFetchResponseTopicPartition()
	ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
	ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = 0, 4, 1
	p.AcquiredRecords = append(p.AcquiredRecords, ar)
	tp.Partitions = append(tp.Partitions, p)
	acquired.Topics = append(acquired.Topics, tp)
	out := tun.mergeShareFetch(shareReq(1, nil, nil, nil), plan, map[int32]kmsg.Response{0: acquired, 1: bad, 2: gone})
	if c := out.ErrorCode; (c != kerr.InvalidShareSessionEpoch.Code && c != kerr.ShareSessionNotFound.Code) || len(out.Topics) != 0 {
		t.Fatalf("merged error %d with %d topics, want one part's error and no topics", c, len(out.Topics))
	}
	// Broker 0 acquired records the answer dropped, broker 1's session
	// is still there at another epoch: both are closed. Broker 2 has none.
	var closed []int32
	for _, c := range st.closes {
		if r := c.req.(*kmsg.ShareFetchRequest); r.ShareSessionEpoch != -1 || len(r.Topics) != 0 {
			t.Errorf("close to broker %d: epoch %d, %d topics", c.node, r.ShareSessionEpoch, len(r.Topics))
		}
		closed = append(closed, c.node)
	}
	slices.Sort(closed)
	if !slices.Equal(closed, []int32{0, 1}) {
		t.Errorf("closes queued for %v, want brokers 0 and 1", closed)
	}
	if len(st.sessions) != 0 {
		t.Errorf("%d sessions kept after the error, want none (a dropped session does not count)", len(st.sessions))
	}
	if p := st.planShareFetch(key, shareReq(2, nil, nil, nil), leaders); p.errCode != kerr.ShareSessionNotFound.Code {
		t.Errorf("after the error, epoch 2: code %d, want SHARE_SESSION_NOT_FOUND", p.errCode)
	}
	plan = st.planShareFetch(key, shareReq(0, []int32{0}, nil, nil), leaders)
	checkParts(t, "reopen", summarize(plan), map[int32]partSummary{
		0: {epoch: 0, listed: []int32{0}, wait: 5000}, // the only broker fetching: the client's whole wait
	})
}

func TestSharePlanAcknowledge(t *testing.T) {
	tun := fuzzTunnel()
	st := tun.shares()
	key := shareMemberKey{"g", "m"}
	leaders := leadersOf(map[int32]int32{0: 0, 1: 1, 2: 2})
	st.planShareFetch(key, shareReq(0, []int32{0, 1}, nil, nil), leaders)
	ack := func(epoch int32, parts ...int32) *kmsg.ShareAcknowledgeRequest {
		r := kmsg.NewPtrShareAcknowledgeRequest()
		g, m := "g", "m"
		r.GroupID, r.MemberID, r.ShareSessionEpoch = &g, &m, epoch
		tp := kmsg.NewShareAcknowledgeRequestTopic()
		tp.TopicID = shareTopic
		for _, p := range parts {
			rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
			rp.Partition = p
			tp.Partitions = append(tp.Partitions, rp)
		}
		r.Topics = append(r.Topics, tp)
		return r
	}
	if p := st.planShareAck(key, ack(0, 0), leaders); p.errCode != kerr.InvalidShareSessionEpoch.Code {
		t.Errorf("ack at epoch 0: code %d", p.errCode)
	}
	// Partition 2's leader (broker 2) holds no session: answered by the gateway.
	p := st.planShareAck(key, ack(1, 1, 2), leaders)
	if len(p.parts) != 1 || p.parts[1] == nil || p.parts[1].(*kmsg.ShareAcknowledgeRequest).ShareSessionEpoch != 1 {
		t.Errorf("ack parts %v, want broker 1 at epoch 1", p.parts)
	}
	if len(p.unacked) != 1 || p.unacked[0].partition != 2 {
		t.Errorf("unacked %v", p.unacked)
	}
	// The acknowledge moved the client's epoch and broker 1's, not broker 0's.
	got := summarize(st.planShareFetch(key, shareReq(2, nil, nil, nil), leaders))
	if got[0].epoch != 1 || got[1].epoch != 2 {
		t.Errorf("after an acknowledge: broker epochs %d, %d, want 1, 2", got[0].epoch, got[1].epoch)
	}
	p = st.planShareAck(key, ack(-1, 0), leaders)
	if len(p.parts) != 2 {
		t.Errorf("closing acknowledge reached %d brokers, want both sessions", len(p.parts))
	}
	for n, r := range p.parts {
		if r.(*kmsg.ShareAcknowledgeRequest).ShareSessionEpoch != -1 {
			t.Errorf("broker %d closing epoch %d", n, r.(*kmsg.ShareAcknowledgeRequest).ShareSessionEpoch)
		}
	}
}

func checkParts(t *testing.T, step string, got, want map[int32]partSummary) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: parts for %v, want %v", step, got, want)
		return
	}
	for n, w := range want {
		g, ok := got[n]
		if !ok || g.epoch != w.epoch || !slices.Equal(g.listed, w.listed) || !slices.Equal(g.forgot, w.forgot) || g.acks != w.acks || g.wait != w.wait {
			t.Errorf("%s: broker %d part %+v, want %+v", step, n, g, w)
		}
	}
}

// shareFuzzPlan is a plan with parts on brokers 0 and 1, and one
// acknowledgement the gateway answers itself.
func shareFuzzPlan(req kmsg.Request) sharePlan {
	return sharePlan{key: shareMemberKey{"g", "m"}, parts: map[int32]kmsg.Request{0: req, 1: req}, closing: map[int32]bool{},
		unacked: []sharePart{{shareTopic, 9}}}
}

func shareFuzzSeeds(f *testing.F, good []byte) {
	f.Add(good, []byte{})
	f.Add([]byte{0, 0, 0, 0}, good)
	f.Add(good, good)
}

// FuzzSinglePortMergeShareFetch: two upstream ShareFetch answers (bytes
// after the correlation id) for parts of one client ShareFetch. A
// malformed answer is a decode error, never a panic; decoded ones merge
// into an answer that names only the virtual node (KIP-951 CurrentLeader
// and NodeEndpoints, at the gateway's address) and encodes.
func FuzzSinglePortMergeShareFetch(f *testing.F) {
	good := kmsg.NewPtrShareFetchResponse()
	good.SetVersion(1)
	tp := kmsg.NewShareFetchResponseTopic()
	tp.TopicID = shareTopic
	p := kmsg.NewShareFetchResponseTopicPartition()
	p.Partition, p.ErrorCode, p.CurrentLeader.LeaderID = 1, kerr.NotLeaderForPartition.Code, 2
	tp.Partitions = append(tp.Partitions, p)
	good.Topics = append(good.Topics, tp)
	ne := kmsg.NewShareFetchResponseNodeEndpoint()
	ne.NodeID, ne.Host, ne.Port = 2, "broker-2", 9094
	good.NodeEndpoints = append(good.NodeEndpoints, ne, ne)
	shareFuzzSeeds(f, append([]byte{0}, good.AppendTo(nil)...)) // the flexible header's empty tag buffer first
	f.Fuzz(func(t *testing.T, a, b []byte) {
		req := shareReq(1, []int32{1}, nil, nil)
		parts := map[int32]kmsg.Response{}
		for i, body := range [][]byte{a, b} {
			resp, err := decodePartResponse(req, body)
			if err != nil {
				return
			}
			parts[int32(i)] = resp
		}
		// b doubles as broker 1's follow-up acknowledge answer when it
		// decodes as one (else that follow-up is missing).
		plan := shareFuzzPlan(req)
		follow := followAcks(req, 1, []sharePart{{shareTopic, 1}}, fetchAcks{})
		plan.follow = map[int32]*kmsg.ShareAcknowledgeRequest{1: follow}
		if resp, err := decodePartResponse(follow, b); err == nil {
			parts[followKey(1)] = resp
		}
		tun := fuzzTunnel()
		out := tun.mergeShareFetch(req, plan, parts)
		named := false
		for _, tp := range out.Topics {
			for _, p := range tp.Partitions {
				if id := p.CurrentLeader.LeaderID; id >= 0 && id != tun.virtual {
					t.Fatalf("partition %d names leader %d", p.Partition, id)
				}
				named = named || p.CurrentLeader.LeaderID >= 0
			}
		}
		var eps []shareEndpoint
		for _, e := range out.NodeEndpoints {
			eps = append(eps, shareEndpoint{e.NodeID, e.Host, e.Port})
		}
		checkShareEndpoints(t, tun, named, eps)
		if out.ErrorCode != 0 && len(out.Topics) != 0 {
			t.Fatalf("a top-level error %d with %d topics", out.ErrorCode, len(out.Topics))
		}
		enc := out.AppendTo(nil)
		dec := kmsg.NewPtrShareFetchResponse()
		dec.SetVersion(out.Version)
		if err := dec.ReadFrom(enc); err != nil {
			t.Fatalf("the merged answer does not decode: %v", err)
		}
	})
}

type shareEndpoint struct {
	node int32
	host string
	port int32
}

// checkShareEndpoints: a merged share answer that names a leader carries
// exactly the virtual node's endpoint at the gateway's address; one that
// names none carries no endpoint.
func checkShareEndpoints(t *testing.T, tun *tunnel, named bool, eps []shareEndpoint) {
	t.Helper()
	switch {
	case !named && len(eps) != 0:
		t.Fatalf("no leader named, endpoints %+v", eps)
	case named && (len(eps) != 1 || eps[0] != shareEndpoint{tun.virtual, "gateway", 9092}):
		t.Fatalf("a leader named, endpoints %+v, want the virtual one at gateway:9092", eps)
	}
}

// FuzzSinglePortMergeShareAck is FuzzSinglePortMergeShareFetch for
// ShareAcknowledge answers.
func FuzzSinglePortMergeShareAck(f *testing.F) {
	good := kmsg.NewPtrShareAcknowledgeResponse()
	good.SetVersion(1)
	tp := kmsg.NewShareAcknowledgeResponseTopic()
	tp.TopicID = shareTopic
	p := kmsg.NewShareAcknowledgeResponseTopicPartition()
	p.Partition, p.ErrorCode, p.CurrentLeader.LeaderID = 1, kerr.NotLeaderForPartition.Code, 2
	tp.Partitions = append(tp.Partitions, p)
	good.Topics = append(good.Topics, tp)
	ne := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
	ne.NodeID, ne.Host, ne.Port = 2, "broker-2", 9094
	good.NodeEndpoints = append(good.NodeEndpoints, ne)
	shareFuzzSeeds(f, append([]byte{0}, good.AppendTo(nil)...))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.SetVersion(1)
		parts := map[int32]kmsg.Response{}
		for i, body := range [][]byte{a, b} {
			resp, err := decodePartResponse(req, body)
			if err != nil {
				return
			}
			parts[int32(i)] = resp
		}
		tun := fuzzTunnel()
		out := tun.mergeShareAck(req, shareFuzzPlan(req), parts)
		named := false
		for _, tp := range out.Topics {
			for _, p := range tp.Partitions {
				if id := p.CurrentLeader.LeaderID; id >= 0 && id != tun.virtual {
					t.Fatalf("partition %d names leader %d", p.Partition, id)
				}
				named = named || p.CurrentLeader.LeaderID >= 0
			}
		}
		var eps []shareEndpoint
		for _, e := range out.NodeEndpoints {
			eps = append(eps, shareEndpoint{e.NodeID, e.Host, e.Port})
		}
		checkShareEndpoints(t, tun, named, eps)
		enc := out.AppendTo(nil)
		dec := kmsg.NewPtrShareAcknowledgeResponse()
		dec.SetVersion(out.Version)
		if err := dec.ReadFrom(enc); err != nil {
			t.Fatalf("the merged answer does not decode: %v", err)
		}
	})
}

// One client connection holds at most maxShareSessions share sessions;
// the next new one is refused SHARE_SESSION_LIMIT_REACHED, and a close
// makes room.
func TestSharePlanSessionLimit(t *testing.T) {
	tun := fuzzTunnel()
	st := tun.shares()
	leaders := leadersOf(map[int32]int32{0: 0})
	for i := range maxShareSessions + 1 {
		key := shareMemberKey{"g", fmt.Sprint(i)}
		p := st.planShareFetch(key, shareReq(0, []int32{0}, nil, nil), leaders)
		want := int16(0)
		if i == maxShareSessions {
			want = kerr.ShareSessionLimitReached.Code
		}
		if p.errCode != want {
			t.Fatalf("session %d: code %d, want %d", i, p.errCode, want)
		}
	}
	st.planShareFetch(shareMemberKey{"g", "0"}, shareReq(-1, nil, nil, nil), leaders)
	if p := st.planShareFetch(shareMemberKey{"g", "new"}, shareReq(0, []int32{0}, nil, nil), leaders); p.errCode != 0 {
		t.Errorf("after a close: code %d", p.errCode)
	}
}

// A part that only forgets does not count as a second fetching broker:
// the one broker left fetching keeps the client's whole wait.
func TestSharePlanForgetOnlyKeepsWait(t *testing.T) {
	tun := fuzzTunnel()
	st := tun.shares()
	key := shareMemberKey{"g", "m"}
	leaders := leadersOf(map[int32]int32{0: 0, 1: 1})
	st.planShareFetch(key, shareReq(0, []int32{0, 1}, nil, nil), leaders)
	got := summarize(st.planShareFetch(key, shareReq(1, nil, nil, []int32{0}), leaders))
	checkParts(t, "forget-only", got, map[int32]partSummary{
		0: {epoch: 1, forgot: []int32{0}, wait: 0},
		1: {epoch: 1, wait: 5000},
	})
}

// A session opened with no partitions is answered by the gateway (no
// empty session upstream); its first partition opens the leader's.
func TestSharePlanEmptySession(t *testing.T) {
	tun := fuzzTunnel()
	st := tun.shares()
	key := shareMemberKey{"g", "m"}
	leaders := leadersOf(map[int32]int32{0: 2})
	if p := st.planShareFetch(key, shareReq(0, nil, nil, nil), leaders); p.errCode != 0 || len(p.parts) != 0 {
		t.Fatalf("empty open: code %d, %d parts", p.errCode, len(p.parts))
	}
	got := summarize(st.planShareFetch(key, shareReq(1, []int32{0}, nil, nil), leaders))
	checkParts(t, "first partition", got, map[int32]partSummary{2: {epoch: 0, listed: []int32{0}, wait: 5000}})
}

// KIP-1206 record-limit mode: MaxRecords is shared among the brokers
// that fetch, so the merged answer keeps the client's hard limit; the
// default batch-optimized mode gives each broker the client's target.
func TestSharePlanRecordLimit(t *testing.T) {
	tun := fuzzTunnel()
	st := tun.shares()
	leaders := leadersOf(map[int32]int32{0: 0, 1: 1, 2: 2})
	for _, c := range []struct {
		mode int8
		want map[int32]int32
	}{
		{shareAcquireRecordLimit, map[int32]int32{0: 4, 1: 3, 2: 3}},
		{0, map[int32]int32{0: 10, 1: 10, 2: 10}},
	} {
		r := shareReq(0, []int32{0, 1, 2}, nil, nil)
		r.SetVersion(2)
		r.MaxRecords, r.ShareAcquireMode = 10, c.mode
		plan := st.planShareFetch(shareMemberKey{"g", fmt.Sprint(c.mode)}, r, leaders)
		for n, want := range c.want {
			if got := plan.parts[n].(*kmsg.ShareFetchRequest).MaxRecords; got != want {
				t.Errorf("mode %d: broker %d MaxRecords %d, want %d", c.mode, n, got, want)
			}
		}
	}
}

// kgo lists a partition it only acknowledges (one it stopped fetching)
// in Topics and in ForgottenTopicsData. A broker whose session no longer
// holds it must get the same pair: listed for the acknowledgements and
// forgotten in the same request, else it would add the partition back
// and acquire records the client throws away.
func TestSharePlanAckOnlyForgotten(t *testing.T) {
	tun := fuzzTunnel()
	st := tun.shares()
	key := shareMemberKey{"g", "m"}
	leaders := leadersOf(map[int32]int32{0: 0, 1: 1})
	st.planShareFetch(key, shareReq(0, []int32{0, 1}, nil, nil), leaders)
	got := summarize(st.planShareFetch(key, shareReq(1, nil, nil, []int32{1}), leaders))
	checkParts(t, "forget", got, map[int32]partSummary{
		0: {epoch: 1, wait: 5000},
		1: {epoch: 1, forgot: []int32{1}, wait: 0},
	})
	got = summarize(st.planShareFetch(key, shareReq(2, []int32{1}, []int32{1}, []int32{1}), leaders))
	checkParts(t, "ack only", got, map[int32]partSummary{
		0: {epoch: 2, wait: 5000},
		1: {epoch: 2, listed: []int32{1}, forgot: []int32{1}, acks: true, wait: 0},
	})
	if held := st.sessions[key].brokers[1].parts; len(held) != 0 {
		t.Errorf("broker 1's session holds %v after an acknowledgement-only request, want nothing", held)
	}
}

// KIP-1206 record-limit mode with MaxRecords below the number of brokers
// that would fetch: only MaxRecords of them fetch each round (each
// allowed one record), in turn so every broker gets its rounds; an idle
// broker's acknowledgements go in a ShareAcknowledge at its epoch.
func TestSharePlanRecordLimitBelowBrokers(t *testing.T) {
	tun := fuzzTunnel()
	st := tun.shares()
	key := shareMemberKey{"g", "m"}
	leaders := leadersOf(map[int32]int32{0: 0, 1: 1, 2: 2})
	limited := func(r *kmsg.ShareFetchRequest) *kmsg.ShareFetchRequest {
		r.SetVersion(2)
		r.MaxRecords, r.ShareAcquireMode = 1, shareAcquireRecordLimit
		return r
	}
	fetched := map[int32]int{}
	for e := range int32(6) {
		var parts []int32
		if e == 0 {
			parts = []int32{0, 1, 2}
		}
		plan := st.planShareFetch(key, limited(shareReq(e, parts, nil, nil)), leaders)
		if len(plan.parts) != 1 {
			t.Fatalf("epoch %d: %d brokers fetch, want 1", e, len(plan.parts))
		}
		for n, p := range plan.parts {
			if got := p.(*kmsg.ShareFetchRequest).MaxRecords; got != 1 {
				t.Errorf("epoch %d: broker %d MaxRecords %d, want 1", e, n, got)
			}
			fetched[n]++
		}
	}
	if len(fetched) != 3 || fetched[0] != 2 || fetched[1] != 2 || fetched[2] != 2 {
		t.Errorf("rounds per broker %v, want 2 each", fetched)
	}
	plan := st.planShareFetch(key, limited(shareReq(6, []int32{0, 1, 2}, []int32{0, 1, 2}, nil)), leaders)
	if len(plan.parts) != 1 || len(plan.follow) != 2 {
		t.Fatalf("with acknowledgements for all three: %d parts, %d acknowledges, want 1 and 2", len(plan.parts), len(plan.follow))
	}
	for n, f := range plan.follow {
		if _, fetching := plan.parts[n]; fetching || f.ShareSessionEpoch < 1 || len(f.Topics) != 1 {
			t.Errorf("broker %d: acknowledge %+v (fetching %v)", n, f, fetching)
		}
	}
	for n, p := range plan.parts {
		if r := p.(*kmsg.ShareFetchRequest); len(r.Topics) != 1 || len(r.Topics[0].Partitions[0].AcknowledgementBatches) != 1 {
			t.Errorf("fetching broker %d lists %+v, want its acknowledged partition", n, r.Topics)
		}
	}
}

// A broker's leader hint (KIP-951) reaches the client as the virtual
// node, with the virtual node's one endpoint at the gateway's address;
// an answer naming no leader carries no endpoint.
func TestShareMergeNodeEndpoints(t *testing.T) {
	tun := fuzzTunnel()
	req := shareReq(1, []int32{1}, nil, nil)
	moved := kmsg.NewPtrShareFetchResponse()
	tp := kmsg.NewShareFetchResponseTopic()
	tp.TopicID = shareTopic
	p := kmsg.NewShareFetchResponseTopicPartition()
	p.Partition, p.ErrorCode, p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 1, kerr.NotLeaderForPartition.Code, 2, 3
	tp.Partitions = append(tp.Partitions, p)
	moved.Topics = append(moved.Topics, tp)
	for _, n := range []int32{0, 1, 2} {
		ne := kmsg.NewShareFetchResponseNodeEndpoint()
		ne.NodeID, ne.Host, ne.Port = n, fmt.Sprint("broker-", n), 9092+n
		moved.NodeEndpoints = append(moved.NodeEndpoints, ne)
	}
	plan := sharePlan{key: shareMemberKey{"g", "m"}, parts: map[int32]kmsg.Request{0: req, 1: req}, closing: map[int32]bool{}}
	out := tun.mergeShareFetch(req, plan, map[int32]kmsg.Response{0: kmsg.NewPtrShareFetchResponse(), 1: moved})
	if len(out.NodeEndpoints) != 1 || out.NodeEndpoints[0].NodeID != tun.virtual || out.NodeEndpoints[0].Host != "gateway" || out.NodeEndpoints[0].Port != 9092 {
		t.Errorf("endpoints %+v, want the virtual node at gateway:9092", out.NodeEndpoints)
	}
	if got := out.Topics[0].Partitions[0].CurrentLeader.LeaderID; got != tun.virtual {
		t.Errorf("current leader %d, want the virtual node", got)
	}
	out = tun.mergeShareFetch(req, plan, map[int32]kmsg.Response{0: kmsg.NewPtrShareFetchResponse(), 1: kmsg.NewPtrShareFetchResponse()})
	if len(out.NodeEndpoints) != 0 {
		t.Errorf("no leader named, endpoints %+v", out.NodeEndpoints)
	}
}

// The gateway's own NOT_LEADER_OR_FOLLOWER for an acknowledgement it had
// no session for does not clear the shared cluster view (a client could
// otherwise clear it on every request); a broker's does.
func TestShareMergeUnackedKeepsView(t *testing.T) {
	tun := fuzzTunnel()
	seed := func() {
		tun.view.leaders = map[string]map[int32]int32{"t": {0: 1}}
		tun.view.stale = false
	}
	kept := func() bool { _, ok := tun.view.leader("t", 0); return ok && !tun.view.isStale() }
	req := shareReq(1, []int32{1}, nil, nil)
	plan := sharePlan{key: shareMemberKey{"g", "m"}, parts: map[int32]kmsg.Request{0: req}, closing: map[int32]bool{}, unacked: []sharePart{{shareTopic, 9}}}
	seed()
	tun.mergeShareFetch(req, plan, map[int32]kmsg.Response{0: kmsg.NewPtrShareFetchResponse()})
	if !kept() {
		t.Error("ShareFetch: an undeliverable acknowledgement cleared the view")
	}
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.SetVersion(1)
	seed()
	tun.mergeShareAck(ack, sharePlan{parts: map[int32]kmsg.Request{0: ack}, unacked: plan.unacked}, map[int32]kmsg.Response{0: kmsg.NewPtrShareAcknowledgeResponse()})
	if !kept() {
		t.Error("ShareAcknowledge: an undeliverable acknowledgement cleared the view")
	}
	stale := kmsg.NewPtrShareAcknowledgeResponse()
	tp := kmsg.NewShareAcknowledgeResponseTopic()
	p := kmsg.NewShareAcknowledgeResponseTopicPartition()
	p.ErrorCode = kerr.NotLeaderForPartition.Code
	tp.Partitions = append(tp.Partitions, p)
	stale.Topics = append(stale.Topics, tp)
	seed()
	tun.mergeShareAck(ack, sharePlan{parts: map[int32]kmsg.Request{0: ack}}, map[int32]kmsg.Response{0: stale})
	if kept() {
		t.Error("a broker's NOT_LEADER_OR_FOLLOWER left the view as it was")
	}
}

// A follow-up acknowledge is never sent at a ShareAcknowledge version
// this build cannot encode, whatever the client's ShareFetch version.
func TestShareFollowVersionClamped(t *testing.T) {
	top := wire.MaxVersion(apis.ShareAcknowledge)
	r := shareReq(1, []int32{1}, []int32{1}, nil)
	r.Version = top + 1
	if got := followAcks(r, 1, []sharePart{{shareTopic, 1}}, fetchAcksOf(r)).Version; got != top {
		t.Errorf("follow-up at v%d, want v%d", got, top)
	}
}

// A follow-up acknowledge that fails is logged with its broker's id, not
// its gather key (followKey).
func TestShareFollowFailureNamesBroker(t *testing.T) {
	lb := &bytes.Buffer{}
	srv := &Server{nodes: newNodeRegistry()}
	srv.noisy = lograte.New(slog.New(slog.NewTextHandler(lb, nil)), lograte.Options{})
	defer srv.noisy.Close()
	tun := fuzzTunnel()
	tun.view = newClusterView(srv)
	tun.s = &session{srv: srv, l: &listener{}, remote: "127.0.0.1:1"}
	g := &gather{got: map[int32]kmsg.Response{}, rep: func(kmsg.Response, error) {}, partial: true,
		merge: func(map[int32]kmsg.Response) (kmsg.Response, error) { return nil, nil }, real: map[int32]int32{followKey(2): 2}}
	g.left.Store(1)
	g.finish(tun, followKey(2), nil, nil, errors.New("connection reset"))
	if out := lb.String(); !strings.Contains(out, "node=2 ") || strings.Contains(out, "node=-1002") {
		t.Errorf("logged %q, want node=2", out)
	}
}

// A close queued for a dropped session goes to its broker before the
// next request, but not to a broker where the member's new session
// already holds an upstream session (the client reset before it read
// the error; its epoch 0 replaced the old one).
func TestShareCloseSkipsReopened(t *testing.T) {
	tun := fuzzTunnel()
	st := tun.shares()
	key := shareMemberKey{"g", "m"}
	conn := &writeRecorder{closed: make(chan struct{})}
	bc := newBrokerConn(0, conn, "test")
	defer bc.close()
	tun.conns = map[int32]*brokerConn{0: bc}
	queue := func() {
		st.closes = []shareClose{{key: key, node: 0, req: closeShareFetch(shareReq(1, nil, nil, nil))}}
	}
	st.planShareFetch(key, shareReq(0, []int32{0}, nil, nil), leadersOf(map[int32]int32{0: 0}))
	queue()
	tun.sendShareCloses()
	if n := conn.writes(); n != 0 {
		t.Errorf("a close reached the broker holding the new session (%d writes)", n)
	}
	delete(st.sessions, key)
	queue()
	tun.sendShareCloses()
	if n := conn.writes(); n != 1 {
		t.Errorf("%d writes, want the close", n)
	}
}

// writeRecorder is a net.Conn that counts writes and never answers.
type writeRecorder struct {
	mu     sync.Mutex
	n      int
	closed chan struct{}
	once   sync.Once
}

func (w *writeRecorder) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	return len(b), nil
}

func (w *writeRecorder) writes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func (w *writeRecorder) Read([]byte) (int, error)         { <-w.closed; return 0, net.ErrClosed }
func (w *writeRecorder) Close() error                     { w.once.Do(func() { close(w.closed) }); return nil }
func (w *writeRecorder) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (w *writeRecorder) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (w *writeRecorder) SetDeadline(time.Time) error      { return nil }
func (w *writeRecorder) SetReadDeadline(time.Time) error  { return nil }
func (w *writeRecorder) SetWriteDeadline(time.Time) error { return nil }

// TestCloseShareFetchKeepsNothingOfTheFrame: the close of a stale share
// session is sent with the client's next request, after this request's
// frame went back to its pool; kmsg leaves unknown tagged fields aliasing
// that frame, so the close carries none (and no partitions), only the
// copied group and member ids.
func TestCloseShareFetchKeepsNothingOfTheFrame(t *testing.T) {
	r := kmsg.NewPtrShareFetchRequest()
	r.GroupID, r.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr("m")
	r.ShareSessionEpoch = 3
	r.UnknownTags.Set(99, []byte("aliases the frame"))
	r.Topics = append(r.Topics, kmsg.NewShareFetchRequestTopic())
	c := closeShareFetch(r)
	if c.UnknownTags.Len() != 0 || c.Topics != nil || c.ShareSessionEpoch != -1 {
		t.Fatalf("close: %d unknown tags, %d topics, epoch %d; want none, none, -1", c.UnknownTags.Len(), len(c.Topics), c.ShareSessionEpoch)
	}
	if *c.GroupID != "g" || *c.MemberID != "m" {
		t.Fatalf("close names group %q member %q", *c.GroupID, *c.MemberID)
	}
	if r.UnknownTags.Len() != 1 {
		t.Fatal("closeShareFetch changed the client's request")
	}
}
