package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/rewrite"
	"github.com/tollgate-kafka/tollgate/wire"
)

// bufSize is the read buffer of each side of a session. Frames that fit are
// moved with one write straight out of the buffer; larger ones are copied
// socket to socket (splice on Linux) after the buffered part.
const bufSize = 64 << 10

// maxResponseBytes bounds a response frame read from a backend before it is
// decoded (only responses the gateway rewrites are read into memory).
const maxResponseBytes = 1 << 30

// session is one client connection and, in upstream mode, its paired
// upstream connection.
//
// Ownership: the read loop owns reading the client and writing the upstream;
// the write loop owns reading the upstream and writing the client. The
// queue between them carries one entry per request that expects a
// response, pushed before the request is forwarded, so the write loop
// always knows the key and version of the next response (responses carry
// neither) and answers strictly in request order.
type session struct {
	srv    *Server
	l      *listener
	node   int32 // upstream node this port serves; -1 for a bootstrap port (run's goroutine)
	id     uint64
	client net.Conn
	remote string
	log    *slog.Logger

	// cr and ur are pooled read buffers, held only while a frame is being
	// read (an idle connection holds none: see nextPrefix).
	cr    *bufio.Reader
	pre   prefixed
	queue chan *pending // entries come from pendingPool

	// upstream mode
	up     net.Conn
	ur     *bufio.Reader
	upAddr string
	// upRaw is up's descriptor when up is a plain TCP connection: the
	// idle write loop waits on it for the next response (awaitUpstream).
	upRaw     syscall.RawConn
	idleMu    sync.Mutex // guards upWaiting and the pokes of up's read deadline
	upWaiting bool       // the write loop is in awaitUpstream's wait
	// poked: wakeWriter ran since the write loop last waited; the next
	// awaitUpstream then does not wait (a poke that came between the
	// write loop's empty queue and its wait would otherwise be lost).
	poked  bool
	upWait readableWait // awaitUpstream's (write loop only)
	upr    upReader     // what ur reads: up, each read bounded while upr.max > 0
	// built-in mode
	local LocalConn
	// single-port mode (route.go): the read loop routes every request
	tun *tunnel

	mapper mapper
	subj   policy.Subject // who is asking, for policy decisions
	hooks  Hooks

	// From the client's ApiVersions v3+ request, for audit records.
	softwareName, softwareVersion string
	// ident is the read loop's published copy of who is connected, for
	// Server.Connections (see introspect.go).
	ident atomic.Pointer[connIdent]
	// shownNode is node published for Server.Connections, which reads it
	// from another goroutine while the SNI handshake may still set node
	// (handshakeTLS: the session is registered before the handshake).
	shownNode atomic.Int32

	tlsSubject string     // the verified client certificate's subject (mTLS)
	sasl       *saslState // nil unless the listener terminates SASL
	// passPrincipal carries a principal the upstream accepted (SASL
	// pass-through) from the write loop to the read loop.
	passPrincipal atomic.Pointer[string]
	passUser      string // the user a relayed SCRAM first message named (read loop)

	muteUntil  atomic.Int64 // unix nanos: the read loop waits until then (throttling)
	fetchBytes atomic.Int64 // Fetch response bytes written, charged by the read loop

	mu       sync.Mutex // guards idle, draining (see readLoop for why)
	idle     bool
	draining bool

	started  time.Time
	answered atomic.Bool // a response but ApiVersions' and SASL's has been written to the client (set by the write loop; upstream_faults.go)
	opened   bool        // ConnOpened was called (run's goroutine only)

	heldBody int64 // budget reserved for the current request's owned body (read loop only; body.go)

	fetchThrottle     time.Duration // a fetch-rate throttle the next answer reports (read loop only; throttle.go)
	fetchThrottleRule string

	connMu    sync.Mutex // guards client, up and local against close while they are installed
	closeOnce sync.Once
	reason    closeReason
	closeErr  error
	closed    chan struct{}
	drained   chan struct{} // closed by drain: a muted read loop stops waiting (policy_stage.go waitMuted)

	cur request // the read loop's request value, reused frame to frame (stages.go)

	// Virtual clusters (vcluster.go), read loop only: vc is the
	// session's cluster once vcDecided (nil: the plain cluster); sniVC
	// the cluster whose SNI pattern the TLS server name matched.
	vc        *vcluster
	vcDecided bool
	vcLabel   string
	sniVC     *vcluster
	vcn       *vcNames // the session's names view (vcluster_stage.go)

	wbuf []byte // write loop scratch for rewritten responses and headers
	rbuf []byte // write loop buffer for responses read whole to be rewritten
}

// pending is one request awaiting its response.
type pending struct {
	key, version int16
	corr         int32
	local        chan result // built-in broker or gateway answer; nil: read the upstream

	// Policy: merge adds denied parts to the backend's answer; throttle
	// goes into throttle_time_ms (and, for versions before KIP-219, delays
	// the response: delay).
	merge    func(kmsg.Response)
	throttle time.Duration
	delay    bool
	hide     []int16 // ApiVersions: keys this subject is denied outright (listener switch)
	// fwdVersion, when not 0, is the version the backend answers at
	// because policy raised the request's (Metadata v0-3 to v4 to withhold
	// auto-creation, policy/partial.go); adjust re-encodes the answer at
	// version. Both are below Metadata v9, so the response header is the
	// same.
	fwdVersion int16

	raw        bool   // a SASL v0 raw token: size prefix and bytes, no header
	saslUser   string // pass-through SaslAuthenticate: the user the token names
	closeAfter bool   // close the connection once this response is written (failed authentication)
	// addressed: the answer already carries the listener's addresses
	// (single-port Produce and Fetch, route_nodes.go), so the write side
	// does not decode it again to rewrite them.
	addressed bool
	// answerSlot: a single-port Fetch or ShareFetch holding its session's
	// answer slot (route.go, awaitAnswerSlot), freed once its answer is
	// written.
	answerSlot bool
	// vc, for a session in a virtual cluster, is the view the answer is
	// rewritten with (vcAnswer, before merge and addresses); nil: as is.
	vc *vcNames

	obs observed // accounting for metrics and audit
}

