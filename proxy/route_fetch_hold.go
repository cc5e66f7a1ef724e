package proxy

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Held parts: an incremental session Fetch split over several brokers
// is answered as soon as the parts that are in carry records (at least
// the client's MinBytes), not when the last part is in. The parts still
// out stay out: each one's answer is held (fetchState.out) for the
// client's next Fetch, which reuses it instead of asking that broker
// again, so while the client works through one broker's records the
// others' are already on their way, as they would be with a connection
// per broker (port-per-broker). Without this a client kept one Fetch in
// flight through the one port, every answer waited for its slowest
// part, and the brokers idled while the client read.
//
// This is what Kafka's incremental fetch sessions allow (KIP-227): an
// incremental answer lists only the partitions with news, and a
// partition left out is unchanged for the client, whose next request
// then does not touch it. A held part is reused only when the client's
// session still asks that broker for exactly what the part asked
// (sameFetchParams for each of its partitions, no partition added or
// gone: fetchState.unchanged); otherwise its answer is dropped and that
// broker's upstream session starts again with a full request (reset),
// since the broker already counted the dropped answer as sent. Full
// and sessionless fetches wait for every part, as before. An
// incremental Fetch of one broker is a round too (of one part, answered
// when it is in), so its answer fetches ahead (route_fetch_ahead.go).
//
// Memory: a session holds at most one answer per upstream broker beyond
// the one being written (its fields and small record sets in pooled
// frames, its large record sets in pipes, pipe_records.go).
//
// Ownership: heldPart and fetchRound are fetchState's, under its mu; a
// part's answer is filled in by its brokerConn reader (holdArrived).

// heldPart is one upstream part of a held-mode Fetch.
type heldPart struct {
	node  int32
	gen   uint32 // the upstream generation it was planned in
	opens bool   // it opens the upstream session (epoch 0)
	// ahead: a fetch-ahead, asking what the client's next Fetch is
	// predicted to (route_fetch_ahead.go).
	ahead bool
	// conn is the connection the part was sent on (set when it arrived).
	conn *brokerConn
	// arrived: resp, body and err are set.
	arrived bool
	resp    kmsg.Response
	body    *partBody
	err     error
	// round is the client Fetch waiting for this part; nil once that
	// Fetch was answered without it (the part is then in fs.out, or
	// dropped).
	round *fetchRound
}

// records is the record bytes the part's answer carries (in memory and
// in pipes).
func (h *heldPart) records() int {
	fr, ok := h.resp.(*kmsg.FetchResponse)
	if !ok || h.err != nil {
		return 0
	}
	n := h.body.pipedBytes()
	for _, tp := range fr.Topics {
		for _, p := range tp.Partitions {
			n += len(p.RecordBatches)
		}
	}
	return n
}

// fetchRound is one client Fetch answered from held parts.
type fetchRound struct {
	r     *kmsg.FetchRequest
	plan  *fetchPlan
	rep   reply
	trace *routeTrace
	parts map[int32]*heldPart
	// sending: parts are still being written upstream; the round is
	// not answered before they all are.
	sending bool
	done    bool
}

// ready reports whether the round can be answered: every part is in,
// or those in carry at least the client's MinBytes of records (and one
// byte at least).
func (r *fetchRound) ready() bool {
	in, bytes := true, 0
	for _, h := range r.parts {
		if !h.arrived {
			in = false
			continue
		}
		bytes += h.records()
	}
	return in || bytes >= max(int(r.r.MinBytes), 1)
}

// unchanged reports whether u's broker session holds exactly keys with
// the parameters the client's session has for them now: the part last
// sent to it asks for what the client wants.
func (fs *fetchState) unchanged(u *fetchUpstream, keys []fsKey) bool {
	if len(u.held) != len(keys) || u.full {
		return false
	}
	for _, k := range keys {
		h, ok := u.held[k]
		p := fs.parts[k]
		if !ok || p == nil || !sameFetchParams(&h, &p.req) {
			return false
		}
	}
	return true
}

// dropOut drops the part held for node n: its answer is never
// delivered, so n's upstream session starts again (reset). The caller
// holds mu.
func (fs *fetchState) dropOut(n int32) {
	h := fs.out[n]
	if h == nil {
		return
	}
	delete(fs.out, n)
	if h.arrived {
		h.body.release()
		h.body = nil
	}
	if u := fs.up[n]; u != nil && u.gen == h.gen {
		fs.reset(u)
	}
}

