package proxy

import (
	"time"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/rewrite"
	"github.com/tollgate-kafka/tollgate/wire"
)

// The read side of a session is the ordered list of stages below, each
// with one job, run over one request value per frame (DESIGN.md, "The
// session pipeline", shows the same list). A stage returns done when the
// request needs nothing more from later stages (it was answered, refused
// in its slot, or handed to the backend); an error closes the connection
// (a requestError carries the close reason). A new cross-cutting feature
// is a new stage here, not a new branch in an existing one.

// readStage is one named step of the read side.
type readStage struct {
	name string
	run  func(s *session, r *request) (done bool, err error)
}

// readStages is the read side, in order. The frame stage (size prefix
// and limit) runs in the read loop before these, because it decides which
// handler reads the frame (SaslHandshake v0 raw tokens have no header).
var readStages = [...]readStage{
	{"size", (*session).stageRequestSize},              // only Produce may use MaxFrameBytes (body.go)
	{"header", (*session).stageHeader},                 // peek the frame, parse the header prefix
	{"version-guard", (*session).stageVersionGuard},    // keys and versions the gateway cannot decode (unknown.go); KIP-511 ApiVersions
	{"authentication", (*session).stageAuthentication}, // pre-auth rules, SASL termination, v0 refusal
	{"identity", (*session).stageIdentity},             // a principal the upstream accepted (SASL pass-through)
	{"vcluster-match", (*session).stageVCMatch},        // the session's virtual cluster, decided once past authentication (vcluster.go)
	{"acks", (*session).stageAcks},                     // Produce acks=0 takes no slot
	{"audit", (*session).stageAudit},                   // the audit record; strict mode refuses what it cannot record
	{"policy", (*session).stagePolicy},                 // deny in the slot, partial rewrite, throttle
	{"vcluster-policy", (*session).stageVCPolicy},      // the virtual cluster's own policy (vcluster_policy.go)
	{"quota", (*session).stageQuota},                   // client quotas (KIP-546): throttle, KIP-599 refusal (quota_stage.go)
	{"decode", (*session).stageDecode},                 // bodies a full audit record or ApiVersions v3+ needs
	{"observe", (*session).stageObserve},               // client software name, pass-through SASL user
	{"entry", (*session).stageEntry},                   // the queue entry that will carry the response
	{"vcluster", (*session).stageVCluster},             // virtual clusters: names prefixed, the answer's rewrite queued (vcluster_stage.go)
	{"answer", (*session).stageAnswer},                 // keys the gateway answers itself: its ACL, quota, credential stores (answer.go)
	{"route", routeStage},                              // single-port: split by broker, merge the answers (route.go)
	{"backend", (*session).stageBackend},               // built-in broker, or the upstream connection
}

// request is one client request on its way through the read side.
//
// Ownership: the read loop owns it (session.cur, reused frame to frame).
// The pooled frame it may hold (obs.frame, set when a stage reads the
// whole frame to decode it) is the read loop's reference: every queue
// entry that carries obs.frame takes its own reference in push, and
// release drops the read loop's — the one place the read side lets go.
type request struct {
	size int                // frame size after the 4-byte prefix
	buf  []byte             // the peeked frame start (prefix included), valid until the frame is consumed
	h    wire.RequestHeader // aliases buf

	expectResponse bool // false for Produce acks=0
	obs            observed
	vcFrame        *frameBuf // a pooled rewritten Produce frame (vcluster_records.go), released with the request
	j              judged
	p              pending
}

// release drops the read loop's reference to the pooled frame and clears
// the value, so an idle session pins no buffer of its last request.
func (r *request) release() {
	putFrame(r.obs.frame)
	if r.vcFrame != nil {
		putFrame(r.vcFrame)
	}
	*r = request{}
}

// handleFrame runs the read stages over one frame of size bytes (the size
// prefix is still buffered).
func (s *session) handleFrame(size int) error {
	r := &s.cur
	*r = request{size: size, expectResponse: true}
	defer r.release()
	for i := range readStages {
		if done, err := readStages[i].run(s, r); err != nil || done {
			return err
		}
	}
	return nil
}

// stageRequestSize refuses a frame larger than its API may need, from
// the key alone, before the frame is peeked (body.go).
func (s *session) stageRequestSize(r *request) (bool, error) {
	return false, s.checkRequestSize(r.size)
}