// adjusted reports whether the response must be decoded for policy.
func (p *pending) adjusted() bool { return p.merge != nil || p.throttle > 0 || p.fwdVersion != 0 }

type result struct {
	body wire.Body
	err  error
}

func newSession(s *Server, l *listener, c net.Conn, node int32) *session {
	id := s.nextID.Add(1)
	sess := &session{
		srv:     s,
		l:       l,
		node:    node,
		id:      id,
		client:  c,
		remote:  c.RemoteAddr().String(),
		queue:   make(chan *pending, s.opts.MaxInFlight),
		closed:  make(chan struct{}),
		drained: make(chan struct{}),
		mapper:  mapper{srv: s, l: l},
		started: time.Now(),
	}
	sess.shownNode.Store(node)
	sess.log = s.log.With("conn", id, "listener", l.opts.Name, "client", sess.remote)
	sess.subj = policy.Subject{Listener: l.opts.Name, Addr: remoteAddr(sess.remote)}
	if l.console != nil {
		sess.subj.Principal = l.console.principal // console_listener.go
	}
	sess.hooks = s.opts.Hooks
	if l.opts.SASL != nil {
		sess.sasl = &saslState{server: l.opts.SASL}
	}
	return sess
}

// run serves the connection until it closes.
func (s *session) run() {
	if s.l.opts.TLS != nil {
		if err := s.handshakeTLS(); err != nil {
			s.hooks.Malformed("tls_handshake")
			s.close(closeTLS, err)
			s.logClose()
			return
		}
	}
	if err := s.connectBackend(); err != nil {
		s.close(closeUpstreamError, err)
		s.logClose()
		return
	}
	// Per-connection lines are debug: a client opens connections at will,
	// and tollgate_connections_total and the audit trail's connect events
	// already record each one (as Kafka's own connection lines are).
	s.log.Debug("connection opened", "node", s.node, "backend", s.backendName())
	s.hooks.ConnOpened(s.l.opts.Name)
	s.opened = true // logClose pairs ConnClosed with this
	s.connRecord(audit.EventConnect, "")
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		if err := s.writeLoop(); err != nil {
			reason := s.writeCloseReason(err)
			if reason == closeWriteTimeout {
				err = fmt.Errorf("the client read nothing of a response for %v (frame_timeout): %w", s.srv.opts.FrameTimeout, err)
			}
			s.close(reason, err)
		}
	}()
	reason, err := s.readLoop()
	if reason.isFault() {
		s.close(reason, err) // tear down now; nothing more is answered
	}
	// Otherwise (idle, drain, a refused login) the write loop first answers
	// every request already read — within the drain timeout, so a silent
	// upstream cannot hold the session.
	close(s.queue)
	s.wakeWriter()
	t := time.NewTimer(s.srv.opts.DrainTimeout)
	select {
	case <-writerDone:
	case <-t.C:
		s.close(reason, fmt.Errorf("responses not answered within %v", s.srv.opts.DrainTimeout))
		<-writerDone
	}
	t.Stop()
	s.close(reason, err)
	putReader(&s.cr)
	putReader(&s.ur)
	// Responses the write loop never reached may hold resources (a Fetch
	// body pins segment files until it is written or released).
	for p := range s.queue {
		if p.local != nil {
			go releaseWhenDone(p.local)
		}
		putFrame(p.obs.frame)
		putPending(p)
	}
	s.logClose()
}

func (s *session) connectBackend() error {
	if o := s.l.opts.SinglePort; o != nil && s.srv.upstreamMode() {
		t := newTunnel(s, o)
		if !s.adopt(func() { s.tun = t }) {
			return net.ErrClosed
		}
		return nil
	}
	if !s.srv.upstreamMode() {
		lc := s.srv.opts.Local.NewConn(s.remote)
		if !s.adopt(func() { s.local = lc }) {
			lc.Close()
			return net.ErrClosed
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.srv.opts.DialTimeout)
	defer cancel()
	up, addr, err := s.srv.dialUpstreamRetrying(ctx, s.node, s.closed, func(d time.Duration, err error) {
		s.hooks.UpstreamDial(s.node, d, err)
	})
	if err != nil {
		return err
	}
	s.hooks.UpstreamConns(1, s.node)
	var raw syscall.RawConn
	if tc, ok := up.(*net.TCPConn); ok {
		raw, _ = tc.SyscallConn()
	}
	if !s.adopt(func() { s.up, s.upAddr, s.upRaw = up, addr, raw }) {
		// Shutdown closed the session while it was dialing.
		up.Close()
		s.hooks.UpstreamConns(-1, s.node)
		return net.ErrClosed
	}
	return nil
}

// adopt installs a connection (or replaces the client with its TLS
// wrapper) under the lock close takes, unless the session is already
// closed — then it reports false and the caller closes what it opened.
func (s *session) adopt(set func()) bool {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	select {
	case <-s.closed:
		return false
	default:
	}
	set()
	return true
}

// close records the first reason and tears the connection down; later calls
// are no-ops. Closing both sockets unblocks both loops.
func (s *session) close(reason closeReason, err error) {
	s.closeOnce.Do(func() {
		s.connMu.Lock()
		defer s.connMu.Unlock()
		s.reason, s.closeErr = reason, err
		close(s.closed)
		if reason == closeUpstreamError && !s.answered.Load() {
			resetConn(s.client) // see upstream_faults.go
		}
		s.client.Close()
		if s.up != nil {
			s.up.Close()
			s.hooks.UpstreamConns(-1, s.node)
		}
		if s.tun != nil {
			s.tun.close()
		}
		if s.local != nil {
			s.local.Close()
		}
	})
}

func (s *session) logClose() {
	if s.opened {
		// A TLS handshake or backend dial that failed never counted the
		// connection as open (their failures have their own counters:
		// malformed tls_handshake, upstream dial errors), so
		// connections_active cannot go below zero.
		s.hooks.ConnClosed(s.l.opts.Name, s.reason.String())
	}
	s.connRecord(audit.EventDisconnect, s.reason.String())
	attrs := []any{"reason", s.reason.String()}
	if s.closeErr != nil {
		attrs = append(attrs, "err", s.closeErr)
	}
	switch {
	case !s.reason.isWarning():
		s.log.Debug("connection closed", attrs...)
	case s.srv.noisy.Allow(s.noisyKey(), s.remote):
		s.log.Warn("connection closed", attrs...)
	}
}

// noisyKey is the rate-limit bucket of a close's log line: the reason,
// and for a malformed frame its cause, so one kind of garbage cannot hide
// another.
func (s *session) noisyKey() string {
	if s.reason == closeMalformed && s.closeErr != nil {
		return s.reason.String() + "/" + malformedCause(s.closeErr)
	}
	if s.reason == closeUpstreamError && s.closeErr != nil {
		if r := DialReason(s.closeErr); r != "other" {
			return s.reason.String() + "/dial_" + r
		}
	}
	return s.reason.String()
}

// drain asks the read loop to stop at the next frame boundary; the write
// loop then answers every request already read.
//
// The idle flag and the read deadline are set under mu by both sides, so a
// drain can only cut the wait for the *next* frame, never a frame that has
// started (which would leave half a request on the upstream stream).
func (s *session) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.draining {
		close(s.drained)
	}
	s.draining = true
	if s.idle {
		s.connMu.Lock()
		c := s.client // the TLS handshake may still be replacing it
		s.connMu.Unlock()
		c.SetReadDeadline(time.Now())
	}
}

