// Package apis is the one table of facts about Kafka API keys that the
// gateway needs: for every key kmsg knows, its name, the response fields
// that carry broker endpoints and node ids, what it is scoped to, where a
// per-request router sends it, its policy groups, whether it may pass
// before authentication, the error a broker refuses it with, its top-level
// error code, and the first version with KIP-219 throttling.
//
// What kmsg knows is derived from kmsg (names, versions, the AdminRequest,
// GroupCoordinatorRequest and TxnCoordinatorRequest markers, throttling);
// the rest is written once in table.go, from docs/protocol.md and Kafka's
// message JSON files. policy, audit, rewrite, proxy and configs read it;
// adding a key means adding its row (TestEveryKmsgKey fails until then).
//
// The table is immutable after package init: Of returns a pointer into it
// that callers must not modify.
package apis

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Routing is where a gateway that routes each request (or each partition
// of it) to an upstream broker sends requests of a key (docs/protocol.md
// §1.4).
type Routing uint8

const (
	// RouteUnknown is the class of a key the table has no row for.
	RouteUnknown Routing = iota
	// PartitionLeader: split by partition leader, merge per partition.
	PartitionLeader
	// GroupCoordinator: route by group id (split batched forms).
	GroupCoordinator
	// TxnCoordinator: route by transactional id.
	TxnCoordinator
	// AnyBroker: any one broker can answer.
	AnyBroker
	// Controller: a controller API (kmsg's AdminRequest marker); on KRaft
	// any broker forwards it to the active controller.
	Controller
	// FanOut: every broker, answers merged.
	FanOut
	// GatewayAnswered: the gateway answers itself (ApiVersions, SASL,
	// FindCoordinator for a single virtual node).
	GatewayAnswered
	// Internal: inter-broker and controller RPCs; refused.
	Internal
)

var routingNames = [...]string{"unknown", "partition-leader", "group-coordinator", "txn-coordinator", "any-broker", "controller", "fan-out", "gateway", "internal"}

func (r Routing) String() string {
	if int(r) < len(routingNames) {
		return routingNames[r]
	}
	return "unknown"
}

// Scope is the set of resource kinds a request of the key names.
type Scope uint8

const (
	TopicScoped Scope = 1 << iota
	GroupScoped
	TxnScoped // transactional id
)

// Group is a set of policy groups (configs Match.API names them).
type Group uint8

const (
	ProduceAPIs Group = 1 << iota
	ConsumeAPIs
	GroupAPIs
	TransactionAPIs
	// AdminAPIs is every key in no other group except Metadata,
	// ApiVersions, the SASL keys and client telemetry, which every client
	// sends.
	AdminAPIs
)

// GroupNames are the policy group names, in the order the configuration
// reference lists them.
var GroupNames = []string{"admin", "produce", "consume", "group", "transaction"}

var groupByName = map[string]Group{"admin": AdminAPIs, "produce": ProduceAPIs, "consume": ConsumeAPIs, "group": GroupAPIs, "transaction": TransactionAPIs}

// TopLevelError describes a response whose body starts with an int16
// error code for the whole request (after throttle_time_ms from version
// ThrottleFirstFrom on; -1: never).
type TopLevelError struct {
	ThrottleFirstFrom int16
	// Until, when non-zero, is the first version without a top-level
	// error (FindCoordinator v4+ reports per coordinator).
	Until int16
}

// Throttle-version sentinels of Info.KIP219Since.
const (
	NoThrottleField int16 = -1 // the response has no throttle_time_ms
	NeverAfter      int16 = -2 // it has one, but no version throttles after the response
)

// Info is the row of one key. Fields marked "from kmsg" are derived.
type Info struct {
	Key  int16
	Name string // from kmsg (kmsg.NameForKey), e.g. "InitProducerID"
	// Known: kmsg has request and response types for the key (from kmsg).
	Known bool
	// MaxVersion is kmsg's highest version (from kmsg); -1 when unknown.
	MaxVersion int16
	// Marker interfaces of kmsg's request type (from kmsg).
	KmsgAdmin, KmsgGroupCoordinator, KmsgTxnCoordinator bool

	Routing Routing
	Scope   Scope
	Groups  Group
	// PreAuth: allowed before SASL authentication completes
	// (docs/protocol.md §6); a default deny does not apply to it either.
	PreAuth bool
	// DenyCode is the error a broker uses when it refuses the key
	// outright (docs/protocol.md §4.1); request-dependent cases
	// (InitProducerId, FindCoordinator for a transactional id) are
	// policy's.
	DenyCode int16
	// EndpointsFrom is the first version whose responses may carry a
	// broker endpoint (docs/protocol.md §1.1); -1 for none. Endpoints
	// names the fields.
	EndpointsFrom int16
	Endpoints     string
	// NodeIDs names the node-id fields of the response
	// (docs/protocol.md §1.3).
	NodeIDs string
	// TopLevelError is nil when the response has no top-level error code
	// the gateway reads.
	TopLevelError *TopLevelError
	// ListsResources: audit records of the key list the resources it
	// touches (cluster administration rather than data or group traffic).
	ListsResources bool
	// GatewayVersions are the versions the gateway serves when it answers
	// the key itself (SASL termination); nil otherwise.
	GatewayVersions *[2]int16
	// KIP219Since is the first version whose client throttles itself
	// after the response (from kmsg ThrottleResponse), or NoThrottleField
	// or NeverAfter.
	KIP219Since int16
}

// unknown is the row of a key the table does not hold.
var unknown = Info{Name: "Unknown", MaxVersion: -1, EndpointsFrom: -1, DenyCode: kerr.ClusterAuthorizationFailed.Code, KIP219Since: NoThrottleField}

func init() {
	for i := range rows {
		derive(&rows[i])
	}
}

// derive fills a row's kmsg facts.
func derive(in *Info) {
	in.Name = kmsg.NameForKey(in.Key)
	in.MaxVersion = -1
	in.KIP219Since = NoThrottleField
	req, resp := kmsg.RequestForKey(in.Key), kmsg.ResponseForKey(in.Key)
	if req == nil || resp == nil {
		return
	}
	in.Known = true
	in.MaxVersion = req.MaxVersion()
	_, in.KmsgAdmin = req.(kmsg.AdminRequest)
	_, in.KmsgGroupCoordinator = req.(kmsg.GroupCoordinatorRequest)
	_, in.KmsgTxnCoordinator = req.(kmsg.TxnCoordinatorRequest)
	in.KIP219Since = kip219Since(resp, in.MaxVersion)
}

func kip219Since(resp kmsg.Response, max int16) int16 {
	tr, ok := resp.(kmsg.ThrottleResponse)
	if !ok {
		return NoThrottleField
	}
	for v := int16(0); v <= max; v++ {
		resp.SetVersion(v)
		if _, after := tr.Throttle(); after {
			return v
		}
	}
	return NeverAfter
}

// Of returns the row of key; a key the table does not hold (negative,
// beyond kmsg.MaxKey) gets a row with Known false and RouteUnknown. The
// result is shared: do not modify it.
func Of(key int16) *Info {
	if key >= 0 && int(key) < len(rows) {
		return &rows[key]
	}
	return &unknown
}

// All returns every row, in key order. The slice is shared: do not modify.
func All() []Info { return rows[:] }

// Keys returns the keys in group, in key order.
func Keys(g Group) []int16 {
	var out []int16
	for i := range rows {
		if rows[i].Groups&g != 0 {
			out = append(out, rows[i].Key)
		}
	}
	return out
}

// GroupByName returns the policy group named name ("admin", "produce",
// "consume", "group", "transaction"; lowercase, exactly).
func GroupByName(name string) (Group, bool) {
	g, ok := groupByName[name]
	return g, ok
}

// Name returns kmsg's name for key, or "Unknown".
func Name(key int16) string { return Of(key).Name }

// EndpointsAt reports whether responses of key at version may carry a
// broker endpoint. It never allocates.
func EndpointsAt(key, version int16) bool {
	from := Of(key).EndpointsFrom
	return from >= 0 && version >= from
}

// HasTopLevelError reports whether a response of key at version starts
// with a top-level error code, and the offset of that code in the body.
func HasTopLevelError(key, version int16) (off int, ok bool) {
	t := Of(key).TopLevelError
	if t == nil || (t.Until != 0 && version >= t.Until) {
		return 0, false
	}
	if t.ThrottleFirstFrom >= 0 && version >= t.ThrottleFirstFrom {
		return 4, true
	}
	return 0, true
}

// AppliesAfterResponse reports whether responses of key/version follow
// KIP-219 (send at once, then mute; docs/protocol.md §5). False means the
// throttle must be applied by delaying the response, as brokers before
// Kafka 2.0 did. Keys without a throttle field (SASL, inter-broker) and
// unknown keys report true: only muting can slow them.
func AppliesAfterResponse(key, version int16) bool {
	switch since := Of(key).KIP219Since; since {
	case NoThrottleField:
		return true
	case NeverAfter:
		return false
	default:
		return version >= since
	}
}

// MaxKnownKey is the highest key in the table.
const MaxKnownKey = int16(len(rows) - 1)
