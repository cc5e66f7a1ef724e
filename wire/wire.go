// Package wire holds the Kafka framing primitives shared by the gateway
// (proxy) and the built-in broker: the size-prefixed frame, the request header
// prefix, the response header, and Body, an encoded response body that can
// write itself (possibly with sendfile).
//
// Nothing here decodes a request or response body; that is kmsg's job and is
// done only where a rule needs it (DESIGN.md, principle 1).
package wire

import (
	"errors"
	"io"

	"github.com/tollgate-kafka/tollgate/apis"
)

// Request is one client request as the gateway hands it to a backend.
//
// # Ownership
//
// This is the one rule between the gateway and a backend (the built-in
// broker today; any other backend learns it here), for both directions:
//
//   - Request.Body is handed over with the call that receives the Request
//     (proxy.LocalConn.Handle). The backend owns it from then on and may
//     keep it, or slices of it, after the call returns — except when
//     BodyReused(Key) reports true (Produce): that body is a pooled buffer
//     the gateway reuses as soon as the call returns, so nothing may
//     reference it (or the record batches decoded from it) afterwards.
//     The built-in broker appends a Produce's batches inside Handle.
//   - The response Body a backend passes on (Handle's done callback)
//     belongs to the gateway from then on. The gateway writes it at most
//     once. A Body that holds resources (a file range for sendfile)
//     implements Releaser: its WriteTo releases them, and the gateway
//     calls Release instead when it will not write the body (the
//     connection closed, a delay was cut short). Release after WriteTo,
//     or twice, must be harmless.
type Request struct {
	Key         int16
	Version     int16
	Correlation int32
	ClientID    *string // nil when the client sent a null client id
	// Body is the request body after the header (including the header's
	// tagged fields for flexible versions). See Ownership above.
	Body []byte
}

// BodyReused reports whether the gateway reuses the buffer of a request
// body of key once the backend's call returns (see Request, Ownership):
// true for Produce, whose bodies are pooled (one allocation per produce
// was a fifth of the built-in broker's produce CPU, in GC).
func BodyReused(key int16) bool { return key == apis.Produce }

// Releaser is a response Body that holds resources until it is written
// (see Request, Ownership).
type Releaser interface {
	Body
	// Release frees the resources of a body that will not be written.
	Release()
}

// Body is an encoded response body (everything after the response header).
// Len must be exact: the gateway writes the frame size before the body.
type Body interface {
	Len() int
	WriteTo(w io.Writer) (int64, error)
}

// Bytes is a Body held in memory.
type Bytes []byte

// Len returns the body length.
func (b Bytes) Len() int { return len(b) }

// WriteTo writes the body to w in one call.
func (b Bytes) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}

// Sentinels a backend wraps in the error it passes to done, so the gateway
// can tell a client's bad request from a backend failure (labels, metrics:
// a hostile client must not look like a broken backend).
var (
	// ErrMalformedRequest: the request body did not decode.
	ErrMalformedRequest = errors.New("malformed request")
	// ErrUnsupportedRequest: a key or version the backend does not serve.
	ErrUnsupportedRequest = errors.New("unsupported request key or version")
)

// FetchedPartition is what a Fetch response returned for one partition.
type FetchedPartition struct {
	Topic     string
	TopicID   [16]byte
	Partition int32
	ErrorCode int16
	Bytes     int // record batch bytes
	Records   int // records at or after the fetch offset
}

// FetchSummary is implemented by Fetch response bodies the gateway streams
// without decoding (the built-in broker's zero-copy body), so audit records
// and the tap can still say what each partition returned. It must be
// called before WriteTo.
type FetchSummary interface {
	Fetched() []FetchedPartition
}
