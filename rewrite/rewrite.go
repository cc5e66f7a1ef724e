// Package rewrite holds the pure response transforms of the gateway: every
// response that carries an address a client may connect to is rewritten so
// that no client ever learns an upstream host:port, and the ApiVersions
// response is clamped to what the gateway can decode.
//
// Node ids stay 1:1; only Host and Port change (docs/protocol.md §1.1). Every
// other node-id field (leaders, replicas, controller id, preferred read
// replica) therefore stays valid untouched.
//
// The package imports kmsg for the protocol types and never the proxy: the
// proxy hands it an encoded body and a Mapper, and gets a body back.
//
// # Which responses carry addresses
//
// Client-facing (docs/protocol.md §1.1), kind Broker unless noted:
//
//   - Metadata (3), every version: Brokers.
//   - FindCoordinator (10): the top-level node in v0–3, Coordinators in v4+;
//     only entries with ErrorCode 0 and NodeID >= 0 (an error entry is
//     Kafka's Node.noNode: -1, "", -1).
//   - DescribeCluster (60): Brokers; with EndpointType 2 the entries are
//     KRaft controllers (KIP-919) and are mapped with kind Controller.
//   - Produce (0) and Fetch (1): the KIP-951 NodeEndpoints (tag 0).
//   - ShareFetch (78) and ShareAcknowledge (79): NodeEndpoints (regular field).
//   - DescribeQuorum (55) v2+ (KIP-853): Nodes[].Listeners, kind Controller.
//
// Not in docs/protocol.md §1.1's table, found by a grep of kmsg generated.go for Host/Port
// fields in response types; handled as kind Controller for defence in depth
// (DESIGN.md, principle 2). These are KRaft controller-to-controller RPCs whose
// responses a broker listener never sends, but a gateway in front of a
// controller quorum would otherwise pass them on verbatim:
//
//   - Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54) and
//     FetchSnapshot (59): NodeEndpoints (tag 0, KIP-853).
//   - UpdateRaftVoter (82): CurrentLeader{Host, Port} (tag 0).
//
// Deliberately left alone (docs/protocol.md §1.2): ACL host patterns, Kafka
// Streams application endpoints (StreamsGroupHeartbeat/Describe UserEndpoint),
// ClientHost fields, and request-only listener lists.
//
// # When the Mapper hides an endpoint (ok=false)
//
//   - Controller endpoints are removed from their list (DescribeQuorum
//     listeners, DescribeCluster controllers, the raft RPC NodeEndpoints);
//     UpdateRaftVoter's single CurrentLeader keeps its leader id and epoch but
//     gets Host "" and Port 0, the schema's "absent" defaults.
//   - Broker endpoints in Metadata and DescribeCluster keep the node (so leader
//     and replica ids still resolve) but get Host "" and Port -1, the encoding
//     of Kafka's Node.noNode: a client cannot connect to it and backs off,
//     and the upstream host never leaves the gateway.
//   - A FindCoordinator answer for a hidden node becomes
//     COORDINATOR_NOT_AVAILABLE (15) with NodeID -1, Host "", Port -1: every
//     client retries FindCoordinator on that retriable error.
//   - KIP-951 NodeEndpoints (Produce, Fetch, ShareFetch, ShareAcknowledge) are
//     removed: they are optional hints, and a client that does not find the
//     new leader's endpoint refreshes Metadata instead. Keeping an empty
//     endpoint there would overwrite a good node in the client's cache.
//
// An endpoint with an empty host names nothing and is not shown to the
// Mapper. A FindCoordinator entry with an error or a negative node id is not
// shown either; should it carry a host anyway (Kafka sends Node.noNode), the
// host is blanked rather than passed on.
//
// # Hot path
//
// Produce and Fetch responses are walked by a small hand-written reader
// (precheck.go) that proves the absence of the NodeEndpoints tag without
// decoding; only responses that carry the tag are decoded with kmsg and
// re-encoded. Every other response that Needs reports is decoded with kmsg.
package rewrite

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/wire"
)

// EndpointKind tells a Mapper what kind of endpoint it is shown.
type EndpointKind int

const (
	// Broker is a broker endpoint clients connect to.
	Broker EndpointKind = iota
	// Controller is a KRaft controller listener (DescribeQuorum,
	// DescribeCluster with EndpointType 2, the raft RPCs).
	Controller
)

// String names the kind for logs.
func (k EndpointKind) String() string {
	switch k {
	case Broker:
		return "broker"
	case Controller:
		return "controller"
	}
	return fmt.Sprintf("EndpointKind(%d)", int(k))
}

// Mapper supplies the gateway address for an upstream endpoint. The proxy's
// implementation records the upstream address of every Broker node it is shown.
//
// The strings passed to Advertise are the Mapper's to keep: they never alias
// the response body.
type Mapper interface {
	// Advertise returns the host/port clients must use for node, given what
	// the upstream sent. ok=false means the endpoint must not be shown at all
	// (the rewriter removes it — e.g. a controller the gateway does not serve).
	Advertise(kind EndpointKind, node int32, upstreamHost string, upstreamPort int32) (host string, port int32, ok bool)
}

// Errors a caller branches on. Every error from this package wraps one of them.
var (
	// ErrUnknownVersion means the response is at a version kmsg cannot
	// decode, so its addresses cannot be rewritten. The caller must close
	// the connection rather than forward the body (DESIGN invariant 3).
	ErrUnknownVersion = errors.New("response version is newer than this build can rewrite")
	// ErrMalformed means the body does not decode at the version it was
	// sent for.
	ErrMalformed = errors.New("malformed response body")
	// ErrBadMapping means the Mapper returned an address that the field
	// cannot hold (a port outside 0..65535 for a uint16 port field).
	ErrBadMapping = errors.New("mapper returned an address the response cannot carry")
)

