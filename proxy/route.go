package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/rewrite"
	"github.com/tollgate-kafka/tollgate/wire"
)

// Single-port mode (brokers: single-port): the listener presents the
// whole upstream cluster as one virtual broker, and the "route" stage
// sends each request — or each partition of it — to the upstream broker
// that must answer it, by the key's routing class in the table of API
// facts (apis.Info.Routing; docs/protocol.md §1.4). The answer, merged
// and with every node id made the virtual one (route_nodes.go), goes back
// through the queue entry like a built-in broker's answer, so the stages
// before and the write side after never learn how many brokers a request
// touched.

// SinglePortOptions configures a single-port listener.
type SinglePortOptions struct {
	VirtualNode int32 // the node id clients see (default 0)
	// NoFetchAhead turns fetch-aheads off (route_fetch_ahead.go): each
	// broker is asked only when the client's Fetch arrives.
	NoFetchAhead bool
}

// tunnel is one single-port session's routing state.
// Ownership: the read loop owns conns and calls route; it changes conns
// under the session's connMu (adopt), which close, from any goroutine,
// holds while it ranges over them. Reply callbacks run on brokerConn
// reader goroutines.
type tunnel struct {
	s       *session
	view    *clusterView
	virtual int32
	conns   map[int32]*brokerConn
	adv     rewrite.Mapper // the listener's addresses (the session's mapper)
	// clientID is the client's id (from its latest request header), sent
	// on the upstream connections the tunnel dials.
	clientID string
	// share is the tunnel's gateway-owned share sessions (route_share.go).
	share *shareState
	// fetch is the client's fetch session and the gateway's upstream
	// ones (route_fetch_session.go); nil until the first v7+ Fetch that
	// opens one.
	fetch *fetchState
	// trace collects the brokers the request being routed reaches, for
	// its audit record (route_audit.go); set only while route runs.
	trace *routeTrace
	// telemetryNode is the broker that gets this tunnel's KIP-714
	// telemetry (route_any.go); nil until the first telemetry request.
	telemetryNode *int32
	// answerSlot is held by the one Fetch or ShareFetch whose answer the
	// session may hold in memory (awaitAnswerSlot).
	answerSlot chan struct{}
	// pipe: the client's connection is plain TCP (on Linux), so Fetch
	// answers' large record sets may travel in pipes (pipe_records.go).
	pipe bool
	// ahead: answers fetch ahead (route_fetch_ahead.go).
	ahead bool
}

func newTunnel(s *session, o *SinglePortOptions) *tunnel {
	t := &tunnel{s: s, view: s.srv.clusterView(), virtual: o.VirtualNode, conns: map[int32]*brokerConn{}, adv: s.mapper,
		answerSlot: make(chan struct{}, 1), pipe: rawConn(s.client) != nil, ahead: !o.NoFetchAhead}
	t.fetchSessions() // made here, so that close (from any goroutine) reads it unraced
	return t
}

// clusterView returns the Server's shared view, made on first use.
func (s *Server) clusterView() *clusterView {
	s.viewOnce.Do(func() { s.view = newClusterView(s) })
	return s.view
}

func (t *tunnel) close() {
	if fs := t.fetch; fs != nil {
		fs.mu.Lock()
		fs.closed = true
		fs.dropAllOut() // answers held for a next Fetch that will not come
		fs.mu.Unlock()
	}
	for _, c := range t.conns {
		c.close()
		t.s.hooks.UpstreamConns(-1, c.node)
	}
}

// reply delivers a routed request's answer to its queue entry (nil for
// a Produce with acks=0, which gets none).
type reply func(kmsg.Response, error)

// routeStage is stageRoute for readStages; the indirection (set in init)
// breaks the initialization cycle through learnBroker, which starts
// sessions that run readStages.
func routeStage(s *session, r *request) (bool, error) { return routeStageFn(s, r) }

var routeStageFn func(*session, *request) (bool, error)

func init() { routeStageFn = (*session).stageRoute }

var errNoParts = errors.New("a routed request with no parts")

