package apis

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEveryKmsgKey walks every key kmsg knows and fails on one the table
// lacks, or a row out of place.
func TestEveryKmsgKey(t *testing.T) {
	for k := int16(0); k <= kmsg.MaxKey+8; k++ {
		req := kmsg.RequestForKey(k)
		if req == nil {
			if Of(k).Known {
				t.Errorf("key %d: the table knows it, kmsg does not", k)
			}
			continue
		}
		in := Of(k)
		if in.Key != k || !in.Known {
			t.Fatalf("key %d (%s): no row in table.go (found row for key %d); add one", k, kmsg.NameForKey(k), in.Key)
		}
		if in.Routing == RouteUnknown {
			t.Errorf("%s: no routing class", in.Name)
		}
		if in.DenyCode == 0 {
			t.Errorf("%s: no deny code", in.Name)
		}
	}
	if got := Of(-1); got.Known || got.Routing != RouteUnknown || got.Name != "Unknown" {
		t.Errorf("Of(-1) = %+v", got)
	}
}

// TestRoutingAgreesWithKmsgMarkers checks the hand-written classes
// against kmsg's own markers.
func TestRoutingAgreesWithKmsgMarkers(t *testing.T) {
	for _, in := range All() {
		switch {
		case in.KmsgGroupCoordinator && in.Routing != GroupCoordinator:
			t.Errorf("%s: kmsg marks it a group coordinator request, the table says %s", in.Name, in.Routing)
		case in.KmsgTxnCoordinator && in.Routing != TxnCoordinator:
			t.Errorf("%s: kmsg marks it a transaction coordinator request, the table says %s", in.Name, in.Routing)
		case in.KmsgAdmin && in.Routing != Controller && in.Routing != Internal:
			t.Errorf("%s: kmsg marks it an admin (controller) request, the table says %s", in.Name, in.Routing)
		}
	}
}

// notEndpoints are responses with a Host field that is not an address a
// client connects to (docs/protocol.md §1.2).
var notEndpoints = map[int16]bool{DescribeACLs: true, CreateACLs: true, DeleteACLs: true, StreamsGroupHeartbeat: true, StreamsGroupDescribe: true}

// TestEndpointsMatchKmsgTypes finds every response type of kmsg with a
// Host field anywhere and checks that the table says its responses carry
// endpoints (or that docs/protocol.md §1.2 says they are not endpoints).
func TestEndpointsMatchKmsgTypes(t *testing.T) {
	for _, in := range All() {
		resp := kmsg.ResponseForKey(in.Key)
		has := hasHost(reflect.TypeOf(resp).Elem(), map[reflect.Type]bool{})
		switch {
		case has && in.EndpointsFrom < 0 && !notEndpoints[in.Key]:
			t.Errorf("%s: the response has a Host field but the table lists no endpoints", in.Name)
		case !has && in.EndpointsFrom >= 0:
			t.Errorf("%s: the table lists endpoints but the response has no Host field", in.Name)
		}
	}
}

func hasHost(t reflect.Type, seen map[reflect.Type]bool) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return false
	}
	seen[t] = true
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Name == "Host" || hasHost(f.Type, seen) {
			return true
		}
	}
	return false
}

// TestKnownFacts pins facts docs/protocol.md states.
func TestKnownFacts(t *testing.T) {
	for _, c := range []struct {
		key   int16
		since int16
	}{{Produce, 6}, {Fetch, 8}, {Metadata, 6}, {OffsetCommit, 4}, {ApiVersions, 2}, {SASLHandshake, NoThrottleField}} {
		if got := Of(c.key).KIP219Since; got != c.since {
			t.Errorf("%s: KIP-219 since %d, want %d", Name(c.key), got, c.since)
		}
	}
	if AppliesAfterResponse(Produce, 5) || !AppliesAfterResponse(Produce, 6) || !AppliesAfterResponse(-3, 0) {
		t.Error("AppliesAfterResponse disagrees with the Produce v6 switch")
	}
	for _, k := range []int16{ApiVersions, SASLHandshake, SASLAuthenticate} {
		if !Of(k).PreAuth {
			t.Errorf("%s must pass before authentication", Name(k))
		}
	}
	if n := 0; true {
		for _, in := range All() {
			if in.PreAuth {
				n++
			}
		}
		if n != 3 {
			t.Errorf("%d pre-auth keys, want 3", n)
		}
	}
	if off, ok := HasTopLevelError(FindCoordinator, 3); !ok || off != 4 {
		t.Errorf("FindCoordinator v3: top-level error at %d %v, want 4 true", off, ok)
	}
	if _, ok := HasTopLevelError(FindCoordinator, 4); ok {
		t.Error("FindCoordinator v4 reports per coordinator")
	}
	for _, k := range []int16{ShareFetch, ShareAcknowledge} { // throttle_time_ms, then error_code, from v0 (KIP-932)
		if off, ok := HasTopLevelError(k, 1); !ok || off != 4 {
			t.Errorf("%s v1: top-level error at %d %v, want 4 true", Name(k), off, ok)
		}
	}
	if got := Keys(ProduceAPIs); !reflect.DeepEqual(got, []int16{Produce, InitProducerID}) {
		t.Errorf("produce group = %v", got)
	}
	if !EndpointsAt(Fetch, 12) || EndpointsAt(Fetch, 11) || EndpointsAt(ApiVersions, 4) {
		t.Error("EndpointsAt disagrees with the table")
	}
}