// readLoop reads requests until the client closes, the server drains, or a
// frame is bad. It returns closeNone for a clean stop.
func (s *session) readLoop() (closeReason, error) {
	for {
		s.chargeFetchBytes()
		if err := s.waitMuted(); err != nil {
			return closeNone, nil
		}
		prefix, stop, reason, err := s.awaitFrame()
		if stop {
			return reason, err
		}
		if ec, ok := s.up.(*expiringConn); ok && time.Now().After(ec.expires) {
			// The gateway's upstream SASL session is about to expire: leave
			// this request unread, answer what was read, then close; the
			// client reconnects and its new upstream connection
			// authenticates afresh.
			return closeUpstreamReauth, nil
		}
		s.mu.Lock()
		s.idle = false
		s.client.SetReadDeadline(s.frameDeadline())
		s.mu.Unlock()
		if stop, reason, err := s.readFrameStage(prefix); stop {
			return reason, err
		}
	}
}

// awaitFrame waits, idle, for the next frame's size prefix. stop reports
// that the loop must end, with the close reason (closeNone and a nil
// error for a clean stop).
func (s *session) awaitFrame() (prefix []byte, stop bool, reason closeReason, err error) {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return nil, true, closeShutdown, nil
	}
	s.idle = true
	deadline := time.Now().Add(s.srv.opts.IdleTimeout)
	if s.sasl != nil && !s.sasl.authed {
		// Unauthenticated connections get AuthTimeout from their start,
		// so a SASL exchange that never finishes cannot hold a slot.
		if d := s.started.Add(s.srv.opts.AuthTimeout); d.Before(deadline) {
			deadline = d
		}
	}
	s.client.SetReadDeadline(deadline)
	s.mu.Unlock()

	prefix, err = s.nextPrefix()
	if err == nil {
		return prefix, false, closeNone, nil
	}
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	switch {
	case draining:
		return nil, true, closeShutdown, nil
	case len(prefix) == 0 && errors.Is(err, io.EOF):
		return nil, true, closeClientEOF, nil
	case errors.Is(err, os.ErrDeadlineExceeded) && s.sasl != nil && !s.sasl.authed:
		return nil, true, closeAuthFailed, fmt.Errorf("not authenticated within %v", s.srv.opts.AuthTimeout)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, true, closeIdle, nil
	case isClosedErr(err):
		return nil, true, closeNone, nil
	}
	return nil, true, closeClientError, fmt.Errorf("read frame size: %w", err)
}

// readFrameStage is the frame stage: it checks the size prefix against the
// limit (smaller before SASL authentication) and hands the frame to its
// handler: the read stages (handleFrame), or a raw token after
// SaslHandshake v0. stop reports that the loop must end.
func (s *session) readFrameStage(prefix []byte) (stop bool, reason closeReason, err error) {
	limit := s.srv.opts.MaxFrameBytes
	if s.sasl != nil && !s.sasl.authed {
		limit = min(limit, s.srv.opts.MaxPreauthFrameBytes)
	}
	size, err := wire.CheckSize([4]byte(prefix), limit)
	if err != nil {
		s.hooks.Malformed(malformedCause(err))
		return true, closeMalformed, err
	}
	handle := s.handleFrame
	if s.sasl != nil && s.sasl.raw {
		handle = s.handleRawToken
	}
	err = handle(int(size))
	s.releaseHeld() // a body no backend took over (body.go)
	if err == nil {
		return false, closeNone, nil
	}
	var re *requestError
	if errors.As(err, &re) {
		if re.reason == closeMalformed {
			s.hooks.Malformed(malformedCause(re.err))
		}
		return true, re.reason, re.err
	}
	if isClosedErr(err) {
		return true, closeNone, nil
	}
	return true, closeClientError, err
}

// requestError carries the close reason for a bad request.
type requestError struct {
	reason closeReason
	err    error
}

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

func badRequest(reason closeReason, format string, args ...any) error {
	return &requestError{reason: reason, err: fmt.Errorf(format, args...)}
}

func (s *session) writeUpstream(frame []byte) error {
	if _, err := s.up.Write(frame); err != nil {
		return upstreamWriteErr(err)
	}
	return nil
}