// stageRoute, in single-port mode, decodes the request and routes it;
// the answer arrives on the entry's channel. Elsewhere it passes.
func (s *session) stageRoute(r *request) (bool, error) {
	if s.tun == nil {
		return false, nil
	}
	if string(r.h.ClientID) != s.tun.clientID {
		s.tun.clientID = string(r.h.ClientID)
	}
	req, err := s.routedRequest(r)
	if err != nil {
		if !r.expectResponse { // the entry stage left its accounting to this stage
			s.acksZeroDone(r.h, r.obs)
		}
		return true, err
	}
	var tr *routeTrace // only for a request the audit trail records
	if r.obs.rec != nil {
		tr = &routeTrace{}
	}
	var rep reply
	if r.expectResponse && (r.h.Key == apis.Fetch || r.h.Key == apis.ShareFetch) {
		if err := s.awaitAnswerSlot(); err != nil {
			return true, err
		}
		r.p.answerSlot = true
	}
	if r.h.Key == apis.Produce && !s.fullAudit(&r.p) {
		// The parts are written before route returns, each with the
		// client's record bytes spliced from the frame (route_splice.go),
		// and nothing reads them after (mergeProduce reads names and
		// partitions, which kmsg copied): the frame goes back when the
		// read loop lets go of it, not once the answer is written, so
		// Produces in flight upstream do not each pin one. A full audit
		// describes the records from the decoded request after the
		// answer, so it keeps the frame. The decoded request aliases the
		// frame, so it goes too: should the audit level turn full before
		// the answer (a tap attached), finish must not describe records
		// whose bytes are gone.
		r.p.obs.frame, r.p.obs.req = nil, nil
	}
	if r.expectResponse {
		rec := r.p.obs.rec // r is reused by the next frame: the reply must not read it
		ch := make(chan result, 1)
		r.p.local = ch
		r.p.addressed = r.h.Key == apis.Produce || r.h.Key == apis.Fetch
		if err := s.push(r.p); err != nil {
			return true, err
		}
		rep = func(resp kmsg.Response, err error) {
			tr.note(rec) // before the answer: the write side logs the record after it
			if err != nil {
				ch <- result{err: err}
				return
			}
			ch <- s.tun.encodeAnswer(resp)
		}
	}
	s.tun.trace = tr
	err = s.tun.route(req, rep)
	s.tun.trace = nil
	if !r.expectResponse {
		tr.note(r.obs.rec)
		s.acksZeroDone(r.h, r.obs) // after routing, so its record names the leaders written to
	}
	return true, err
}

// awaitAnswerSlot waits until no earlier Fetch or ShareFetch of the
// session has an answer still unwritten. A single-port answer is read
// whole from the upstream and merged in memory before it is written
// (port-per-broker streams it, socket to socket), so without this a
// client that pipelines Fetches and stops reading would make its session
// read and hold up to max_in_flight answers of up to its fetch max bytes
// each. With it, a session holds one: the next Fetch waits, unread and
// so back-pressuring the client, until the previous answer is written,
// and a client that reads nothing is closed by the write deadline
// (write_timeout). Kafka, too, serves one request of a connection at a
// time, muting the channel until its response is sent; clients send one
// Fetch per broker at a time, so none of them waits here.
func (s *session) awaitAnswerSlot() error {
	select {
	case s.tun.answerSlot <- struct{}{}:
		return nil
	case <-s.closed:
		return net.ErrClosed
	}
}

// routedRequest is the client's request as policy left it: re-encoded
// when policy removed denied parts, else the client's own.
func (s *session) routedRequest(r *request) (kmsg.Request, error) {
	if f := r.j.forward; f != nil {
		fh, err := wire.ParseRequestHeader(f[4:])
		if err != nil {
			return nil, fmt.Errorf("re-encoded request: %w", err)
		}
		return decodeRequest(fh, f)
	}
	if r.j.req != nil {
		return r.j.req, nil
	}
	if !r.h.Known {
		return nil, badRequest(closeUnsupported, "%s v%d was not offered by the gateway", apiName(r.h.Key), r.h.Version)
	}
	if err := s.readWholeOnce(r); err != nil {
		return nil, err
	}
	return decodeRequest(r.h, r.j.whole)
}

// route dispatches by the key's routing class.
func (t *tunnel) route(req kmsg.Request, rep reply) error {
	t.sendShareCloses() // dropped share sessions' upstream halves first (route_share_merge.go)
	if handled, err := t.routeAdmin(req, rep); handled {
		return err
	}
	key := req.Key()
	switch apis.Of(key).Routing {
	case apis.GatewayAnswered:
		return t.answerGateway(req, rep)
	case apis.AnyBroker, apis.Controller:
		return t.routeAnyBroker(req, rep)
	case apis.PartitionLeader:
		return t.routeLeaders(req, rep)
	case apis.GroupCoordinator, apis.TxnCoordinator:
		return t.routeCoordinator(req, rep)
	case apis.FanOut:
		return t.routeFanOut(req, rep)
	}
	return badRequest(closeUnsupported, "%s is not served in single-port mode (an inter-broker or unknown API)", apiName(key))
}