// Which versions of which keys may carry an address is the API table's
// (apis.Info.EndpointsFrom). Versions above kmsg's max also report true:
// they may carry addresses, and Response refuses them.
//
// Produce and Fetch start at their first flexible version (9 and 12), not at
// the KIP-951 versions (10 and 16): kmsg reads and writes the NodeEndpoints
// tag at every flexible version (docs/protocol.md §1.1, "kmsg emits the tag
// early"), so a kmsg-based client would use a tag 0 sent at Produce v9.

// Needs reports whether responses of key at version may carry an address
// (so the proxy must decode them). It is a table lookup and never allocates.
func Needs(key, version int16) bool { return apis.EndpointsAt(key, version) }

// needsAnyVersion reports whether any version of key may carry an address;
// the ApiVersions clamp caps these keys at kmsg's max.
func needsAnyVersion(key int16) bool {
	return apis.Of(key).EndpointsFrom >= 0
}

// Response rewrites an encoded response body (after the response header) of
// key at version. It returns the (possibly new) body and whether anything
// changed. When nothing needs changing it returns the input slice itself:
// a Fetch response that carries no NodeEndpoints is passed on as is, records
// untouched. Versions above kmsg's max cannot be rewritten: it returns an
// error wrapping ErrUnknownVersion so the caller closes the connection.
//
// A new body never aliases the input, so the caller may reuse the input
// buffer once the new body is written.
func Response(key, version int16, body []byte, m Mapper) ([]byte, bool, error) {
	if !Needs(key, version) {
		return body, false, nil
	}
	if !wire.KnownVersion(key, version) {
		return nil, false, fmt.Errorf("rewrite key %d v%d (max %d): %w", key, version, wire.MaxVersion(key), ErrUnknownVersion)
	}
	// Hot path: most Produce and Fetch responses carry no endpoints, and
	// a walk over the body proves it without decoding (precheck.go).
	if (key == apis.Produce || key == apis.Fetch) && withoutEndpoints(key, version, body) {
		return body, false, nil
	}
	if m == nil {
		return nil, false, fmt.Errorf("rewrite %s v%d response: %w: no Mapper", kmsg.NameForKey(key), version, ErrBadMapping)
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := readUnsafe(resp, body); err != nil {
		return nil, false, fmt.Errorf("decode %s v%d response: %w: %w", kmsg.NameForKey(key), version, ErrMalformed, err)
	}
	p := pass{m: m}
	if err := p.apply(resp); err != nil {
		return nil, false, fmt.Errorf("rewrite %s v%d response: %w", kmsg.NameForKey(key), version, err)
	}
	if !p.changed {
		return body, false, nil
	}
	// Hosts usually shrink or grow by a few bytes per endpoint; the slack
	// avoids a second grow in AppendTo for the common case.
	return resp.AppendTo(make([]byte, 0, len(body)+64)), true, nil
}

// readUnsafe decodes with UnsafeReadFrom, which aliases strings into body
// instead of copying them: resp never outlives Response, and the strings
// handed to the Mapper are cloned (pass.advertise). Every generated kmsg
// response has the method; the fallback only keeps this panic-free.
func readUnsafe(resp kmsg.Response, body []byte) error {
	if u, ok := resp.(kmsg.UnsafeReadFrom); ok {
		return u.UnsafeReadFrom(body)
	}
	return resp.ReadFrom(body)
}

// pass is one rewrite of one response: the Mapper and whether any field
// changed so far.
type pass struct {
	m       Mapper
	changed bool
}

// advertise asks the Mapper about one endpoint. The host is cloned because
// it aliases the response body (UnsafeReadFrom) and the Mapper may keep it.
func (p *pass) advertise(kind EndpointKind, node int32, host string, port int32) (string, int32, bool) {
	return p.m.Advertise(kind, node, strings.Clone(host), port)
}

// endpoint rewrites an int32-port endpoint in place. It returns false when
// the Mapper hides it; the caller decides what hiding means for its field.
//
// An endpoint with an empty host names no address and is kept as is: it is
// Kafka's Node.noNode ("", -1), or an entry whose fields do not exist at this
// version (kmsg writes the raft NodeEndpoints tag at v0, where the entries'
// fields are v1+, so they decode as "", 0).
func (p *pass) endpoint(kind EndpointKind, node int32, host *string, port *int32) bool {
	if *host == "" {
		return true
	}
	h, pt, ok := p.advertise(kind, node, *host, *port)
	if !ok {
		p.changed = true
		return false
	}
	if h != *host || pt != *port {
		*host, *port = h, pt
		p.changed = true
	}
	return true
}

// endpoint16 is endpoint for the uint16 ports of the KRaft schemas.
func (p *pass) endpoint16(kind EndpointKind, node int32, host *string, port *uint16) (bool, error) {
	if *host == "" {
		return true, nil
	}
	h, pt, ok := p.advertise(kind, node, *host, int32(*port))
	if !ok {
		p.changed = true
		return false, nil
	}
	if pt < 0 || pt > 0xffff {
		return false, fmt.Errorf("%w: node %d port %d does not fit a uint16", ErrBadMapping, node, pt)
	}
	if h != *host || uint16(pt) != *port {
		*host, *port = h, uint16(pt)
		p.changed = true
	}
	return true, nil
}

// brokerInPlace rewrites a broker endpoint that must stay in its list (node
// ids elsewhere refer to it). A hidden one becomes Kafka's Node.noNode
// address: Host "" and Port -1.
func (p *pass) brokerInPlace(node int32, host *string, port *int32) {
	if !p.endpoint(Broker, node, host, port) {
		*host, *port = "", -1
	}
}