// answer skips the request's frame and queues a response made by the
// gateway itself, in the request's slot of the order.
func (s *session) answer(h wire.RequestHeader, size int, body wire.Body) error {
	ch := make(chan result, 1)
	ch <- result{body: body}
	if err := s.push(pending{key: h.Key, version: h.Version, corr: h.Correlation, local: ch}); err != nil {
		return err
	}
	if _, err := s.cr.Discard(4 + size); err != nil {
		return badRequest(closeMalformed, "request truncated: %w", truncated(err))
	}
	return nil
}

// readerPool holds the read buffers of every session: a connection holds
// one only while it is moving bytes, so 10,000 idle connections do not pin
// 10,000 × 2 × 64 KiB.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}

func putReader(r **bufio.Reader) {
	if *r != nil {
		(*r).Reset(nil)
		readerPool.Put(*r)
		*r = nil
	}
}

// idleRead is how much the idle wait for a frame reads at once into the
// session itself: a small request (Fetch, Metadata, heartbeats) then
// arrives in one read call with its size prefix, where a 4-byte read of the
// prefix would take a second call for the body, and an idle connection
// still pins no pooled buffer.
const idleRead = 512

// prefixed replays the bytes the read loop read while idle (the size
// prefix and what came with it), then reads the client connection.
type prefixed struct {
	s    *session
	buf  [idleRead]byte
	n, m int // buf[n:m] is still to be replayed
}

func (p *prefixed) Read(b []byte) (int, error) {
	if p.n < p.m {
		k := copy(b, p.buf[p.n:p.m])
		p.n += k
		return k, nil
	}
	return p.s.client.Read(b)
}

// nextPrefix waits for the next frame and returns its size prefix. With
// nothing buffered, the read buffer goes back to the pool and the wait is
// a read of up to idleRead bytes (at least the 4 of the prefix) into the
// session; a buffer is taken again once a frame starts, and is handed
// those bytes first.
func (s *session) nextPrefix() ([]byte, error) {
	if s.cr != nil && s.cr.Buffered() > 0 {
		return s.cr.Peek(4)
	}
	putReader(&s.cr)
	n, err := io.ReadAtLeast(s.client, s.pre.buf[:], 4)
	if err != nil {
		if n > 0 && errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("connection ended inside a frame size: %w", err)
		}
		return s.pre.buf[:n], err
	}
	s.pre.s, s.pre.n, s.pre.m = s, 0, n
	s.cr = readerPool.Get().(*bufio.Reader)
	s.cr.Reset(&s.pre)
	return s.cr.Peek(4) // bufSize > idleRead: this takes every byte read
}

// idleWriter gives back what the write loop holds while nothing is in
// flight: the upstream read buffer (if it holds no early response) and a
// write buffer grown by a large response.
func (s *session) idleWriter() {
	if s.ur != nil && s.ur.Buffered() == 0 {
		putReader(&s.ur)
	}
	if cap(s.wbuf) > 16<<10 {
		s.wbuf = nil
	}
}

// frameDeadline is when a frame that starts now must have arrived: the
// frame timeout, and no later than the auth timeout on a SASL listener
// whose client has not authenticated yet.
func (s *session) frameDeadline() time.Time {
	d := time.Now().Add(s.srv.opts.FrameTimeout)
	if s.sasl != nil && !s.sasl.authed {
		if a := s.started.Add(s.srv.opts.AuthTimeout); a.Before(d) {
			return a
		}
	}
	return d
}

// push queues p for the write loop. A full queue (MaxInFlight requests
// unanswered) blocks the read loop, so the client is back-pressured by TCP
// instead of the gateway buffering without bound.
//
// An entry that carries a pooled request frame (obs.frame) holds its own
// reference to it, taken here and dropped by the write loop once it
// wrote the response or failed to (or by the session's close for entries
// never reached).
func (s *session) push(p pending) error {
	p.obs.frame.hold()
	pp := pendingPool.Get().(*pending)
	*pp = p
	select {
	case s.queue <- pp:
		if p.local != nil {
			s.wakeWriter() // no upstream response will wake it for this one
		}
		return nil
	case <-s.closed:
		putPending(pp)
		putFrame(p.obs.frame)
		return net.ErrClosed
	}
}

// pendingPool recycles queue entries: the queue holds pointers, so an idle
// connection's queue costs 8 bytes a slot, and a busy one allocates none.
var pendingPool = sync.Pool{New: func() any { return new(pending) }}

func putPending(p *pending) {
	*p = pending{}
	pendingPool.Put(p)
}

// forward copies the frame to the upstream: a frame that fits the buffer in
// one write straight from it, a larger one as its buffered part followed by a
// socket-to-socket copy of the rest.
func (s *session) forward(buf []byte, size int) error {
	total := 4 + size
	if len(buf) == total {
		if _, err := s.up.Write(buf); err != nil {
			return upstreamWriteErr(err)
		}
		_, err := s.cr.Discard(total)
		return err
	}
	n := s.cr.Buffered()
	head, _ := s.cr.Peek(n)
	if err := writeMore(s.up, head); err != nil { // the rest follows at once
		return upstreamWriteErr(err)
	}
	s.cr.Discard(n)
	rest := int64(total - n)
	tc, _ := s.client.(*tlsClient)
	// The buffer is empty now, so the rest can come from the socket itself.
	for rest > 0 {
		s.client.SetReadDeadline(time.Now().Add(s.srv.opts.FrameTimeout))
		chunk := min(rest, 1<<20)
		var (
			w   int64
			err error
		)
		if tc != nil {
			w, err = tc.copyTo(s.up, chunk) // tls_client.go: a write per 256 KiB, not per record
		} else {
			w, err = io.CopyN(s.up, s.client, chunk)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		rest -= w
		if err != nil {
			if w < chunk && (errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded)) {
				return badRequest(closeMalformed, "request truncated: %d bytes missing: %w", rest, truncated(err))
			}
			return err
		}
	}
	return nil
}