// encodeAnswer encodes a routed answer. A Fetch answer is written from
// its fields' encoding and the parts' record bytes as read (fetchAnswer,
// route_splice.go): no copy of the records, no buffer the size of the
// answer.
func (t *tunnel) encodeAnswer(resp kmsg.Response) result {
	var pinned []*partBody
	if p, ok := resp.(*pinnedFetch); ok {
		resp, pinned = p.FetchResponse, p.bodies
	}
	if f, ok := resp.(*kmsg.FetchResponse); ok {
		a := &fetchAnswer{parts: pinned}
		piped := pipedLookup(pinned)
		if spliceFetch(f, &a.frame, piped) == nil {
			return result{body: a}
		}
		a.Release()
		if piped != nil {
			// The placeholders cannot be encoded as records.
			return result{err: errSpliceWalk}
		}
		// Cannot happen (kmsg wrote what the walk reads): copy instead.
		return result{body: wire.Bytes(resp.AppendTo(make([]byte, 0, t.sizeHint(resp))))}
	}
	return result{body: wire.Bytes(resp.AppendTo(make([]byte, 0, t.sizeHint(resp))))}
}

// sizeHint guesses an encoded answer's size from the parts' sizes, so
// a large Fetch answer is encoded into one allocation.
func (t *tunnel) sizeHint(resp kmsg.Response) int {
	if f, ok := resp.(*kmsg.FetchResponse); ok {
		n := 256
		for _, tp := range f.Topics {
			n += 64 + len(tp.Topic)
			for _, p := range tp.Partitions {
				n += 96 + len(p.RecordBatches) + 24*len(p.AbortedTransactions)
			}
		}
		return n
	}
	return 512
}

// conn returns the session's connection to node, dialling it lazily.
func (t *tunnel) conn(node int32) (*brokerConn, error) {
	if c, ok := t.conns[node]; ok && !c.isFailed() {
		return c, nil
	} else if ok {
		if !t.s.adopt(func() { delete(t.conns, node); t.s.hooks.UpstreamConns(-1, node) }) {
			return nil, errConnClosedHere // close counted it
		}
	}
	// A failure is the upstream's: a request that needs the broker and
	// cannot have it closes the session as upstream_error (reset before
	// any answer, upstream_faults.go), not as the client's error.
	if err := t.s.srv.tunnelDials.held(node); err != nil {
		return nil, &requestError{reason: closeUpstreamError, err: err} // route_dial.go
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.s.srv.opts.DialTimeout)
	defer cancel()
	start := time.Now()
	c, _, err := t.s.srv.dialUpstream(ctx, node)
	t.s.hooks.UpstreamDial(node, time.Since(start), err)
	t.s.srv.tunnelDials.done(node, err)
	if err != nil {
		return nil, &requestError{reason: closeUpstreamError, err: err}
	}
	bc := newBrokerConn(node, c, t.clientID)
	// Under the session's connMu, as close ranges over conns from
	// whichever goroutine closes the session: a connection dialled after
	// that is closed here, not left open.
	if !t.s.adopt(func() { t.conns[node] = bc; t.s.hooks.UpstreamConns(1, node) }) {
		bc.close()
		return nil, errConnClosedHere // not the broker's failure: nothing to invalidate
	}
	return bc, nil
}

// scatter sends parts (node → request) and, when every answer is in,
// calls merge and delivers its result. merge is not called for a request
// that gets no answer (rep nil). A part that fails (no connection, or
// the connection broke) closes the client connection.
func (t *tunnel) scatter(parts map[int32]kmsg.Request, rep reply, merge func(map[int32]kmsg.Response) (kmsg.Response, error)) error {
	return t.scatterParts(parts, rep, merge, false)
}

// scatterPartial is scatter for requests whose merge answers a missing
// part's partitions with a retriable error (Produce, Fetch): a broker
// that cannot be reached costs the client a retry of those partitions,
// not its connection.
func (t *tunnel) scatterPartial(parts map[int32]kmsg.Request, rep reply, merge func(map[int32]kmsg.Response) (kmsg.Response, error)) error {
	return t.scatterParts(parts, rep, merge, true)
}

func (t *tunnel) scatterParts(parts map[int32]kmsg.Request, rep reply, merge func(map[int32]kmsg.Response) (kmsg.Response, error), partial bool) error {
	if len(parts) == 0 {
		return fmt.Errorf("internal: %w", errNoParts)
	}
	g := &gather{got: make(map[int32]kmsg.Response, len(parts)), rep: rep, merge: merge, partial: partial, trace: t.trace}
	g.left.Store(int32(len(parts)))
	for node, req := range parts {
		call := &partCall{node: node, req: req, pipe: t.pipe}
		call.done = func() { g.finish(t, call.node, call.resp, call.body, call.err) }
		queued, err := t.sendPart(call, rep != nil)
		switch {
		case err == nil:
			if rep == nil { // acks=0: written is all it gets
				g.trace.add(node)
			}
		case !partial:
			return err
		case !queued && rep != nil:
			g.finish(t, node, nil, nil, err)
		}
	}
	return nil
}

