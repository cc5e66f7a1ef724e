package rewrite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/wire"
)

// rwCase is one response type the rewriter handles.
type rwCase struct {
	name string
	key  int16
	kind EndpointKind
	// fix adjusts a filled response with upstream addresses so that it
	// exercises the case (error entries, endpoint type).
	fix func(kmsg.Response)
}

func rwCases() []rwCase {
	return []rwCase{
		{name: "Produce", key: 0},
		{name: "Fetch", key: 1},
		{name: "Metadata", key: 3},
		{name: "FindCoordinator", key: 10, fix: func(r kmsg.Response) {
			fc := r.(*kmsg.FindCoordinatorResponse)
			fc.ErrorCode = 0
			fc.Coordinators[0].ErrorCode = 0
			// Kafka's Node.noNode for an error entry.
			e := &fc.Coordinators[1]
			e.ErrorCode, e.NodeID, e.Host, e.Port = 15, -1, "", -1
		}},
		{name: "FindCoordinatorError", key: 10, fix: func(r kmsg.Response) {
			fc := r.(*kmsg.FindCoordinatorResponse)
			fc.ErrorCode, fc.NodeID, fc.Host, fc.Port = 15, -1, "", -1
			for i := range fc.Coordinators {
				e := &fc.Coordinators[i]
				e.ErrorCode, e.NodeID, e.Host, e.Port = 15, -1, "", -1
			}
		}},
		{name: "DescribeClusterBrokers", key: 60, fix: func(r kmsg.Response) {
			r.(*kmsg.DescribeClusterResponse).EndpointType = 1
		}},
		{name: "DescribeClusterControllers", key: 60, kind: Controller, fix: func(r kmsg.Response) {
			r.(*kmsg.DescribeClusterResponse).EndpointType = 2
		}},
		{name: "ShareFetch", key: 78},
		{name: "ShareAcknowledge", key: 79},
		{name: "DescribeQuorum", key: 55, kind: Controller},
		{name: "Vote", key: 52, kind: Controller},
		{name: "BeginQuorumEpoch", key: 53, kind: Controller},
		{name: "EndQuorumEpoch", key: 54, kind: Controller},
		{name: "FetchSnapshot", key: 59, kind: Controller},
		{name: "UpdateRaftVoter", key: 82, kind: Controller},
	}
}

// build returns a response of c at version, every field set, every endpoint
// carrying its node's upstream address.
func (c rwCase) build(version int16) kmsg.Response {
	r := kmsg.ResponseForKey(c.key)
	n := 0
	fill(reflect.ValueOf(r), &n)
	r.SetVersion(version)
	setUpstream(r)
	if c.fix != nil {
		c.fix(r)
	}
	return r
}

// TestResponseEveryVersion rewrites every handled response at every version
// kmsg knows and checks the result field by field against the original with
// only the endpoints replaced, and that no upstream address is left.
func TestResponseEveryVersion(t *testing.T) {
	for _, c := range rwCases() {
		for v := int16(0); v <= wire.MaxVersion(c.key); v++ {
			t.Run(fmt.Sprintf("%s/v%d", c.name, v), func(t *testing.T) {
				in := c.build(v).AppendTo(nil)
				m := &testMapper{}
				out, changed, err := Response(c.key, v, in, m)
				if err != nil {
					t.Fatalf("Response: %v", err)
				}
				orig, err := decode(c.key, v, in)
				if err != nil {
					t.Fatalf("decode input: %v", err)
				}
				got, err := decode(c.key, v, out)
				if err != nil {
					t.Fatalf("decode output: %v", err)
				}
				want, _ := decode(c.key, v, in)
				expectMapped(want)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("rewritten response differs from the original with mapped endpoints\n got: %+v\nwant: %+v", got, want)
				}
				wantChanged := !reflect.DeepEqual(orig, want)
				if changed != wantChanged {
					t.Errorf("changed = %v, want %v", changed, wantChanged)
				}
				if !changed && !sameSlice(out, in) {
					t.Error("unchanged response was re-encoded instead of returned as is")
				}
				if changed && !Needs(c.key, v) {
					t.Errorf("Needs(%d, %d) = false for a response that carries addresses", c.key, v)
				}
				assertNoLeak(t, out)
				kind := c.kind
				if c.key == 60 && v == 0 {
					kind = Broker // EndpointType is v1+
				}
				for _, cl := range m.calls {
					if cl.Kind != kind {
						t.Errorf("node %d shown as %v, want %v", cl.Node, cl.Kind, c.kind)
					}
					if cl.Host != upstreamHost(cl.Node) || cl.Port != upstreamPort(cl.Node) {
						t.Errorf("mapper shown %s:%d for node %d, want the upstream address", cl.Host, cl.Port, cl.Node)
					}
				}
			})
		}
	}
}