// handleLocal reads the whole request and hands it to the built-in broker.
func (s *session) handleLocal(h wire.RequestHeader, size int, expectResponse bool, p pending, j judged) error {
	var frame []byte
	switch {
	case j.forward != nil:
		// The policy rewrote the request; its header is kmsg's.
		fh, err := wire.ParseRequestHeader(j.forward[4:])
		if err != nil {
			return fmt.Errorf("re-encoded request: %w", err)
		}
		frame, h.Len, h.Version = j.forward[4:], fh.Len, fh.Version // policy may raise it (pending.fwdVersion)
	case j.whole != nil:
		frame = j.whole[4:]
	case wire.BodyReused(h.Key):
		// A Produce body is pooled: the backend keeps nothing of it once
		// Handle returns (wire.Request, Ownership).
		if _, err := s.cr.Discard(4); err != nil {
			return err
		}
		ref, err := s.readBody(size, false) // body.go: read as it arrives, within the budget
		if err != nil {
			return err
		}
		defer putFrame(ref)
		frame = ref.b
	default:
		if _, err := s.cr.Discard(4); err != nil {
			return err
		}
		var err error
		if frame, err = s.ownedBody(size); err != nil {
			return err
		}
	}
	release := s.takeHeld() // the broker has answered: the body is no longer in flight
	req := &wire.Request{Key: h.Key, Version: h.Version, Correlation: h.Correlation, Body: frame[h.Len:]}
	if !h.ClientIDNull {
		id := string(h.ClientID)
		req.ClientID = &id
	}
	var ch chan result
	if expectResponse {
		ch = make(chan result, 1)
		p.local = ch
		if err := s.push(p); err != nil {
			return err
		}
	}
	s.local.Handle(req, func(body wire.Body, err error) {
		release()
		switch {
		case ch != nil:
			ch <- result{body: body, err: err}
		case err != nil:
			s.close(s.backendCloseReason(err), err)
		}
	})
	return nil
}

// writeLoop writes responses in request order until the queue is closed
// and drained.
func (s *session) writeLoop() error {
	for {
		pp, ok := s.nextPending()
		if !ok {
			return nil
		}
		p := *pp
		putPending(pp)
		// A client that stops reading cannot hold the write loop forever;
		// large copies push the deadline forward as they progress.
		s.pushWriteDeadline()
		var err error
		if p.local != nil {
			err = s.writeLocal(p)
		} else {
			err = s.relayResponse(p)
		}
		// The entry's reference to its request frame (push), dropped
		// here whether the response was written or not: finish, which
		// reads the decoded request that aliases the frame, is done with
		// it, and an error before finish must not leak it (a frame mapped
		// outside the heap, frame_mem.go, has no collector to fall back
		// on).
		putFrame(p.obs.frame)
		if err != nil {
			return err
		}
		if p.answerSlot {
			<-s.tun.answerSlot
		}
		if !connectionSetup(p.key) {
			s.answered.Store(true)
		}
		if p.closeAfter {
			return errAuthFailed
		}
	}
}

// nextPending takes the next queue entry; ok is false once the queue is
// closed and empty. With none queued, the write loop gives back what it
// holds (idleWriter) and waits for the upstream's next response
// (awaitUpstream) before it waits on the queue: the read loop queues an
// entry before it forwards the request, so by the time the response
// arrives the entry is there, and queuing it wakes nobody. A goroutine
// woken through the queue for every request (a futex wake, a spinning
// thread) cost more than the netpoll wake-up the response brings anyway.
func (s *session) nextPending() (*pending, bool) {
	select {
	case pp, ok := <-s.queue:
		return pp, ok
	default:
	}
	s.idleWriter()
	if h := idleHook.Load(); h != nil {
		(*h)() // tests: widen the gap between the queue check and the wait
	}
	s.awaitUpstream()
	pp, ok := <-s.queue
	return pp, ok
}

// idleHook, when set (export_test.go), runs between nextPending's empty
// queue and its wait on the upstream.
var idleHook atomic.Pointer[func()]

// awaitUpstream waits until the upstream connection is readable, the
// read loop pokes (wakeWriter: it queued an entry the upstream does not
// answer, or closed the queue), or the connection closes. It returns at
// once where it cannot wait so (no plain TCP upstream, bytes already
// buffered). A spurious return costs nothing but the wait on the queue
// that follows, which is what every entry had before.
func (s *session) awaitUpstream() {
	if s.upRaw == nil || s.ur != nil && s.ur.Buffered() > 0 {
		return
	}
	s.idleMu.Lock()
	if s.poked {
		s.poked = false
		s.idleMu.Unlock()
		return
	}
	s.upWaiting = true
	s.idleMu.Unlock()
	// readableWait looks whether the upstream has bytes (or its end)
	// waiting already before it waits. The look is needed: a
	// response that arrived between the queue check and this wait would
	// otherwise wait for the next bytes from the upstream — a client with
	// one request in flight, for its own timeout (TestIdleWriterResponseAlreadyThere).
	// A poke is a read deadline in the past, which ends the wait with an
	// error, as a close does.
	s.upWait.wait(s.upRaw)
	s.idleMu.Lock()
	s.upWaiting, s.poked = false, false
	s.up.SetReadDeadline(time.Time{}) // a poke must not cut the reads that follow
	s.idleMu.Unlock()
}

// readableWait waits for a socket to be readable (bytes, its end or an
// error) or closed, through RawConn.Read. The first call of fn looks for
// bytes already there (pendingInput): the poller reports readiness once
// (edge-triggered), and RawConn.Read forgets what it saw before the
// call; the second, after the wait, ends it. Reused by one goroutine.
type readableWait struct {
	waited bool
	fn     func(fd uintptr) bool
}

// wait returns once c is readable or closed (the error is the caller's
// next read's to see).
func (w *readableWait) wait(c syscall.RawConn) {
	if w.fn == nil {
		w.fn = func(fd uintptr) bool {
			done := w.waited
			w.waited = true
			return done || pendingInput(fd)
		}
	}
	w.waited = false
	_ = c.Read(w.fn)
}

