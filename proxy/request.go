package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/rewrite"
	"github.com/tollgate-kafka/tollgate/wire"
)

// closeReason says why a connection ended; it labels logs (and, later,
// metrics), so the set is closed.
type closeReason int

const (
	closeNone             closeReason = iota
	closeClientEOF                    // the client closed the connection
	closeIdle                         // no request within the idle timeout
	closeShutdown                     // the gateway is shutting down
	closeMalformed                    // a frame or header the gateway cannot parse
	closeUnsupported                  // a key/version the gateway did not offer
	closeClientError                  // reading or writing the client failed
	closeUpstreamError                // dialing, reading or writing the upstream failed
	closeBackendError                 // the built-in broker failed the request
	closeDenied                       // policy denied a request that cannot be answered (acks=0)
	closeAuditUnavailable             // strict audit: the trail cannot record, so nothing is forwarded
	closeTLS                          // the TLS handshake failed
	closeAuthFailed                   // SASL authentication failed, or a request came before it
	closeAuthExpired                  // the SASL session expired without re-authentication (KIP-368)
	closeUpstreamReauth               // the gateway's own upstream SASL session is about to expire
	closeAuthRejected                 // SASL refused: stop reading, send the refusal, close
	closeOverloaded                   // the shared request memory budget stayed spent (body.go)
	closeNoVirtualCluster             // a listener of virtual clusters, and the connection matches none (vcluster.go)
	closeWriteTimeout                 // a response write made no progress within the frame timeout: the client stopped reading
)

var closeReasonNames = [...]string{
	closeNone:             "none",
	closeClientEOF:        "client_closed",
	closeIdle:             "idle_timeout",
	closeShutdown:         "shutdown",
	closeMalformed:        "malformed_request",
	closeUnsupported:      "unsupported_version",
	closeClientError:      "client_error",
	closeUpstreamError:    "upstream_error",
	closeBackendError:     "backend_error",
	closeDenied:           "denied",
	closeAuditUnavailable: "audit_unavailable",
	closeTLS:              "tls_handshake",
	closeAuthFailed:       "auth_failed",
	closeAuthExpired:      "reauth_expired",
	closeUpstreamReauth:   "upstream_session_expiring",
	closeAuthRejected:     "auth_failed",
	closeOverloaded:       "memory_budget",
	closeNoVirtualCluster: "no_virtual_cluster",
	closeWriteTimeout:     "write_timeout",
}

func (r closeReason) String() string { return closeReasonNames[r] }

// isFault reports reasons that tear the connection down at once instead of
// answering what was already read.
//
// A client that closed its side tears down at once too: nobody is left to
// read the answers (Kafka closes the channel on EOF), and waiting for a
// silent upstream would hold the session forever.
func (r closeReason) isFault() bool {
	switch r {
	case closeNone, closeIdle, closeShutdown, closeUpstreamReauth, closeAuthRejected:
		return false
	}
	return true
}

// isWarning reports reasons worth a WARN line (rate-limited: a client
// can cause most of them at will). An ordinary end of a connection — the
// client closed it, it was idle, the gateway is shutting down — is not.
func (r closeReason) isWarning() bool {
	switch r {
	case closeNone, closeClientEOF, closeIdle, closeShutdown, closeUpstreamReauth:
		return false
	}
	return true
}

// apiName names a key for logs ("Unknown(123)" for keys kmsg does not know).
func apiName(key int16) string {
	if name := kmsg.NameForKey(key); name != "" && name != "Unknown" {
		return name
	}
	return fmt.Sprintf("Unknown(%d)", key)
}

// needsKey reports keys whose responses can carry broker addresses in some
// version, so a version this build cannot decode must never be forwarded.
func needsKey(key int16) bool {
	return rewrite.Needs(key, wire.MaxVersion(key))
}

var errShortProduce = errors.New("request ends before acks")

// produceAcks reads the acks field of a Produce request without decoding
// the body: it follows the transactional id (v3+; a compact nullable string
// from the first flexible version, v9).
func produceAcks(h wire.RequestHeader, frame []byte) (int16, error) {
	b := frame[h.Len:]
	if h.Version >= 3 {
		if h.Flexible {
			n, w := binary.Uvarint(b)
			if w <= 0 || n > uint64(len(b)) {
				return 0, errShortProduce
			}
			b = b[w:]
			if n > 0 { // compact nullable: 0 is null, else length+1
				if int(n-1) > len(b) {
					return 0, errShortProduce
				}
				b = b[n-1:]
			}
		} else {
			if len(b) < 2 {
				return 0, errShortProduce
			}
			n := int16(binary.BigEndian.Uint16(b))
			b = b[2:]
			if n > 0 {
				if int(n) > len(b) {
					return 0, errShortProduce
				}
				b = b[n:]
			}
		}
	}
	if len(b) < 2 {
		return 0, errShortProduce
	}
	return int16(binary.BigEndian.Uint16(b)), nil
}