// assertNoLeak fails when any upstream host, or the encoding of an upstream
// port (int32 or uint16), is in body.
func assertNoLeak(t *testing.T, body []byte) {
	t.Helper()
	if i := bytes.Index(body, []byte(leakMarker)); i >= 0 {
		t.Fatalf("upstream host left in the output at byte %d: %q", i, body[max(0, i-20):min(len(body), i+len(leakMarker))])
	}
	for node := int32(0); node < 100; node++ {
		p := upstreamPort(node)
		if bytes.Contains(body, binary.BigEndian.AppendUint32(nil, uint32(p))) ||
			bytes.Contains(body, binary.BigEndian.AppendUint16(nil, uint16(p))) {
			t.Fatalf("upstream port %d of node %d left in the output", p, node)
		}
	}
}

// TestEveryNeededKeyHasARewriter keeps the API table's endpoint keys and pass.apply in step: a
// key in one must be in the other, or its responses would either go out
// unrewritten or fail every time.
func TestEveryNeededKeyHasARewriter(t *testing.T) {
	tested := map[int16]bool{}
	for _, c := range rwCases() {
		tested[c.key] = true
	}
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if !needsAnyVersion(key) {
			continue
		}
		if !tested[key] {
			t.Errorf("key %d (%s) needs rewriting but has no case in TestResponseEveryVersion", key, kmsg.NameForKey(key))
		}
		r := kmsg.ResponseForKey(key)
		if r == nil {
			t.Fatalf("key %d in the API table's endpoint keys is unknown to kmsg", key)
		}
		p := pass{m: &testMapper{}}
		if err := p.apply(r); err != nil {
			t.Errorf("key %d: %v", key, err)
		}
	}
	for key := range tested {
		if !needsAnyVersion(key) {
			t.Errorf("key %d has a rewriter but Needs never reports it", key)
		}
	}
}

// TestNoOtherResponseCarriesAnEndpoint walks every response type kmsg knows
// and fails on one with a Host/Port pair the rewriter does not handle, other
// than those docs/protocol.md §1.2 says are not client-facing.
func TestNoOtherResponseCarriesAnEndpoint(t *testing.T) {
	notAddresses := map[int16]string{
		29: "DescribeAcls: ACL host patterns",
		31: "DeleteAcls: ACL host patterns",
		88: "StreamsGroupHeartbeat: Streams application endpoints",
		89: "StreamsGroupDescribe: Streams application endpoints",
	}
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		r := kmsg.ResponseForKey(key)
		if r == nil || needsAnyVersion(key) {
			continue
		}
		n := 0
		fill(reflect.ValueOf(r), &n)
		found := false
		walkEndpoints(reflect.ValueOf(r), -1, func(reflect.Value, int32) { found = true })
		if found && notAddresses[key] == "" {
			t.Errorf("%s (key %d) has a Host/Port pair that is not rewritten", kmsg.NameForKey(key), key)
		}
	}
}

func TestResponseNoEndpointsReturnsInput(t *testing.T) {
	for _, tc := range []struct {
		key  int16
		resp kmsg.Response
	}{
		{0, fetchless(kmsg.NewPtrProduceResponse())},
		{1, fetchless(kmsg.NewPtrFetchResponse())},
	} {
		for v := int16(0); v <= wire.MaxVersion(tc.key); v++ {
			r := tc.resp
			r.SetVersion(v)
			in := r.AppendTo(nil)
			m := &testMapper{}
			out, changed, err := Response(tc.key, v, in, m)
			if err != nil {
				t.Fatalf("%s v%d: %v", kmsg.NameForKey(tc.key), v, err)
			}
			if changed || !sameSlice(out, in) {
				t.Errorf("%s v%d: changed=%v, same slice=%v; want the input back", kmsg.NameForKey(tc.key), v, changed, sameSlice(out, in))
			}
			if len(m.calls) != 0 {
				t.Errorf("%s v%d: mapper called %d times", kmsg.NameForKey(tc.key), v, len(m.calls))
			}
		}
	}
}

