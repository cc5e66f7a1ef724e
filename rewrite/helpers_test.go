package rewrite

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Upstream addresses in test responses are distinctive, so that a leak is a
// byte search: every upstream host ends in leakMarker and every upstream
// port is upstreamPortBase+node.
const (
	leakMarker       = "leak.invalid"
	upstreamPortBase = 40000
)

func upstreamHost(node int32) string { return fmt.Sprintf("up%d.%s", node, leakMarker) }
func upstreamPort(node int32) int32  { return upstreamPortBase + node }
func gwHost(node int32) string       { return fmt.Sprintf("gw%d.tollgate.test", node) }
func gwPort(node int32) int32        { return 7000 + node }

// call is one Advertise call a testMapper saw.
type call struct {
	Kind EndpointKind
	Node int32
	Host string
	Port int32
}

// testMapper maps node n to gwHost(n):gwPort(n) and hides the nodes in
// hide (per kind). It records every call.
type testMapper struct {
	mu      sync.Mutex
	hide    map[EndpointKind]map[int32]bool
	hideOdd bool // hide every odd node id, of any kind
	calls   []call
}

func (m *testMapper) Advertise(kind EndpointKind, node int32, host string, port int32) (string, int32, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, call{kind, node, host, port})
	if m.hide[kind][node] || (m.hideOdd && node%2 != 0) {
		return "", 0, false
	}
	return gwHost(node), gwPort(node), true
}

// fill sets every exported field of the value v points to, recursively, to
// a distinct deterministic value: numbers count up from 1 (kept below 100 so
// they fit any field and never look like an upstream port), strings are
// "s<n>", slices get two elements, pointers are allocated. Version and the
// opaque kmsg.Tags are left alone.
func fill(v reflect.Value, n *int) {
	next := func() int { *n++; return *n%97 + 1 }
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[kmsg.Tags]() {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Name == "Version" {
				continue
			}
			fill(v.Field(i), n)
		}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(next()))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(next()))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", next()))
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), n)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fill(v.Index(i), n)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := 0; i < v.Len(); i++ {
			fill(v.Index(i), n)
		}
	}
}

// endpointFields returns the host and port fields of a struct that carries
// an endpoint, and whether it does.
func endpointFields(v reflect.Value) (host, port reflect.Value, ok bool) {
	host, port = v.FieldByName("Host"), v.FieldByName("Port")
	if !host.IsValid() || !port.IsValid() || host.Kind() != reflect.String {
		return host, port, false
	}
	return host, port, true
}

// nodeOf returns the node id a struct names (NodeID, or LeaderID for
// UpdateRaftVoter's CurrentLeader), or inherited when it names none (the
// DescribeQuorum listeners sit under their node).
func nodeOf(v reflect.Value, inherited int32) int32 {
	for _, name := range []string{"NodeID", "LeaderID"} {
		if f := v.FieldByName(name); f.IsValid() && f.Kind() == reflect.Int32 {
			return int32(f.Int())
		}
	}
	return inherited
}

// walkEndpoints calls fn for every struct under v that carries an endpoint,
// with the node it belongs to.
func walkEndpoints(v reflect.Value, node int32, fn func(s reflect.Value, node int32)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			walkEndpoints(v.Elem(), node, fn)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			walkEndpoints(v.Index(i), node, fn)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[kmsg.Tags]() {
			return
		}
		node = nodeOf(v, node)
		if _, _, ok := endpointFields(v); ok {
			fn(v, node)
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				walkEndpoints(v.Field(i), node, fn)
			}
		}
	}
}

// setUpstream gives every endpoint under resp its node's upstream address.
func setUpstream(resp kmsg.Response) {
	walkEndpoints(reflect.ValueOf(resp), -1, func(s reflect.Value, node int32) {
		host, port, _ := endpointFields(s)
		host.SetString(upstreamHost(node))
		switch port.Kind() {
		case reflect.Int32:
			port.SetInt(int64(upstreamPort(node)))
		case reflect.Uint16:
			port.SetUint(uint64(upstreamPort(node)))
		}
	})
}

// expectMapped is the test's independent statement of the rewrite: every
// endpoint that names a host, has no error and a node id >= 0 gets the
// node's gateway address. It knows nothing of keys; cases that hide
// endpoints are tested separately.
func expectMapped(resp kmsg.Response) {
	walkEndpoints(reflect.ValueOf(resp), -1, func(s reflect.Value, node int32) {
		host, port, _ := endpointFields(s)
		if host.String() == "" || node < 0 {
			return
		}
		if ec := s.FieldByName("ErrorCode"); ec.IsValid() && ec.Int() != 0 {
			return
		}
		host.SetString(gwHost(node))
		switch port.Kind() {
		case reflect.Int32:
			port.SetInt(int64(gwPort(node)))
		case reflect.Uint16:
			port.SetUint(uint64(gwPort(node)))
		}
	})
}

// decode decodes body as a key response at version.
func decode(key, version int16, body []byte) (kmsg.Response, error) {
	r := kmsg.ResponseForKey(key)
	r.SetVersion(version)
	return r, r.ReadFrom(body)
}

// sameSlice reports whether a and b are the same slice (same array, same
// length): the "returned the input itself" check.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
