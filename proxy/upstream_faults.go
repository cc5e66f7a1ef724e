package proxy

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/tollgate-kafka/tollgate/apis"
)

// How a session rides out an upstream broker that is restarting or away
// for a moment, so clients see what they would see from Kafka directly:
//
//   - The upstream dial is retried with backoff within the dial timeout:
//     a broker that comes back within it is invisible to the client.
//   - A session that ends on an upstream failure before the client got
//     any response (but to ApiVersions or SASL: connectionSetup) is
//     reset (RST), not closed (FIN). A client that reads
//     EOF as the first answer on a new connection takes it for a TLS or
//     SASL misconfiguration (franz-go's ErrFirstReadEOF fails the request
//     instead of retrying); a reset is a network error every client
//     retries, as it retries "connection refused" from a broker that is
//     down. Once a response was written the close stays graceful, so a
//     response already sent is never discarded by the client's kernel.

// connectionSetup reports whether key is a request a client sends to set
// its connection up (ApiVersions, SaslHandshake, SaslAuthenticate): an
// answer to one does not make the close graceful (session.answered).
// franz-go counts no response on a connection until one to another
// request, and takes EOF before that for a TLS or SASL misconfiguration
// (ErrFirstReadEOF), failing the request instead of retrying it; a
// session whose upstream fails right after the ApiVersions answer (a
// single-port session's next request dials another broker) would
// otherwise end in exactly that EOF. A reset is safe there: a setup
// answer the reset discards is asked again on the client's next
// connection.
func connectionSetup(key int16) bool {
	return key == apis.ApiVersions || key == apis.SASLHandshake || key == apis.SASLAuthenticate
}

// Backoff between upstream dial attempts of one session.
const (
	dialRetryFirst = 50 * time.Millisecond
	dialRetryMax   = time.Second
)

// dialUpstreamRetrying dials node like dialUpstream, again and again with
// backoff until ctx ends or stop closes; attempt is told of every try.
func (s *Server) dialUpstreamRetrying(ctx context.Context, node int32, stop <-chan struct{}, attempt func(time.Duration, error)) (net.Conn, string, error) {
	backoff := dialRetryFirst
	for {
		start := time.Now()
		c, addr, err := s.dialUpstream(ctx, node)
		attempt(time.Since(start), err)
		if err == nil {
			return c, addr, nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, "", err
		case <-stop:
			t.Stop()
			return nil, "", err
		case <-t.C:
		}
		backoff = min(2*backoff, dialRetryMax)
	}
}

// resetConn closes c's socket with a TCP reset (SO_LINGER 0) instead of a
// FIN. It closes the socket itself, under the TLS layers (tlsClient,
// tls.Conn, batchConn): closing a TLS connection first sends a
// close_notify alert, which the client reads as EOF before the reset
// reaches it — the very answer the reset is there to avoid. The caller
// still closes c (which then writes nothing).
func resetConn(c net.Conn) {
	for {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
		_ = tc.Close()
	}
}

// Why an upstream dial failed: the reason label of
// tollgate_upstream_dial_errors_total and part of the close's log line.
// A session whose dial fails resets its client connection before any
// answer (above), which every Kafka client retries; so does a dial that
// fails on the gateway's own upstream credentials or on the upstream's
// certificate — the client's own login is not what failed, and a
// SASL_AUTHENTICATION_FAILED answer would fail its records for good
// (kgo, the Java client) although the gateway recovers by itself once
// its password file or CA is fixed and reloaded.
const (
	DialConnect        = "connect"                    // TCP (or the egress proxy's tunnel)
	DialTLSCertificate = "tls_certificate"            // the upstream's certificate did not verify against upstream.tls.ca
	DialTLS            = "tls"                        // any other TLS handshake failure
	DialSASLAuthFailed = "sasl_authentication_failed" // the upstream refused the gateway's upstream.sasl credentials
	DialSASL           = "sasl"                       // the SASL exchange failed otherwise (I/O, mechanism, file)
)

// dialError is a failed upstream dial and its reason.
type dialError struct {
	reason string
	err    error
}

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// DialReason is the reason label (metrics reads it through this method).
func (e *dialError) DialReason() string { return e.reason }

// DialReason returns why err, an upstream dial's error, happened (one of
// the Dial* constants), or "other".
func DialReason(err error) string {
	if d, ok := errors.AsType[*dialError](err); ok {
		return d.reason
	}
	return "other"
}
