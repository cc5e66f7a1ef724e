package proxy

import (
	"errors"
	"os"

	"github.com/tollgate-kafka/tollgate/wire"
)

// backendCloseReason labels a connection the backend's answer ends. A
// request the built-in broker could not decode, or a key or version it
// does not serve, is the client's doing: it is counted in
// tollgate_malformed_frames_total and labelled as such, so an alert on
// backend errors does not fire on a hostile client.
func (s *session) backendCloseReason(err error) closeReason {
	switch {
	case errors.Is(err, wire.ErrMalformedRequest):
		s.hooks.Malformed("bad_body")
		return closeMalformed
	case errors.Is(err, wire.ErrUnsupportedRequest):
		s.hooks.Malformed("unsupported_key")
		return closeUnsupported
	case s.local != nil:
		return closeBackendError
	}
	return closeUpstreamError
}

// writeCloseReason is classifyWriteErr with backend failures labelled by
// backendCloseReason.
//
// A deadline on the write side is the client's: the write loop's only
// deadline is the client's write deadline (the upstream socket has none),
// yet a splice from the upstream to the client reports its write side's
// timeout without saying which side it was, and the Fetch stream then
// blames the upstream. A client that stops reading is its own doing, so it
// must not count as an upstream failure (nor reset the connection as one).
func (s *session) writeCloseReason(err error) closeReason {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return closeWriteTimeout
	}
	var be *backendError
	if errors.As(err, &be) {
		return s.backendCloseReason(be.err)
	}
	return classifyWriteErr(err)
}