// wakeWriter ends the write loop's awaitUpstream wait, if it is in it,
// or keeps the next one from starting.
func (s *session) wakeWriter() {
	if s.upRaw == nil {
		return
	}
	s.idleMu.Lock()
	s.poked = true
	if s.upWaiting {
		s.up.SetReadDeadline(time.Unix(1, 0))
	}
	s.idleMu.Unlock()
}

// largeLocalBody is the in-memory answer size from which writeLocal
// writes header and body with one writev instead of joining them.
const largeLocalBody = 64 << 10

func (s *session) writeLocal(p pending) error {
	var r result
	select {
	case r = <-p.local:
	case <-s.closed:
		go releaseWhenDone(p.local)
		return net.ErrClosed
	}
	if r.err != nil {
		return &backendError{r.err}
	}
	if r.body == nil {
		return nil
	}
	if p.raw {
		b, _ := r.body.(wire.Bytes)
		return s.writeRaw(b)
	}
	body := r.body
	if a, ok := body.(*fetchAnswer); ok {
		if p.vc == nil && !p.adjusted() && !s.fullAudit(&p) {
			return s.writeFetchAnswer(p, a)
		}
		b, err := materialize(a) // releases a
		if err != nil {
			return &backendError{err}
		}
		body = wire.Bytes(b)
	}
	if p.vc != nil { // virtual cluster: the tenant's names (vcluster_stage.go)
		b, err := materialize(body)
		if err != nil {
			return &backendError{err}
		}
		out, err := vcAnswer(&p, b)
		if err != nil {
			return &backendError{err}
		}
		body = wire.Bytes(out)
	}
	if p.adjusted() {
		b, err := materialize(body)
		if err != nil {
			return &backendError{err}
		}
		out, err := adjust(p, b)
		if err != nil {
			return &backendError{err}
		}
		body = wire.Bytes(out)
	}
	if err := s.delayFor(p); err != nil {
		if r, ok := body.(wire.Releaser); ok {
			r.Release()
		}
		return err
	}
	if p.key == apis.Fetch || p.key == apis.ShareFetch {
		s.fetchBytes.Add(int64(body.Len()))
	}
	// The built-in broker's zero-copy Fetch bodies are streamed from disk
	// untouched: it is the only node, never answers NOT_LEADER, and so never
	// fills the KIP-951 endpoints. Everything else it answers is in memory
	// and rewritten like an upstream response.
	if b, ok := body.(wire.Bytes); ok && !p.addressed && (rewrite.Needs(p.key, p.version) || p.key == apis.ApiVersions) {
		out, _, err := s.rewrite(p, b)
		if err != nil {
			return &backendError{err}
		}
		body = wire.Bytes(out)
	}
	s.wbuf = wire.AppendResponseHeader(s.wbuf[:0], p.key, p.version, p.corr, body.Len())
	out := len(s.wbuf) + body.Len()
	if b, ok := body.(wire.Bytes); ok {
		if len(b) >= largeLocalBody {
			// One writev of header and body instead of copying a large
			// body (a merged single-port Fetch) behind the header.
			err := s.writeProgress(net.Buffers{s.wbuf, b})
			s.finish(&p, out, b)
			return err
		}
		s.wbuf = append(s.wbuf, b...)
		_, err := s.client.Write(s.wbuf)
		s.finish(&p, out, b)
		return err
	}
	s.noteFetched(&p, body) // observe.go: a zero-copy Fetch body's partitions, for audit
	if _, err := s.client.Write(s.wbuf); err != nil {
		if r, ok := body.(wire.Releaser); ok {
			r.Release()
		}
		return err
	}
	_, err := body.WriteTo(s.progressWriter()) // releases what it holds
	s.finish(&p, out, nil)
	return err
}

// progressWriter is the client connection for a body that writes itself
// (the built-in broker's Fetch, sent from the segment files): a plain TCP
// connection that pushes its write deadline when one passed while bytes
// still moved (sendfile, storage.DeadlinePusher), and on TLS a stepWriter.
func (s *session) progressWriter() io.Writer {
	if tc, ok := s.client.(*net.TCPConn); ok {
		return pushingConn{tc, s}
	}
	return stepWriter{s}
}

// pushingConn is a client's TCP connection whose write deadline
// (frame_timeout) bounds a write that makes no progress; it stays a
// *net.TCPConn for sendfile.
type pushingConn struct {
	*net.TCPConn
	s *session
}

func (c pushingConn) PushWriteDeadline() {
	c.s.pushWriteDeadline()
}

// writeFetchAnswer writes a merged single-port Fetch answer from its
// pieces (route_splice.go) with one writev, header first.
func (s *session) writeFetchAnswer(p pending, a *fetchAnswer) error {
	defer a.Release()
	if err := s.delayFor(p); err != nil {
		return err
	}
	s.fetchBytes.Add(int64(a.Len()))
	s.wbuf = wire.AppendResponseHeader(s.wbuf[:0], p.key, p.version, p.corr, a.Len())
	out := len(s.wbuf) + a.Len()
	var err error
	if a.frame.piped {
		err = a.writePiped(s, net.Buffers{s.wbuf})
	} else {
		err = s.writeProgress(a.buffers(net.Buffers{s.wbuf}))
	}
	s.finish(&p, out, a.start()) // the top-level fields, for the outcome
	return err
}

// coalescers buffer the pieces of an answer written to a connection
// without writev (TLS): one Write per piece would make a TLS record and
// a system call of each few-byte piece between two partitions' records.
var coalescers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

