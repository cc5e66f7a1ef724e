package proxy_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// batchedKey is one batched coordinator key: how to ask it for ids, and
// the error code its answer gives each id.
type batchedKey struct {
	name  string
	req   func(ids []string) kmsg.Request
	codes func(kmsg.Response) map[string]int16
}

var batchedKeys = []batchedKey{
	{"DescribeGroups", func(ids []string) kmsg.Request {
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups = ids
		return r
	}, func(resp kmsg.Response) map[string]int16 {
		out := map[string]int16{}
		for _, g := range resp.(*kmsg.DescribeGroupsResponse).Groups {
			out[g.Group] = g.ErrorCode
		}
		return out
	}},
	{"DeleteGroups", func(ids []string) kmsg.Request {
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups = ids
		return r
	}, func(resp kmsg.Response) map[string]int16 {
		out := map[string]int16{}
		for _, g := range resp.(*kmsg.DeleteGroupsResponse).Groups {
			out[g.Group] = g.ErrorCode
		}
		return out
	}},
	{"OffsetFetch", func(ids []string) kmsg.Request {
		r := kmsg.NewPtrOffsetFetchRequest()
		for _, id := range ids {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = id
			r.Groups = append(r.Groups, g)
		}
		return r
	}, func(resp kmsg.Response) map[string]int16 {
		out := map[string]int16{}
		for _, g := range resp.(*kmsg.OffsetFetchResponse).Groups {
			out[g.Group] = g.ErrorCode
		}
		return out
	}},
	{"ConsumerGroupDescribe", func(ids []string) kmsg.Request {
		r := kmsg.NewPtrConsumerGroupDescribeRequest()
		r.Groups = ids
		return r
	}, func(resp kmsg.Response) map[string]int16 {
		out := map[string]int16{}
		for _, g := range resp.(*kmsg.ConsumerGroupDescribeResponse).Groups {
			out[g.Group] = g.ErrorCode
		}
		return out
	}},
	{"DescribeTransactions", func(ids []string) kmsg.Request {
		r := kmsg.NewPtrDescribeTransactionsRequest()
		r.TransactionalIDs = ids
		return r
	}, func(resp kmsg.Response) map[string]int16 {
		out := map[string]int16{}
		for _, s := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			out[s.TransactionalID] = s.ErrorCode
		}
		return out
	}},
	{"ShareGroupDescribe", func(ids []string) kmsg.Request {
		r := kmsg.NewPtrShareGroupDescribeRequest()
		r.GroupIDs = ids
		return r
	}, func(resp kmsg.Response) map[string]int16 {
		out := map[string]int16{}
		for _, g := range resp.(*kmsg.ShareGroupDescribeResponse).Groups {
			out[g.GroupID] = g.ErrorCode
		}
		return out
	}},
	{"DescribeShareGroupOffsets", func(ids []string) kmsg.Request {
		r := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		for _, id := range ids {
			g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
			g.GroupID = id
			r.Groups = append(r.Groups, g)
		}
		return r
	}, func(resp kmsg.Response) map[string]int16 {
		out := map[string]int16{}
		for _, g := range resp.(*kmsg.DescribeShareGroupOffsetsResponse).Groups {
			out[g.GroupID] = g.ErrorCode
		}
		return out
	}},
}

// askBatched sends k for ids to the virtual node and returns each id's
// code; a failed request (the gateway closed the connection) is fatal.
func askBatched(t *testing.T, cl *kgo.Client, k batchedKey, ids []string) map[string]int16 {
	t.Helper()
	resp, err := cl.Broker(testVirtual).Request(ctxT(t, 30*time.Second), k.req(ids))
	if err != nil {
		t.Fatalf("%s of %d ids: %v", k.name, len(ids), err)
	}
	codes := k.codes(resp)
	if len(codes) != len(ids) {
		t.Fatalf("%s of %d ids answered %d: %v", k.name, len(ids), len(codes), codes)
	}
	return codes
}