// stageHeader peeks the header prefix (up to the whole frame or the
// buffer, whichever is smaller) and parses it.
//
// A frame larger than the buffer (a large Produce) is forwarded as its
// buffered head and a socket-to-socket copy of the rest, so filling the
// buffer first would only move up to 64 KiB through user space in one
// more read call: when what the idle wait already read holds the header
// (and a Produce's acks), that is the head.
func (s *session) stageHeader(r *request) (bool, error) {
	if 4+r.size > bufSize && s.shortHead(r) {
		return false, nil
	}
	peek := min(4+r.size, bufSize)
	buf, err := s.cr.Peek(peek)
	if err != nil {
		return false, badRequest(closeMalformed, "frame truncated: %d of %d bytes before the connection ended: %w", len(buf), peek, truncated(err))
	}
	r.buf = buf
	if r.h, err = wire.ParseRequestHeader(buf[4:]); err != nil {
		return false, badRequest(closeMalformed, "request header: %w", err)
	}
	return false, nil
}

// shortHead sets r.buf and r.h from the bytes already buffered when they
// hold the header and, for a Produce, the acks field (stageAcks); it
// reports false, changing nothing, when they do not.
func (s *session) shortHead(r *request) bool {
	buf, err := s.cr.Peek(s.cr.Buffered())
	if err != nil || len(buf) < 4 {
		return false
	}
	h, err := wire.ParseRequestHeader(buf[4:])
	if err != nil {
		return false
	}
	if h.Key == apis.Produce {
		if _, err := produceAcks(h, buf[4:]); err != nil {
			return false
		}
	}
	r.buf, r.h = buf, h
	return true
}

// stageVersionGuard refuses keys and versions this build cannot decode
// (unknown.go), and answers an unknown ApiVersions version as a broker
// does.
func (s *session) stageVersionGuard(r *request) (bool, error) {
	h := r.h
	if err := s.checkDecodable(h); err != nil { // unknown.go
		return false, err
	}
	if h.Key == apis.ApiVersions && !h.Known {
		// An ApiVersions version newer than this build: answer as a broker
		// does (KIP-511), a v0 body with UNSUPPORTED_VERSION and the
		// versions we serve, so the client retries with one of them.
		return true, s.answer(h, r.size, wire.Bytes(rewrite.UnsupportedApiVersions()))
	}
	return false, nil
}

// stageAuthentication enforces the pre-authentication rules and answers
// the SASL keys when the listener terminates SASL.
func (s *session) stageAuthentication(r *request) (bool, error) {
	h := r.h
	if err := s.preauthCheck(h); err != nil {
		return false, err
	}
	if s.sasl != nil && (h.Key == apis.SASLHandshake || h.Key == apis.SASLAuthenticate) {
		return true, s.handleSASL(h, r.size)
	}
	if s.sasl == nil && h.Key == apis.SASLHandshake && h.Version == 0 && s.local == nil {
		// After a v0 handshake the client sends raw SASL tokens with no
		// Kafka header, which a relaying gateway cannot frame; every client
		// since Kafka 1.0 uses v1 (KIP-152).
		return false, badRequest(closeUnsupported, "SaslHandshake v0 (raw SASL tokens) cannot be relayed; use a client that speaks SaslHandshake v1, or terminate SASL at the gateway")
	}
	return false, nil
}

// stageIdentity adopts a principal the upstream accepted (SASL
// pass-through), which the write loop hands over.
func (s *session) stageIdentity(*request) (bool, error) {
	s.adoptPassthroughPrincipal()
	return false, nil
}

// stageAcks reads a Produce request's acks: acks=0 gets no response.
func (s *session) stageAcks(r *request) (bool, error) {
	if r.h.Key != apis.Produce {
		return false, nil
	}
	acks, err := produceAcks(r.h, r.buf[4:])
	if err != nil {
		return false, badRequest(closeMalformed, "produce request: %w", err)
	}
	r.expectResponse = acks != 0
	return false, nil
}

// stageAudit starts the request's accounting and, when the audit trail
// wants it, its record.
func (s *session) stageAudit(r *request) (bool, error) {
	now := time.Now()
	r.obs = observed{start: now, bytesIn: 4 + r.size, rec: s.auditRecord(r.h, now, r.size)}
	if r.obs.rec != nil && s.srv.opts.Audit.Strict() {
		if err := s.srv.opts.Audit.Healthy(); err != nil {
			// Strict audit: never forward what cannot be recorded.
			return false, badRequest(closeAuditUnavailable, "audit trail unavailable in strict mode, refusing requests: %w", err)
		}
	}
	return false, nil
}

