// Package audit is tollgate's audit trail: one structured JSON record per
// request, and one per connection open and close, written to a sink
// (stdout or a size-rotated file) through a bounded queue, and streamed
// live to subscribers (the admin server's /tap).
//
// The package is pure with respect to the gateway: the proxy builds a
// Record from what it knows (header, identity, decision, timing), asks
// Describe to fill the body-level details when the level is full, and
// hands the record to Trail.Log. Nothing here reads a socket.
//
// How the gateway uses it, per request:
//
//	if trail.Wants(listener, key, clientID) {            // header pre-check, no allocation
//		if trail.Strict() && trail.Healthy() != nil { ... refuse: answer with an error, do not forward }
//		rec := &audit.Record{Time: ..., Event: audit.EventRequest, ...header and identity...}
//		... forward, get the response ...
//		if trail.Level() == audit.Full { audit.Describe(rec, decodedReq, decodedResp, topicNames) }
//		rec.Decision, rec.LatencyMs, rec.BytesIn, rec.BytesOut, rec.Backend = ...
//		if err := trail.Log(rec); err != nil { ... strict: the sink failed meanwhile; refuse what comes next }
//	}
//
// and once per connection, a connect record at accept and a disconnect
// record (with CloseReason) at close. In strict mode a record accepted by
// Log is never dropped: a failing sink is retried until it recovers (or
// the trail is closed), so checking Healthy before forwarding and logging
// after the response means no forwarded request goes unaudited.
//
// Ownership: a Record handed to Trail.Log belongs to the trail from then
// on and is shared, read-only, by the sink writer and every subscriber.
// The caller must not change it after Log, and subscribers must not
// change what they receive.
package audit

import (
	"encoding/json"
	"time"
)

// Event values.
const (
	EventRequest    = "request"
	EventConnect    = "connect"
	EventDisconnect = "disconnect"
)

// Decision values.
const (
	Forwarded = "forwarded" // sent to the backend
	Denied    = "denied"    // refused by a policy rule, answered with an error
	Throttled = "throttled" // forwarded after (or answered with) a throttle delay
	Answered  = "answered"  // answered by the gateway itself (ApiVersions, a refusal)
)

// Record is one audit record. JSON field names are snake_case and empty
// fields are left out, except that a request record always carries
// api, key, version and correlation (key 0 is Produce).
type Record struct {
	Time     time.Time `json:"time"`
	Event    string    `json:"event"`
	ConnID   uint64    `json:"conn_id,omitempty"`
	Listener string    `json:"listener,omitempty"`
	// VirtualCluster is the session's virtual cluster (one of the
	// configured names; empty for the plain cluster).
	VirtualCluster  string `json:"virtual_cluster,omitempty"`
	ClientAddr      string `json:"client_addr,omitempty"`
	TLSSubject      string `json:"tls_subject,omitempty"`
	Principal       string `json:"principal,omitempty"`
	ClientID        string `json:"client_id,omitempty"`
	SoftwareName    string `json:"software_name,omitempty"`
	SoftwareVersion string `json:"software_version,omitempty"`

	API         string `json:"api,omitempty"`
	Key         int16  `json:"key"`
	Version     int16  `json:"version"`
	Correlation int32  `json:"correlation"`

	Topics          []Topic  `json:"topics,omitempty"`
	Resources       []string `json:"resources,omitempty"`
	Group           string   `json:"group,omitempty"`
	TransactionalID string   `json:"transactional_id,omitempty"`
	Acks            *int16   `json:"acks,omitempty"`

	Decision   string  `json:"decision,omitempty"`
	ThrottleMs int64   `json:"throttle_ms,omitempty"`
	Rule       string  `json:"rule,omitempty"`
	ErrorCodes []int16 `json:"error_codes,omitempty"` // distinct, non-zero, in order of appearance

	LatencyMs float64 `json:"latency_ms,omitempty"`
	BytesIn   int     `json:"bytes_in,omitempty"`
	BytesOut  int     `json:"bytes_out,omitempty"`
	Backend   string  `json:"backend,omitempty"`
	// UpstreamNodes are the real upstream broker ids a request routed by
	// a single-port listener reached, sorted (empty when the gateway
	// answered it itself, and on every other listener).
	UpstreamNodes []int32 `json:"upstream_nodes,omitempty"`
	CloseReason   string  `json:"close_reason,omitempty"`
}

// Topic is one topic a request touched.
type Topic struct {
	Name       string      `json:"name"`
	Partitions []Partition `json:"partitions,omitempty"`
}

// NoOffset marks a Partition without an offset (offset 0 is a real one).
const NoOffset = -1

// Partition is one partition a request touched. For Produce, Records and
// Bytes are what the client sent and Offset is the base offset the
// backend assigned; for Fetch, Offset is the requested fetch offset and
// Bytes and Records are what the response returned.
type Partition struct {
	Partition int32 `json:"partition"`
	Records   int   `json:"records,omitempty"`
	Bytes     int   `json:"bytes,omitempty"`
	Offset    int64 `json:"offset"` // NoOffset when unknown; left out of the JSON then
	ErrorCode int16 `json:"error_code,omitempty"`
}

// UnmarshalJSON reads a partition, defaulting Offset to NoOffset when the
// record has none.
func (p *Partition) UnmarshalJSON(b []byte) error {
	type plain Partition
	q := plain{Offset: NoOffset}
	if err := json.Unmarshal(b, &q); err != nil {
		return err
	}
	*p = Partition(q)
	return nil
}

// MarshalJSON writes the record as AppendJSON does.
func (r *Record) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil, true), nil }

// IsRequest reports whether the record is about a request (rather than a
// connection open or close).
func (r *Record) IsRequest() bool { return r.Event == EventRequest || r.Event == "" }

// addErrorCode records a non-zero code once.
func (r *Record) addErrorCode(c int16) {
	if c == 0 {
		return
	}
	for _, e := range r.ErrorCodes {
		if e == c {
			return
		}
	}
	r.ErrorCodes = append(r.ErrorCodes, c)
}