// fetchless fills a Produce or Fetch response with every field except the
// NodeEndpoints.
func fetchless(r kmsg.Response) kmsg.Response {
	n := 0
	fill(reflect.ValueOf(r), &n)
	switch r := r.(type) {
	case *kmsg.ProduceResponse:
		r.Brokers = nil
	case *kmsg.FetchResponse:
		r.Brokers = nil
	}
	return r
}

// TestResponseEmptyEndpointsTag: a tag 0 holding an empty list leaves
// nothing to rewrite, so the input comes back.
func TestResponseEmptyEndpointsTag(t *testing.T) {
	// kmsg never writes an empty tag; build it by hand: FetchResponse v16
	// with no topics and top-level tags {0: [empty compact array]}.
	body := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 /* no topics */, 1 /* one tag */, 0 /* tag 0 */, 1 /* size */, 1 /* empty array */}
	if _, err := decode(1, 16, body); err != nil {
		t.Fatalf("hand-built body does not decode: %v", err)
	}
	if withoutEndpoints(1, 16, body) {
		t.Fatal("pre-check missed a tag 0")
	}
	out, changed, err := Response(1, 16, body, &testMapper{})
	if err != nil || changed || !sameSlice(out, body) {
		t.Fatalf("got changed=%v err=%v same=%v; want the input back", changed, err, sameSlice(out, body))
	}
}

func TestResponseUnknownVersion(t *testing.T) {
	for _, key := range []int16{0, 1, 3, 10, 55, 60, 78, 79} {
		v := wire.MaxVersion(key) + 1
		_, _, err := Response(key, v, []byte{0, 0, 0, 0}, &testMapper{})
		if !errors.Is(err, ErrUnknownVersion) {
			t.Errorf("%s v%d: err = %v, want ErrUnknownVersion", kmsg.NameForKey(key), v, err)
		}
	}
	// A key that carries no address is passed on at any version.
	body := []byte{1, 2, 3}
	out, changed, err := Response(19, 99, body, &testMapper{})
	if err != nil || changed || !sameSlice(out, body) {
		t.Errorf("CreateTopics v99: changed=%v err=%v; want the input back", changed, err)
	}
}

func TestResponseMalformed(t *testing.T) {
	in := (&rwCase{key: 3}).build(12).AppendTo(nil)
	_, _, err := Response(3, 12, in[:len(in)/2], &testMapper{})
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated Metadata: err = %v, want ErrMalformed", err)
	}
	// A truncated Fetch must not be judged endpoint-free by the pre-check.
	f := rwCase{key: 1}.build(17).AppendTo(nil)
	if _, _, err := Response(1, 17, f[:len(f)-3], &testMapper{}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated Fetch: err = %v, want ErrMalformed", err)
	}
}