// sendPart writes call to its broker, dialled if need be; queued is
// brokerConn.send's (false: done is never called).
func (t *tunnel) sendPart(call *partCall, expectResponse bool) (queued bool, err error) {
	bc, err := t.conn(call.node)
	if err != nil {
		return false, err
	}
	return bc.send(call, expectResponse)
}

// partFailed notes a part of a partial request that got no answer: the
// view is refreshed, and the event counted and logged.
func (t *tunnel) partFailed(node int32, err error) {
	t.view.invalidate(true, nil)
	t.event(routePartFailed, "single-port: an upstream broker did not answer; its part is answered as unavailable (retriable)", "node", node, "err", err)
}

// gather collects the answers of one scattered request.
// Ownership: shared by the parts' done callbacks (reader goroutines);
// got and firstErr behind mu; the last finish delivers.
type gather struct {
	mu       sync.Mutex
	got      map[int32]kmsg.Response
	firstErr error
	left     atomic.Int32
	rep      reply
	merge    func(map[int32]kmsg.Response) (kmsg.Response, error)
	partial  bool
	// bodies are the pooled frames the answers alias (Fetch parts),
	// returned once rep has encoded the merged answer.
	bodies []*partBody
	trace  *routeTrace // the brokers that answered (nil: not traced)
	// real maps a gather key that is not a node id (a share follow-up,
	// followKey) to its broker, for the trace and the logs.
	real map[int32]int32
}

func (g *gather) finish(t *tunnel, key int32, resp kmsg.Response, body *partBody, err error) {
	node := key
	if n, ok := g.real[key]; ok {
		node = n
	}
	g.mu.Lock()
	if body != nil {
		g.bodies = append(g.bodies, body)
	}
	switch {
	case err == nil:
		g.got[key] = resp
		g.trace.add(node)
	case errors.Is(err, errConnClosedHere):
		// The client's session ended with this part in flight: no one
		// reads the answer, and the broker and the view are fine.
		if g.firstErr == nil {
			g.firstErr = err
		}
	case g.partial:
		t.partFailed(node, err)
	case g.firstErr == nil:
		g.firstErr = err
	}
	g.mu.Unlock()
	if g.left.Add(-1) != 0 {
		return
	}
	defer g.release()
	if g.firstErr != nil {
		g.rep(nil, g.firstErr)
		return
	}
	merged, err := g.merge(g.got)
	if f, ok := merged.(*kmsg.FetchResponse); ok && err == nil && len(g.bodies) > 0 {
		// The answer is written from the parts' frames (encodeAnswer):
		// they go back to the pool once it is written, not here.
		merged, g.bodies = &pinnedFetch{FetchResponse: f, bodies: g.bodies}, nil
	}
	g.rep(merged, err)
}

// pinnedFetch is a merged Fetch answer with the pooled part frames its
// record batches alias; encodeAnswer hands them on to the written body.
type pinnedFetch struct {
	*kmsg.FetchResponse
	bodies []*partBody
}

// release returns the parts' pooled frames. rep encodes the merged
// answer before it returns (stageRoute), so nothing aliases them now.
func (g *gather) release() {
	for _, b := range g.bodies {
		b.release()
	}
	g.bodies = nil
}

// one sends the whole request to node; post may adjust the answer.
func (t *tunnel) one(node int32, req kmsg.Request, rep reply, post func(kmsg.Response)) error {
	return t.scatter(map[int32]kmsg.Request{node: req}, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		resp := m[node]
		if post != nil {
			post(resp)
		}
		return resp, nil
	})
}

// routeAny sends the whole request to any upstream broker.
func (t *tunnel) routeAny(req kmsg.Request, rep reply) error {
	node, err := t.reachableBroker()
	if err != nil {
		return err
	}
	return t.one(node, req, rep, t.virtualize)
}

// reachableBroker picks a broker for a request any broker can answer,
// passing over one that cannot be dialled: a broker that left the
// cluster stays in the view's list until the next Metadata answer, which
// the failed dial asks for (refresh), so a client connecting after a
// broker left is not closed for it.
func (t *tunnel) reachableBroker() (int32, error) {
	var errs []error
	for range max(1, len(t.view.liveBrokers())) {
		node, err := t.view.anyBroker()
		if err != nil {
			return 0, err
		}
		_, err = t.conn(node)
		if err == nil {
			return node, nil
		}
		errs = append(errs, err)
		t.event(routePartFailed, "single-port: an upstream broker could not be dialled; trying another", "node", node, "err", err)
		t.view.invalidate(true, nil)
		ctx, cancel := context.WithTimeout(context.Background(), t.s.srv.opts.DialTimeout)
		err = t.view.refresh(ctx)
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return 0, errors.Join(errs...)
}