// dropAllOut drops every held part. The caller holds mu.
func (fs *fetchState) dropAllOut() {
	for n := range fs.out {
		fs.dropOut(n)
	}
}

// takeOut returns the part held for node n if the client's session
// still wants what it asked (see unchanged), removing it from out; a
// part that no longer fits is dropped. The caller holds mu.
func (fs *fetchState) takeOut(n int32, u *fetchUpstream, keys []fsKey) *heldPart {
	h := fs.out[n]
	if h == nil {
		return nil
	}
	if h.gen != u.gen || !fs.unchanged(u, keys) {
		if h.ahead && h.gen == u.gen { // the client asked otherwise (not a reset since)
			aheadStats.missed.Add(1)
			u.aheadBackoff = min(max(2*u.aheadBackoff, aheadBackoffMin), aheadBackoffMax)
			u.skipAhead = u.aheadBackoff
		}
		fs.dropOut(n)
		return nil
	}
	if h.ahead {
		aheadStats.used.Add(1)
		u.aheadBackoff = 0
		h.ahead = false // counted once, though an answer may go without it (back to fs.out)
	}
	delete(fs.out, n)
	return h
}

// sendHeld writes a held-mode round's new parts; reused ones are in
// round.parts already. Then the round is answered if it is ready.
func (t *tunnel) sendHeld(round *fetchRound, parts map[int32]kmsg.Request) {
	for n, req := range parts {
		h := round.parts[n]
		if h == nil { // a part that only closes a session: nothing waits for it
			call := &partCall{node: n, req: req}
			call.done = func() { call.body.release() }
			t.sendPart(call, true)
			continue
		}
		call := &partCall{node: n, req: req, pipe: t.pipe, walk: t.ahead}
		call.done = func() { t.holdArrived(h, call) }
		if queued, err := t.sendPart(call, true); err != nil && !queued {
			call.err = err
			call.done()
		}
	}
	t.fetch.mu.Lock()
	round.sending = false
	t.fetch.mu.Unlock()
	t.answerHeld(round)
}

// holdArrived records a held-mode part's answer (a brokerConn reader
// calls it) and answers its round if that is now ready.
func (t *tunnel) holdArrived(h *heldPart, call *partCall) {
	fs := t.fetch
	fs.mu.Lock()
	h.resp, h.body, h.err, h.arrived, h.conn = call.resp, call.body, call.err, true, call.conn
	round := h.round
	if round == nil && (fs.closed || fs.out[h.node] != h) { // dropped while in flight
		h.body.release()
		h.body = nil
	}
	fs.mu.Unlock()
	if round != nil {
		t.answerHeld(round)
	}
}

// answerHeld answers round once it is ready: with the parts that are
// in; the others move to fs.out for the next Fetch.
func (t *tunnel) answerHeld(round *fetchRound) {
	fs := t.fetch
	fs.mu.Lock()
	if round.done || round.sending || !round.ready() {
		fs.mu.Unlock()
		return
	}
	round.done = true
	ahead := t.ahead && fs.lastRound == round // no later Fetch planned: this answer may fetch ahead
	m := make(map[int32]kmsg.Response, len(round.parts))
	var bodies []*partBody
	var closedHere error
	for n, h := range round.parts {
		h.round = nil
		if !h.arrived {
			round.plan.deferred[n] = true
			if !fs.closed { // else released when it arrives (holdArrived)
				fs.out[n] = h
			}
			continue
		}
		if h.body != nil {
			bodies = append(bodies, h.body)
			h.body = nil
		}
		switch {
		case h.err == nil:
			m[n] = h.resp
			round.trace.add(n)
		case errors.Is(h.err, errConnClosedHere):
			closedHere = h.err
		default:
			t.partFailed(n, h.err)
		}
	}
	fs.mu.Unlock()
	if closedHere != nil {
		for _, b := range bodies {
			b.release()
		}
		round.rep(nil, closedHere)
		return
	}
	var next map[int32][]predicted
	if ahead {
		next = t.predictNext(round.r, m, bodies) // before the merge, which filters the answers
	}
	merged := t.mergeFetchSession(round.r, round.plan, m)
	t.fetchAhead(round, next)
	if len(bodies) > 0 {
		round.rep(&pinnedFetch{FetchResponse: merged, bodies: bodies}, nil)
		return
	}
	round.rep(merged, nil)
}