// TestSinglePortBatchedCoordinatorRemoved: a coordinator leaves the
// cluster (kfake RemoveNode closes its listener) while the gateway's view
// still names it. A client connecting afterwards (so the gateway must
// dial the removed broker) asks every batched coordinator key for ids on
// all three coordinators: the removed one's ids are answered
// COORDINATOR_NOT_AVAILABLE and the connection stays open; the next
// request looks them up again and reaches the live coordinators.
func TestSinglePortBatchedCoordinatorRemoved(t *testing.T) {
	c, srv, scan := startSinglePort(t, "cr", 3)
	ids := map[string][]string{} // per key: a group-kind key's cache entries are shared
	for _, k := range batchedKeys {
		ids[k.name] = keysOnEveryCoordinator(t, c, "cr-"+k.name) // ids[2] on node 2
	}
	before := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	for _, k := range batchedKeys {
		for id, code := range askBatched(t, before, k, ids[k.name]) {
			if code == kerr.CoordinatorNotAvailable.Code {
				t.Fatalf("%s: %s COORDINATOR_NOT_AVAILABLE before any broker left", k.name, id)
			}
		}
	}
	if err := c.RemoveNode(2); err != nil {
		t.Fatal(err)
	}
	var dials int
	var mu sync.Mutex
	after := newClient(t, srv, nil, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		mu.Lock()
		dials++
		mu.Unlock()
		return scan.dial(ctx, network, host)
	}))
	for _, k := range batchedKeys {
		gone := ids[k.name][2]
		if code := askBatched(t, after, k, ids[k.name])[gone]; code != kerr.CoordinatorNotAvailable.Code {
			t.Errorf("%s: %s on the removed coordinator: code %d, want COORDINATOR_NOT_AVAILABLE", k.name, gone, code)
		}
	}
	mu.Lock()
	dialled := dials
	mu.Unlock()
	for _, k := range batchedKeys {
		for id, code := range askBatched(t, after, k, ids[k.name]) {
			if movedCode(code) {
				t.Errorf("%s: %s after the view relearned: code %d", k.name, id, code)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if dials != dialled {
		t.Errorf("the client dialled the gateway %d times, then %d more: a connection closed", dialled, dials-dialled)
	}
	scan.assertClean(t)
}

// findCoordinatorLog records the FindCoordinator requests kfake gets.
type findCoordinatorLog struct {
	mu   sync.Mutex
	reqs []*kmsg.FindCoordinatorRequest
}

func logFindCoordinator(c *kfake.Cluster) *findCoordinatorLog {
	l := &findCoordinatorLog{}
	c.ControlKey(int16(kmsg.FindCoordinator), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		l.mu.Lock()
		l.reqs = append(l.reqs, req.(*kmsg.FindCoordinatorRequest))
		l.mu.Unlock()
		return nil, nil, false
	})
	return l
}

// since returns the requests logged after the first n.
func (l *findCoordinatorLog) since(n int) []*kmsg.FindCoordinatorRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*kmsg.FindCoordinatorRequest(nil), l.reqs[n:]...)
}