func TestNeeds(t *testing.T) {
	for _, tc := range []struct {
		key, version int16
		want         bool
	}{
		{0, 8, false}, {0, 9, true}, {0, 13, true}, {0, 14, true},
		{1, 11, false}, {1, 12, true}, {1, 18, true}, {1, 99, true},
		{3, 0, true}, {10, 0, true}, {10, 6, true}, {60, 0, true},
		{55, 1, false}, {55, 2, true}, {78, 0, true}, {79, 0, true},
		{2, 0, false}, {18, 3, false}, {-1, 0, false}, {kmsg.MaxKey + 1, 0, false}, {32767, 0, false},
	} {
		if got := Needs(tc.key, tc.version); got != tc.want {
			t.Errorf("Needs(%d, %d) = %v, want %v", tc.key, tc.version, got, tc.want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { Needs(1, 16) }); a != 0 {
		t.Errorf("Needs allocates %v times", a)
	}
}

// TestFindCoordinatorErrorEntries: error entries are Kafka's Node.noNode and
// pass untouched; an upstream host in one is blanked, never passed on.
func TestFindCoordinatorErrorEntries(t *testing.T) {
	r := kmsg.NewPtrFindCoordinatorResponse()
	r.Version = 4
	r.Coordinators = []kmsg.FindCoordinatorResponseCoordinator{
		{Key: "g1", NodeID: -1, Host: "", Port: -1, ErrorCode: 15},
		{Key: "g2", NodeID: 3, Host: upstreamHost(3), Port: upstreamPort(3)},
	}
	in := r.AppendTo(nil)
	m := &testMapper{}
	out, changed, err := Response(10, 4, in, m)
	if err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	got, _ := decode(10, 4, out)
	cs := got.(*kmsg.FindCoordinatorResponse).Coordinators
	if e := cs[0]; e.NodeID != -1 || e.Host != "" || e.Port != -1 || e.ErrorCode != 15 {
		t.Errorf("error entry changed: %+v", e)
	}
	if len(m.calls) != 1 || m.calls[0].Node != 3 {
		t.Errorf("mapper calls = %+v, want one for node 3", m.calls)
	}

	// Only the error entry, with a host: blanked.
	r.Coordinators = r.Coordinators[:1]
	r.Coordinators[0].Host, r.Coordinators[0].Port = upstreamHost(7), upstreamPort(7)
	out, changed, err = Response(10, 4, r.AppendTo(nil), &testMapper{})
	if err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	assertNoLeak(t, out)

	// v0-3 with the error and no host: input back untouched.
	r0 := kmsg.NewPtrFindCoordinatorResponse()
	r0.Version, r0.ErrorCode, r0.NodeID, r0.Host, r0.Port = 2, 15, -1, "", -1
	in = r0.AppendTo(nil)
	out, changed, err = Response(10, 2, in, &testMapper{})
	if err != nil || changed || !sameSlice(out, in) {
		t.Errorf("v2 error answer: changed=%v err=%v same=%v", changed, err, sameSlice(out, in))
	}
}

// TestHiddenEndpoints checks what each response does with an endpoint the
// Mapper hides (ok=false): see the package comment.
func TestHiddenEndpoints(t *testing.T) {
	hideAll := func(k EndpointKind) *testMapper {
		h := map[int32]bool{}
		for n := int32(-1); n < 100; n++ {
			h[n] = true
		}
		return &testMapper{hide: map[EndpointKind]map[int32]bool{k: h}}
	}
	for _, c := range rwCases() {
		v := wire.MaxVersion(c.key)
		if c.name == "FindCoordinatorError" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			in := c.build(v).AppendTo(nil)
			out, changed, err := Response(c.key, v, in, hideAll(c.kind))
			if err != nil || !changed {
				t.Fatalf("changed=%v err=%v", changed, err)
			}
			assertNoLeak(t, out)
			got, err := decode(c.key, v, out)
			if err != nil {
				t.Fatal(err)
			}
			var hosts []string
			walkEndpoints(reflect.ValueOf(got), -1, func(s reflect.Value, _ int32) {
				h, _, _ := endpointFields(s)
				hosts = append(hosts, h.String())
			})
			switch r := got.(type) {
			case *kmsg.MetadataResponse:
				assertNoNodes(t, r.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.Host == "" && b.Port == -1 }, 2)
			case *kmsg.DescribeClusterResponse:
				if r.EndpointType == 2 {
					assertNoNodes(t, r.Brokers, nil, 0)
				} else {
					assertNoNodes(t, r.Brokers, func(b kmsg.DescribeClusterResponseBroker) bool { return b.Host == "" && b.Port == -1 }, 2)
				}
			case *kmsg.FindCoordinatorResponse:
				for _, c := range r.Coordinators {
					if c.ErrorCode != errCoordinatorNotAvailable || c.NodeID != -1 || c.Host != "" || c.ErrorMessage == nil {
						t.Errorf("hidden coordinator answered %+v, want COORDINATOR_NOT_AVAILABLE", c)
					}
				}
			case *kmsg.ProduceResponse:
				assertNoNodes(t, r.Brokers, nil, 0)
			case *kmsg.FetchResponse:
				assertNoNodes(t, r.Brokers, nil, 0)
			case *kmsg.ShareFetchResponse:
				assertNoNodes(t, r.NodeEndpoints, nil, 0)
			case *kmsg.ShareAcknowledgeResponse:
				assertNoNodes(t, r.NodeEndpoints, nil, 0)
			case *kmsg.DescribeQuorumResponse:
				if len(r.Nodes) != 2 {
					t.Errorf("nodes removed: %d left", len(r.Nodes))
				}
				for _, n := range r.Nodes {
					assertNoNodes(t, n.Listeners, nil, 0)
				}
			case *kmsg.UpdateRaftVoterResponse:
				if l := r.CurrentLeader; l.Host != "" || l.Port != 0 || l.LeaderID <= 0 {
					t.Errorf("hidden leader = %+v, want id kept and no address", l)
				}
			default:
				if len(hosts) != 0 {
					t.Errorf("hidden controller endpoints kept: %v", hosts)
				}
			}
		})
	}
}

