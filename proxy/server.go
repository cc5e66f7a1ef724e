// Package proxy is the gateway: listeners, one session per client
// connection (a read loop and a write loop joined by an in-order queue),
// upstream pairing and broker discovery, and the adapter to the in-process
// built-in broker. See DESIGN.md at the repository root for the contracts.
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-kafka/tollgate/internal/congestion"
	"github.com/tollgate-kafka/tollgate/lograte"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/wire"
)

// Local is the built-in broker as the gateway sees it. Handle is called from
// a session's read loop in request order; done is called exactly once, from
// any goroutine: (body, nil) is the response, (nil, nil) no response,
// (nil, err) closes the connection.
type Local interface {
	NewConn(remote string) LocalConn
}

// LocalConn is one client connection's handle on the built-in broker.
// Who owns req.Body and the response body is wire.Request's Ownership rule.
type LocalConn interface {
	Handle(req *wire.Request, done func(wire.Body, error))
	Close()
}

// LocalFunc adapts a function to Local.
type LocalFunc func(remote string) LocalConn

// NewConn calls f.
func (f LocalFunc) NewConn(remote string) LocalConn { return f(remote) }

// Server owns every listener, session and goroutine of the gateway.
type Server struct {
	opts Options
	log  *slog.Logger

	listeners []*listener
	nodes     *nodeRegistry // upstream mode only

	mu       sync.Mutex
	sessions map[*session]struct{}
	perIP    map[string]int  // open client connections by source IP
	guard    *addrGuard      // connection rate and auth-failure lockout per IP
	noisy    *lograte.Logger // rate limit for what clients can make the gateway log (owned; closed by Shutdown)
	closing  bool
	wg       sync.WaitGroup // every goroutine the server starts
	nextID   atomic.Uint64

	stopDiscovery context.CancelFunc

	policy       atomic.Pointer[policy.Engine] // nil: no policy
	viewOnce     sync.Once
	view         *clusterView          // single-port routing's cluster view (route_view.go)
	tunnelDials  dialHolds             // single-port: brokers whose last dial failed (route_dial.go)
	discoveryErr atomic.Pointer[error] // outcome of the last broker discovery (upstream mode)
	discoverMu   sync.Mutex            // serialises discoverFirst
	names        topicNames            // topic id -> name, from Metadata responses
	creations    creations             // topics split Metadata requests forwarded for auto-creation (policy_stage.go)

	budget *byteBudget // request bytes in flight across every session (body.go)

	vcs *vclusters // Options.VirtualClusters; nil: none (vcluster.go)

	upstreamTLS atomic.Pointer[tls.Config] // Options.UpstreamTLS, replaced by a reload (reload.go); nil: plaintext
}

// listener is one client-facing listener: its bootstrap port plus, in
// upstream mode, one port per upstream node.
type listener struct {
	srv  *Server
	opts ListenerOptions
	host string // advertised host
	boot net.Listener
	sni  *sniRouter // nil unless brokers are routed by TLS server name
	// console marks the web console's in-process listener
	// (console_listener.go): no socket (boot is nil), virtual ports.
	console *consoleListener

	mu      sync.Mutex
	brokers map[int32]net.Listener // node id -> per-broker listener
}

// New validates opts and returns a server that has not started listening.
func New(opts Options) (*Server, error) {
	opts.setDefaults()
	if len(opts.Listeners) == 0 {
		return nil, errors.New("proxy: no listeners")
	}
	if len(opts.Bootstrap) == 0 && opts.Local == nil {
		return nil, errors.New("proxy: neither an upstream bootstrap nor a local broker")
	}
	if opts.TCPCongestion != "" {
		if err := congestion.Check(opts.TCPCongestion); err != nil {
			return nil, fmt.Errorf("proxy: %w", err)
		}
	}
	s := &Server{opts: opts, log: opts.Logger, sessions: make(map[*session]struct{}), perIP: make(map[string]int)}
	if s.upstreamMode() {
		s.nodes = newNodeRegistry()
	}
	s.guard = newAddrGuard(opts.ConnectionRatePerAddress, opts.AuthFailuresPerAddress, opts.AuthLockout)
	s.noisy = lograte.New(opts.Logger, lograte.Options{Interval: opts.LogSummaryInterval})
	s.budget = newByteBudget(opts.MaxRequestBytesInFlight, opts.Hooks)
	vcs, err := newVClusters(opts.VirtualClusters)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	s.vcs = vcs
	s.upstreamTLS.Store(opts.UpstreamTLS)
	return s, nil
}

func (s *Server) upstreamMode() bool { return len(s.opts.Bootstrap) > 0 }