func (l *findCoordinatorLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// manyIDs names n ids of prefix.
func manyIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// TestSinglePortCoordinatorLookupBatched: one DescribeGroups naming more
// ids than the view caches is looked up upstream in one FindCoordinator
// round trip (v4+, KIP-699) naming them all, every id is answered by its
// coordinator, the cache stays at its bound, and the lookup is counted.
// Asking again looks up only the evicted ids, again in one round trip.
func TestSinglePortCoordinatorLookupBatched(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, srv, scan := startSinglePort(t, "lb", 3, func(o *proxy.Options) { o.Hooks = metrics.New(reg) })
	finds := logFindCoordinator(c)
	_, bound := proxy.CoordCacheForTest(srv)
	ids := manyIDs("lb-group", bound+500)
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	k := batchedKeys[0] // DescribeGroups
	for round := range 2 {
		n := finds.len()
		for id, code := range askBatched(t, cl, k, ids) {
			if movedCode(code) { // kfake answers an unknown group GROUP_ID_NOT_FOUND at its coordinator
				t.Fatalf("round %d: %s: code %d", round, id, code)
			}
		}
		got := finds.since(n)
		if len(got) != 1 || got[0].Version < 4 {
			t.Fatalf("round %d: %d FindCoordinator requests upstream, want one batched (v4+)", round, len(got))
		}
		if want := len(ids); round == 0 && len(got[0].CoordinatorKeys) != want {
			t.Errorf("round %d: FindCoordinator named %d keys, want %d", round, len(got[0].CoordinatorKeys), want)
		}
		if cached, _ := proxy.CoordCacheForTest(srv); cached != bound {
			t.Errorf("round %d: %d coordinators cached, want the bound %d", round, cached, bound)
		}
	}
	if got := counterValue(t, reg, "tollgate_single_port_events_total", map[string]string{"event": "find_coordinator"}); got != 2 {
		t.Errorf("find_coordinator counted %v, want 2", got)
	}
	scan.assertClean(t)
}

// TestSinglePortCoordinatorLookupV3: an upstream that offers no
// FindCoordinator v4 (kfake limited to v3) gets one v3 lookup per id.
func TestSinglePortCoordinatorLookupV3(t *testing.T) {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(int16(kmsg.FindCoordinator), 3)
	c := startUpstream(t, 3, kfake.SeedTopics(3, "v3"), kfake.MaxVersions(vs))
	srv := startGateway(t, c, func(o *proxy.Options) {
		o.Listeners[0].SinglePort = &proxy.SinglePortOptions{VirtualNode: testVirtual}
	})
	finds := logFindCoordinator(c)
	cl := newClient(t, srv, nil)
	ids := keysOnEveryCoordinator(t, c, "v3-txn")
	for id, code := range askBatched(t, cl, batchedKeys[4], ids) { // DescribeTransactions
		if code != kerr.TransactionalIDNotFound.Code {
			t.Errorf("%s: code %d, want TRANSACTIONAL_ID_NOT_FOUND from its coordinator", id, code)
		}
	}
	got := finds.since(0)
	if len(got) != len(ids) {
		t.Fatalf("%d FindCoordinator requests upstream, want one per id (%d)", len(got), len(ids))
	}
	for _, r := range got {
		if r.Version != 3 || r.CoordinatorType != 1 {
			t.Errorf("FindCoordinator v%d type %d, want v3 type 1 (transaction)", r.Version, r.CoordinatorType)
		}
	}
}

// TestSinglePortCoordinatorRefusalReachesClient: when the upstream
// refuses the group itself in FindCoordinator (authorization), a
// coordinator request is answered with that error, not the retriable
// COORDINATOR_NOT_AVAILABLE a client would retry forever.
func TestSinglePortCoordinatorRefusalReachesClient(t *testing.T) {
	c, srv, _ := startSinglePort(t, "cref", 1)
	ctx := ctxT(t, 30*time.Second)
	c.ControlKey(int16(kmsg.FindCoordinator), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.FindCoordinatorRequest)
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		for _, k := range r.CoordinatorKeys {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key, rc.ErrorCode = k, kerr.GroupAuthorizationFailed.Code
			resp.Coordinators = append(resp.Coordinators, rc)
		}
		return resp, nil, true
	})
	cl := newClient(t, srv, nil)
	req := kmsg.NewPtrHeartbeatRequest() // one group, a top-level error code
	req.Group, req.MemberID, req.Generation = "denied-group", "m", 1
	resp, err := req.RequestWith(ctx, cl.Broker(testVirtual))
	if err != nil {
		t.Fatal(err)
	}
	if got := kerr.ErrorForCode(resp.ErrorCode); got != kerr.GroupAuthorizationFailed {
		t.Errorf("Heartbeat of a group the upstream refuses: %v, want GROUP_AUTHORIZATION_FAILED (%+v)", got, resp)
	}
}