func writeCoalesced(w io.Writer, bufs net.Buffers) error {
	bw := coalescers.Get().(*bufio.Writer)
	defer coalescers.Put(bw)
	bw.Reset(w)
	defer bw.Reset(nil)
	for _, b := range bufs {
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// fullAudit reports whether p's audit record describes the answer, which
// finish then decodes from the whole body.
func (s *session) fullAudit(p *pending) bool {
	return p.obs.rec != nil && p.obs.req != nil && s.srv.opts.Audit.Level() == audit.Full
}

// writeProgress writes bufs to the client with one writev, and, on a plain
// TCP connection, keeps writing after a write deadline that passed while
// bytes still moved: the deadline (frame_timeout) bounds a write that
// makes no progress, not how long a large answer (a merged single-port
// Fetch of tens of MiB) takes to reach a slow but reading client. A TLS
// connection's state is lost once a write times out (crypto/tls), so
// there the answer is written in steps (stepWriter), each with a
// deadline of its own, its small pieces coalesced (writeCoalesced).
func (s *session) writeProgress(bufs net.Buffers) error {
	if _, tcp := s.client.(*net.TCPConn); !tcp {
		return writeCoalesced(stepWriter{s}, bufs)
	}
	for {
		n, err := bufs.WriteTo(s.client) // consumes what it wrote
		if err == nil || n == 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		s.pushWriteDeadline()
	}
}

// pushWriteDeadline gives the client's next write frame_timeout: the
// bound on a write that makes no progress.
func (s *session) pushWriteDeadline() {
	s.client.SetWriteDeadline(time.Now().Add(s.srv.opts.FrameTimeout))
}

// writeStep is how much of an answer stepWriter writes under one
// deadline, as a TLS copy writes per call (tlsCopyBuf): a client must
// take 256 KiB per frame_timeout (under 9 KB/s at the default 30 s) to
// stay connected.
const writeStep = tlsCopyBuf

// stepWriter writes to a client connection that cannot resume a timed-out
// write (TLS) in steps of at most writeStep bytes, pushing the write
// deadline before each, so the deadline bounds a step that makes no
// progress, not how long a large answer takes to reach a slow reader.
type stepWriter struct{ s *session }

func (w stepWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), writeStep)
		w.s.pushWriteDeadline()
		m, err := w.s.client.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// relayResponse moves the next upstream response to the client, rewriting
// it if it can carry addresses.
func (s *session) relayResponse(p pending) error {
	if s.ur == nil {
		s.ur = readerPool.Get().(*bufio.Reader)
		s.upr.c = s.up
		s.ur.Reset(&s.upr)
	}
	if s.ur.Buffered() == 0 && upstreamPath(&p) == pathStream {
		// A streamed Fetch's fields are its first few hundred bytes and
		// its records are spliced after what the buffer holds: a first
		// read of 64 KiB would move that much through user space twice
		// (read, then written to the client) for nothing.
		s.upr.max = fetchFirstRead
	}
	hdr, err := s.ur.Peek(8)
	s.upr.max = 0
	if err != nil {
		return &backendError{fmt.Errorf("read %s response: %w", apiName(p.key), truncated(err))}
	}
	size := int32(binary.BigEndian.Uint32(hdr))
	corr := int32(binary.BigEndian.Uint32(hdr[4:]))
	if size < 4 || size > maxResponseBytes {
		return &backendError{fmt.Errorf("upstream response size %d", size)}
	}
	if corr != p.corr {
		return &backendError{fmt.Errorf("upstream answered correlation id %d, expected %d (%s)", corr, p.corr, apiName(p.key))}
	}
	total := 4 + int(size)
	if err := s.delayFor(p); err != nil {
		return err
	}
	if p.key == apis.Fetch || p.key == apis.ShareFetch {
		s.fetchBytes.Add(int64(total))
	}
	switch upstreamPath(&p) {
	case pathStream:
		err := s.relayFetch(&p, total)
		s.finish(&p, total, nil)
		return err
	case pathRewrite:
		return s.relayRewritten(p, total)
	}
	return s.relaySplice(p, total)
}

// fetchFirstRead bounds the first read of a streamed Fetch response.
const fetchFirstRead = 4 << 10

// upReader is the upstream as the write loop's buffer reads it: each
// read at most max bytes while max > 0.
type upReader struct {
	c   net.Conn
	max int
}

func (u *upReader) Read(b []byte) (int, error) {
	if u.max > 0 && len(b) > u.max {
		b = b[:u.max]
	}
	return u.c.Read(b)
}

// writePath is how the write side moves one upstream response to the
// client.
type writePath uint8

const (
	// pathSplice: the frame untouched, in one write from the buffer or
	// socket to socket (splice on Linux).
	pathSplice writePath = iota
	// pathStream: a flexible Fetch, its header and KIP-951 tail rewritten
	// to the same length, its record sets spliced (fetch_stream.go).
	pathStream
	// pathRewrite: read whole, then merged with policy's denied parts and
	// throttle, rewritten (addresses, the ApiVersions clamp), or decoded
	// for a full audit record or a pass-through SASL verdict
	// (relayRewritten).
	pathRewrite
)

// upstreamPath chooses the write path of p's response. Fetch streams even
// when fully audited: the walker reports what each partition returned.
func upstreamPath(p *pending) writePath {
	fullAudit := p.obs.rec != nil && p.obs.req != nil
	switch {
	case p.key == apis.Fetch && p.merge == nil && p.vc == nil && wire.IsFlexible(p.key, p.version):
		return pathStream
	case p.vc != nil || fullAudit || p.adjusted() || rewrite.Needs(p.key, p.version) || p.key == apis.ApiVersions || p.saslUser != "":
		return pathRewrite
	}
	return pathSplice
}

// relaySplice moves a response frame of total bytes untouched.
func (s *session) relaySplice(p pending, total int) error {
	defer s.finish(&p, total, nil)
	if total <= bufSize {
		frame, err := s.ur.Peek(total)
		if err != nil {
			return &backendError{fmt.Errorf("read %s response: %w", apiName(p.key), truncated(err))}
		}
		if _, err := s.client.Write(frame); err != nil {
			return err
		}
		_, err = s.ur.Discard(total)
		return err
	}
	n := s.ur.Buffered()
	head, _ := s.ur.Peek(n)
	if err := writeMore(s.client, head); err != nil { // the rest follows at once
		return err
	}
	s.ur.Discard(n)
	return s.copyToClient(s.client, int64(total-n))
}

// copyToClient moves n bytes from the upstream socket to w (the client,
// possibly through a wrapper that tags its errors), socket to socket where
// the platform allows, in chunks that each push the write deadline.
func (s *session) copyToClient(w io.Writer, n int64) error {
	for n > 0 {
		s.pushWriteDeadline()
		chunk := min(n, 1<<20)
		c, err := io.CopyN(w, s.up, chunk)
		n -= c
		if err != nil {
			return err
		}
	}
	return nil
}

// relayRewritten reads a whole response, rewrites its addresses and writes
// it in one call.
func (s *session) relayRewritten(p pending, total int) error {
	if cap(s.rbuf) < total {
		s.rbuf = make([]byte, total)
	}
	frame := s.rbuf[:total]
	defer s.trimReadBuffer()
	if _, err := io.ReadFull(s.ur, frame); err != nil {
		return &backendError{fmt.Errorf("read %s response: %w", apiName(p.key), truncated(err))}
	}
	hl := 8
	if wire.ResponseHeaderLen(p.key, p.version) == 5 {
		n, err := wire.SkipTags(frame[8:])
		if err != nil {
			return &backendError{fmt.Errorf("%s response header: %w", apiName(p.key), err)}
		}
		hl += n
	}
	body := frame[hl:]
	if p.saslUser != "" && len(body) >= 2 && body[0] == 0 && body[1] == 0 {
		// SaslAuthenticate's first field is its error code: accepted.
		u := p.saslUser
		s.passPrincipal.Store(&u)
	}
	vcDone := false
	if p.vc != nil { // virtual cluster: the tenant's names first (vcluster_stage.go)
		out, err := vcAnswer(&p, body)
		if err != nil {
			return &backendError{err}
		}
		body, vcDone = out, true
	}
	adjusted := p.adjusted()
	if adjusted {
		out, err := adjust(p, body)
		if err != nil {
			return &backendError{err}
		}
		body = out
	}
	body, rewritten, err := s.rewrite(p, body)
	if err != nil {
		return &backendError{err}
	}
	if !adjusted && !rewritten && !vcDone {
		_, err = s.client.Write(frame) // nothing to change
		s.finish(&p, len(frame), body)
		return err
	}
	s.wbuf = append(s.wbuf[:0], frame[:hl]...)
	s.wbuf = append(s.wbuf, body...)
	binary.BigEndian.PutUint32(s.wbuf, uint32(len(s.wbuf)-4))
	_, err = s.client.Write(s.wbuf)
	s.finish(&p, len(s.wbuf), body)
	return err
}

// trimReadBuffer drops a read buffer grown by one large response, so an
// idle connection does not pin it.
func (s *session) trimReadBuffer() {
	if cap(s.rbuf) > 1<<20 {
		s.rbuf = nil
	}
}

// rewrite applies the response transforms of the write side to a body in
// memory: the ApiVersions clamp (and the SASL and hidden-key edits), or
// the address rewrite. changed is false only when out is body itself,
// untouched (rewrite.Response's flag); the clamp always reports a change.
func (s *session) rewrite(p pending, body []byte) (out []byte, changed bool, err error) {
	eng := s.srv.policy.Load()
	if p.key == apis.ApiVersions {
		var mustDecode func(int16) bool
		if eng != nil {
			// Rules may need any body decoded: offer only versions kmsg knows.
			mustDecode = func(int16) bool { return true }
		}
		out, err = rewrite.ApiVersions(p.version, body, mustDecode)
		if err != nil {
			return nil, false, fmt.Errorf("clamp ApiVersions: %w", err)
		}
		if err == nil && s.sasl != nil {
			out, err = offerKeys(p.version, out, saslKeys)
		}
		if err == nil {
			out, err = s.offerAnswered(p.version, out) // keys the gateway answers itself (answer_versions.go)
		}
		if err == nil && len(p.hide) > 0 {
			out, err = hideKeys(p.version, out, p.hide)
		}
		return out, true, err
	}
	out, changed, err = rewrite.Response(p.key, p.version, body, &s.mapper) // a pointer: the value would be boxed, an allocation per response
	if err != nil {
		return nil, false, fmt.Errorf("rewrite %s v%d response: %w", apiName(p.key), p.version, err)
	}
	if changed {
		s.hooks.Rewrite(p.key)
	}
	// Topic ids (KIP-516) are resolved for policy rules and for full
	// audit records, which name the topics of Produce and Fetch v13+.
	if p.key == apis.Metadata && p.vc == nil && (eng != nil || s.srv.opts.Audit.Level() == audit.Full) {
		s.srv.learnMetadata(p.version, out)
	}
	return out, changed, nil
}

// releaseWhenDone waits for a response nobody will write and releases it.
// The backend calls done exactly once, and closing the connection cancels
// its long polls, so this goroutine ends.
func releaseWhenDone(ch <-chan result) {
	if r, ok := (<-ch).body.(wire.Releaser); ok {
		r.Release()
	}
}

// backendError marks a failure on the upstream (or built-in broker) side.
type backendError struct{ err error }

func (e *backendError) Error() string { return e.err.Error() }
func (e *backendError) Unwrap() error { return e.err }

func upstreamWriteErr(err error) error {
	return &requestError{reason: closeUpstreamError, err: fmt.Errorf("write upstream: %w", err)}
}

func classifyWriteErr(err error) closeReason {
	var be *backendError
	switch {
	case errors.Is(err, errAuthFailed):
		return closeAuthFailed
	case errors.As(err, &be):
		return closeUpstreamError
	case isClosedErr(err):
		return closeClientEOF
	}
	return closeClientError
}

// truncated turns a short read into an error that says so.
func truncated(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func isClosedErr(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
