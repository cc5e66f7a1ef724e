package proxy

import (
	"context"
	"net"
	"time"
)

// How a session rides out an upstream broker that is restarting or away
// for a moment, so clients see what they would see from Kafka directly:
//
//   - The upstream dial is retried with backoff within the dial timeout:
//     a broker that comes back within it is invisible to the client.
//   - A session that ends on an upstream failure before the client got
//     any response is reset (RST), not closed (FIN). A client that reads
//     EOF as the first answer on a new connection takes it for a TLS or
//     SASL misconfiguration (franz-go's ErrFirstReadEOF fails the request
//     instead of retrying); a reset is a network error every client
//     retries, as it retries "connection refused" from a broker that is
//     down. Once a response was written the close stays graceful, so a
//     response already sent is never discarded by the client's kernel.

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

// resetConn makes Close send a TCP reset (SO_LINGER 0) instead of a FIN.
func resetConn(c net.Conn) {
	// Through the TLS layers (tlsClient, tls.Conn, batchConn).
	for {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}
