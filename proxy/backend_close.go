package proxy

import (
	"errors"

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
func (s *session) writeCloseReason(err error) closeReason {
	var be *backendError
	if errors.As(err, &be) {
		return s.backendCloseReason(be.err)
	}
	return classifyWriteErr(err)
}
