package proxy

import (
	"crypto/tls"
	"time"
)

// What a configuration reload changes in a running server. Everything
// else in Options is fixed at New: read on the data path without a lock,
// or built into listeners and sessions.

// ConnectionLimits are the limits on new connections, which a reload may
// change (SetConnectionLimits): the same fields as in Options.
type ConnectionLimits struct {
	MaxConnections           int
	MaxConnectionsPerAddress int
	ConnectionRatePerAddress float64
	AuthFailuresPerAddress   int
	AuthLockout              time.Duration
}

// SetConnectionLimits applies l to connections accepted from now on;
// open connections stay (lowering max_connections closes none). Per
// address, recorded failures and lockouts are kept and the connection
// rate changes at once.
func (s *Server) SetConnectionLimits(l ConnectionLimits) {
	s.mu.Lock() // startSession reads both caps under mu
	s.opts.MaxConnections = l.MaxConnections
	s.opts.MaxConnectionsPerAddress = l.MaxConnectionsPerAddress
	s.mu.Unlock()
	s.guard.set(l.ConnectionRatePerAddress, l.AuthFailuresPerAddress, l.AuthLockout)
}

// SetUpstreamTLS replaces the TLS configuration of upstream connections
// dialled from now on (new certificates or CA after a reload); open
// upstream connections keep theirs. nil is refused when the server
// started with TLS, and TLS when it started without: turning TLS on or
// off needs a restart. It reports whether c was installed.
func (s *Server) SetUpstreamTLS(c *tls.Config) bool {
	if (c == nil) != (s.upstreamTLS.Load() == nil) {
		return false
	}
	s.upstreamTLS.Store(c)
	return true
}