// Start binds every listener and starts accepting. In upstream mode it
// first asks the upstream for its brokers so that per-broker ports are open
// before any client learns them (a failure there is logged, not fatal: the
// brokers are also learned from the metadata clients fetch).
func (s *Server) Start(ctx context.Context) error {
	for _, lo := range s.opts.Listeners {
		ln, err := net.Listen("tcp", lo.Listen)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("listen %s (%s): %w", lo.Listen, lo.Name, err)
		}
		l := &listener{srv: s, opts: lo, boot: ln, brokers: make(map[int32]net.Listener)}
		if lo.SNI != nil {
			if l.sni, err = newSNIRouter(l, lo.SNI, lo.TLS); err != nil {
				ln.Close()
				s.closeListeners()
				return fmt.Errorf("listener %s: %w", lo.Name, err)
			}
		}
		l.host = lo.Advertise
		if l.host == "" {
			l.host, _, _ = net.SplitHostPort(ln.Addr().String())
		}
		s.listeners = append(s.listeners, l)
		s.log.Info("listening", "listener", lo.Name, "addr", ln.Addr().String(),
			"advertise", net.JoinHostPort(l.host, strconv.Itoa(int(l.advertisedBootPort()))))
	}
	for _, l := range s.listeners {
		s.goAccept(l, l.boot, -1)
	}
	if s.upstreamMode() {
		dctx, cancel := context.WithCancel(context.Background())
		s.stopDiscovery = cancel
		if err := s.discover(ctx); err != nil {
			s.log.Warn("initial broker discovery failed; brokers will be learned from client metadata", "err", err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.discoveryLoop(dctx)
		}()
	}
	return nil
}

// Addr is the bound bootstrap address of the i-th listener.
func (s *Server) Addr(i int) net.Addr { return s.listeners[i].boot.Addr() }

// BrokerAddr is the bound address serving node on the i-th listener, if open.
func (s *Server) BrokerAddr(i int, node int32) (net.Addr, bool) {
	l := s.listeners[i]
	l.mu.Lock()
	defer l.mu.Unlock()
	ln, ok := l.brokers[node]
	if !ok {
		return nil, false
	}
	return ln.Addr(), true
}

// goAccept runs the accept loop of one port. node is -1 for a bootstrap
// port, else the upstream node the port serves.
func (s *Server) goAccept(l *listener, ln net.Listener, node int32) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var backoff time.Duration
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				// Temporary errors (EMFILE, ECONNABORTED): back off
				// rather than spin, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				// A connection flood can cause this (EMFILE): rate-limited.
				s.noisy.Log(slog.LevelWarn, "accept_failed", "", "accept failed", "listener", l.opts.Name, "err", err, "retry_in", backoff)
				time.Sleep(backoff)
				continue
			}
			backoff = 0
			s.sizeSendBuffer(c)
			if tc, ok := c.(*net.TCPConn); ok {
				s.setCongestion(tc)
			}
			s.startSession(l, c, node)
		}
	}()
}

// sizeSendBuffer bounds the kernel memory a client connection holds for
// a client that does not read: the bytes of a response wait in its send
// queue, outside the gateway's heap. Autotuning lets the queue grow to
// net.ipv4.tcp_wmem's maximum (4 MiB by default) on each connection, and
// a thousand stalled clients then hold gigabytes and push the machine's
// TCP into memory pressure (net.ipv4.tcp_mem), which slows every
// connection. SocketUnsentBytes (TCP_NOTSENT_LOWAT) bounds what waits
// unsent while leaving the buffer autotuned, so a client on a long fat
// link still gets bandwidth × round trip in flight; SocketSendBufferBytes
// (SO_SNDBUF, Kafka's socket.send.buffer.bytes) caps the whole queue,
// sent and unsent, at twice its size (the kernel doubles it).
func (s *Server) sizeSendBuffer(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	if s.opts.SocketSendBufferBytes > 0 {
		tc.SetWriteBuffer(s.opts.SocketSendBufferBytes)
	}
	if s.opts.SocketUnsentBytes > 0 {
		if err := limitUnsent(tc, s.opts.SocketUnsentBytes); err != nil {
			s.noisy.Log(slog.LevelWarn, "socket_option_failed", "", "cannot limit a client socket's unsent bytes (TCP_NOTSENT_LOWAT)", "err", err)
		}
	}
}

// setCongestion sets the TCP congestion control of c (a client or an
// upstream connection) to TCPCongestion, if set. New checked that the
// host offers it; a route locked to another algorithm can still refuse
// it, which is logged, rate-limited, and the connection goes on.
func (s *Server) setCongestion(c *net.TCPConn) {
	if s.opts.TCPCongestion == "" {
		return
	}
	if err := congestion.Set(c, s.opts.TCPCongestion); err != nil {
		s.noisy.Log(slog.LevelWarn, "socket_option_failed", "", "cannot set a socket's TCP congestion control (TCP_CONGESTION)", "algorithm", s.opts.TCPCongestion, "err", err)
	}
}

func (s *Server) startSession(l *listener, c net.Conn, node int32) {
	ip, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	s.mu.Lock()
	var refuse string
	switch {
	case s.closing:
		refuse = refuseShutdown
	case s.opts.MaxConnections > 0 && len(s.sessions) >= s.opts.MaxConnections:
		refuse = refuseMaxConns
	case s.opts.MaxConnectionsPerAddress > 0 && s.perIP[ip] >= s.opts.MaxConnectionsPerAddress:
		refuse = refuseMaxPerAddr
	default:
		refuse = s.guard.admit(ip, time.Now())
	}
	if refuse != "" {
		s.mu.Unlock()
		c.Close()
		s.refused(l, c.RemoteAddr().String(), refuse)
		return
	}
	sess := newSession(s, l, c, node)
	s.sessions[sess] = struct{}{}
	s.perIP[ip]++
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		sess.run()
		s.mu.Lock()
		delete(s.sessions, sess)
		if s.perIP[ip]--; s.perIP[ip] == 0 {
			delete(s.perIP, ip)
		}
		s.mu.Unlock()
	}()
}