// assertNoNodes checks a node list after hiding: want entries left, each
// satisfying ok (nil: any).
func assertNoNodes[T any](t *testing.T, s []T, ok func(T) bool, want int) {
	t.Helper()
	if len(s) != want {
		t.Errorf("%d entries left, want %d: %+v", len(s), want, s)
	}
	for _, e := range s {
		if ok != nil && !ok(e) {
			t.Errorf("hidden entry %+v", e)
		}
	}
}

func TestBadControllerPort(t *testing.T) {
	r := kmsg.NewPtrDescribeQuorumResponse()
	r.Version = 2
	r.Nodes = []kmsg.DescribeQuorumResponseNode{{NodeID: 1, Listeners: []kmsg.DescribeQuorumResponseNodeListener{{Name: "CONTROLLER", Host: upstreamHost(1), Port: 9093}}}}
	_, _, err := Response(55, 2, r.AppendTo(nil), badPortMapper{})
	if !errors.Is(err, ErrBadMapping) {
		t.Fatalf("err = %v, want ErrBadMapping", err)
	}
}

type badPortMapper struct{}

func (badPortMapper) Advertise(EndpointKind, int32, string, int32) (string, int32, bool) {
	return "gw", 70000, true
}

// TestMapperHostDoesNotAlias: the host a Mapper is shown must stay valid
// after the caller reuses the body buffer.
func TestMapperHostDoesNotAlias(t *testing.T) {
	in := rwCase{key: 3}.build(12).AppendTo(nil)
	m := &testMapper{}
	if _, _, err := Response(3, 12, in, m); err != nil {
		t.Fatal(err)
	}
	clear(in)
	for _, c := range m.calls {
		if c.Host != upstreamHost(c.Node) {
			t.Fatalf("recorded host %q changed with the body buffer", c.Host)
		}
	}
}

// TestPrecheckCoversKmsgMax fails when a kmsg upgrade adds a Produce or
// Fetch version: the hand-written walk (precheck.go) must be checked
// against the new layout, and its table extended, before it covers it.
// Until then such versions take the kmsg decode path, which is correct but
// slower.
func TestPrecheckCoversKmsgMax(t *testing.T) {
	if m := wire.MaxVersion(0); m != precheckProduceMax {
		t.Errorf("kmsg Produce max is v%d, the pre-check was written for v%d", m, precheckProduceMax)
	}
	if m := wire.MaxVersion(1); m != precheckFetchMax {
		t.Errorf("kmsg Fetch max is v%d, the pre-check was written for v%d", m, precheckFetchMax)
	}
	// Every version the walk claims must agree with kmsg on a body with
	// and without endpoints.
	for _, c := range rwCases()[:2] {
		for v := int16(0); v <= wire.MaxVersion(c.key); v++ {
			with := c.build(v).AppendTo(nil)
			if withoutEndpoints(c.key, v, with) {
				t.Errorf("%s v%d: pre-check missed the endpoints", c.name, v)
			}
			r := fetchless(kmsg.ResponseForKey(c.key))
			r.SetVersion(v)
			flexible := (c.key == 0 && v >= 9) || (c.key == 1 && v >= 12)
			if got := withoutEndpoints(c.key, v, r.AppendTo(nil)); got != flexible {
				t.Errorf("%s v%d without endpoints: pre-check says %v, want %v", c.name, v, got, flexible)
			}
		}
	}
}
