package proxy

import (
	"slices"
	"sync"

	"github.com/tollgate-kafka/tollgate/audit"
)

// routeTrace collects the upstream brokers one routed request reached —
// those that answered a part, or, for a Produce with acks=0, those a part
// was written to — for the request's audit record (audit.Record
// UpstreamNodes). A request the gateway answers itself (FindCoordinator,
// or a coordinator lookup that failed) reaches none.
//
// Ownership: made by the route stage per audited request (none when the
// audit trail does not record it, so routing then allocates nothing for
// it) and handed to the request's gather while route runs
// (tunnel.trace); add is called from the brokerConn readers, note by
// whoever delivers the answer, before the answer goes to the write side
// (which logs the record after it).
type routeTrace struct {
	mu    sync.Mutex
	nodes []int32
}

// add records node once. A nil trace records nothing.
func (tr *routeTrace) add(node int32) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if !slices.Contains(tr.nodes, node) {
		tr.nodes = append(tr.nodes, node)
	}
}

// note writes the brokers reached, sorted, into rec. A nil trace or
// record (the audit trail does not want this request) notes nothing.
func (tr *routeTrace) note(rec *audit.Record) {
	if tr == nil || rec == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.nodes) > 0 {
		rec.UpstreamNodes = slices.Sorted(slices.Values(tr.nodes))
	}
}