// stagePolicy applies the policy, if any (see judge).
func (s *session) stagePolicy(r *request) (bool, error) {
	eng := s.srv.policy.Load()
	if eng == nil {
		return false, nil
	}
	j, answered, err := s.judge(eng, r.h, r.size, &r.obs)
	r.j = j
	return answered, err
}

// stageDecode decodes the body for a full audit record and for
// ApiVersions v3+ (the client's software name), unless policy did.
func (s *session) stageDecode(r *request) (bool, error) {
	h := r.h
	if !h.Known || r.j.req != nil {
		return false, nil
	}
	if !(h.Key == apis.ApiVersions && h.Version >= 3 || r.obs.rec != nil && s.srv.opts.Audit.Level() == audit.Full) {
		return false, nil
	}
	if err := s.readWholeOnce(r); err != nil {
		return false, err
	}
	var err error
	r.j.req, err = decodeRequest(h, r.j.whole)
	return false, err
}

// readWholeOnce reads the whole frame into r.j.whole unless a stage
// already did.
func (s *session) readWholeOnce(r *request) error {
	if r.j.whole != nil {
		return nil
	}
	var err error
	r.j.whole, r.obs.frame, err = s.readFrame(r.size)
	return err
}

// stageObserve records what the session learns from a request: the
// client's software name (ApiVersions v3+), the identity Server.Connections
// shows, and, for SASL pass-through,
// the whole SaslAuthenticate frame the route stage reads the user from.
func (s *session) stageObserve(r *request) (bool, error) {
	h := r.h
	if h.Key == apis.ApiVersions && r.j.req != nil {
		if name, version, ok := audit.ClientSoftware(r.j.req); ok {
			s.softwareName, s.softwareVersion = name, version
			if r.obs.rec != nil {
				r.obs.rec.SoftwareName, r.obs.rec.SoftwareVersion = name, version
			}
		}
	}
	if h.Key == apis.SASLAuthenticate && s.sasl == nil && s.local == nil && h.Known {
		if err := s.readWholeOnce(r); err != nil {
			return false, err
		}
	}
	s.publishIdent(h.ClientID) // for Server.Connections (introspect.go)
	return false, nil
}

// stageEntry builds the queue entry that will carry the response (what
// the write side must do with it), and accounts an acks=0 Produce, which
// gets none.
func (s *session) stageEntry(r *request) (bool, error) {
	h, j := r.h, r.j
	r.obs.req = j.req
	r.p = pending{key: h.Key, version: h.Version, corr: h.Correlation, merge: j.merge, fwdVersion: j.fwdVersion, throttle: j.throttle,
		delay: j.throttle > 0 && !policy.AppliesAfterResponse(h.Key, h.Version), obs: r.obs}
	if h.Key == apis.SASLAuthenticate && s.sasl == nil && s.local == nil && j.whole != nil {
		r.p.saslUser = s.passthroughStep(h, j.whole)
	}
	if eng := s.srv.policy.Load(); h.Key == apis.ApiVersions && eng != nil && eng.HidesKeys(s.l.opts.Name) {
		r.p.hide = eng.DeniedKeys(&s.subj)
	}
	if !r.expectResponse && s.tun == nil { // single-port accounts it after routing (route.go)
		s.acksZeroDone(h, r.obs)
	}
	return false, nil
}

// stageBackend hands the request to the built-in broker, or queues its
// entry and writes it to the upstream: the frame policy rewrote, the
// whole frame a stage read, or the frame straight from the read buffer.
func (s *session) stageBackend(r *request) (bool, error) {
	if s.local != nil {
		return true, s.handleLocal(r.h, r.size, r.expectResponse, r.p, r.j)
	}
	if r.expectResponse {
		if err := s.push(r.p); err != nil {
			return true, err
		}
	}
	switch {
	case r.j.forward != nil:
		return true, s.writeUpstream(r.j.forward)
	case r.j.whole != nil:
		return true, s.writeUpstream(r.j.whole)
	}
	return true, s.forward(r.buf, r.size)
}