// Shutdown stops accepting, lets every session finish the requests it has
// already read (bounded by ctx, or DrainTimeout if ctx has no deadline), then
// closes what is left and waits for every goroutine (at most
// shutdownCloseGrace more: the error then says how many sessions are left).
func (s *Server) Shutdown(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.DrainTimeout)
		defer cancel()
	}
	s.mu.Lock()
	s.closing = true
	sessions := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	s.mu.Unlock()
	s.closeListeners()
	if s.stopDiscovery != nil {
		s.stopDiscovery()
	}
	for _, sess := range sessions {
		sess.drain()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); s.noisy.Close(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	for _, sess := range sessions {
		sess.close(closeShutdown, nil)
	}
	// A closed session's goroutines end on their next read or write; one
	// that does not (a bug) must not hold the shutdown forever.
	t := time.NewTimer(shutdownCloseGrace)
	defer t.Stop()
	select {
	case <-done:
		return fmt.Errorf("drain: %w", ctx.Err())
	case <-t.C:
	}
	s.mu.Lock()
	left := len(s.sessions)
	s.mu.Unlock()
	s.log.Error("shutdown: sessions still running after they were closed", "sessions", left, "waited", shutdownCloseGrace)
	return fmt.Errorf("drain: %w; %d session(s) still running %v after they were closed", ctx.Err(), left, shutdownCloseGrace)
}

// shutdownCloseGrace is how long Shutdown waits, once the drain has timed
// out and every session was closed, for their goroutines to end.
const shutdownCloseGrace = 5 * time.Second

func (s *Server) closeListeners() {
	for _, l := range s.listeners {
		l.boot.Close()
		l.mu.Lock()
		for _, ln := range l.brokers {
			ln.Close()
		}
		l.mu.Unlock()
	}
}

// brokerPort returns the port serving node on l, opening its listener on
// first sight. It is called while a response that names the node is being
// rewritten, so the port is open before the client reads the address.
func (l *listener) brokerPort(node int32) (int32, error) {
	if l.console != nil {
		return consoleVirtualPort(node)
	}
	if l.sni != nil {
		return 0, errors.New("an SNI listener has no broker ports")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ln, ok := l.brokers[node]; ok {
		return int32(ln.Addr().(*net.TCPAddr).Port), nil
	}
	if l.srv.closingNow() {
		return 0, errors.New("shutting down")
	}
	bindHost, bootPort, err := net.SplitHostPort(l.boot.Addr().String())
	if err != nil {
		return 0, err
	}
	port := 0
	switch base := l.opts.BrokerPortBase; {
	case base == 0:
	case base < 0:
		bp, _ := strconv.Atoi(bootPort)
		port = bp + 1 + int(node)
	default:
		port = base + int(node)
	}
	if port < 0 || port > 65535 || node < 0 {
		return 0, fmt.Errorf("node %d: port %d out of range (broker_port_base %d)", node, port, l.opts.BrokerPortBase)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(bindHost, strconv.Itoa(port)))
	if err != nil {
		return 0, fmt.Errorf("open listener for node %d: %w", node, err)
	}
	l.brokers[node] = ln
	bound := int32(ln.Addr().(*net.TCPAddr).Port)
	if adv, err := l.advertisedPort(bound); err == nil {
		l.srv.log.Info("broker port opened", "listener", l.opts.Name, "node", node, "addr", ln.Addr().String(),
			"advertise", net.JoinHostPort(l.host, strconv.Itoa(int(adv))))
	} else {
		l.srv.log.Error("broker port opened, but it cannot be advertised", "listener", l.opts.Name, "node", node, "addr", ln.Addr().String(), "err", err)
	}
	l.srv.goAccept(l, ln, node)
	return int32(ln.Addr().(*net.TCPAddr).Port), nil
}

// bootPort is the bound port of the bootstrap listener.
func (l *listener) bootPort() int32 {
	if l.console != nil {
		return 0 // console_listener.go
	}
	return int32(l.boot.Addr().(*net.TCPAddr).Port)
}

func (s *Server) closingNow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// refusalHooks is implemented by Hooks that count refused connections
// (*metrics.Metrics does); reason is from the closed set in startSession
// and addrGuard.admit.
type refusalHooks interface {
	ConnRefused(listener, reason string)
}

// refused counts a connection refused at accept and logs it, rate-limited
// (a client can open connections at will).
func (s *Server) refused(l *listener, client, reason string) {
	if h, ok := s.opts.Hooks.(refusalHooks); ok {
		h.ConnRefused(l.opts.Name, reason)
	}
	s.noisy.Warn(reason, client, "connection refused", "listener", l.opts.Name)
}
