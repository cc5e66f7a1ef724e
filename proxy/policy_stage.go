package proxy

import (
	"bytes"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/wire"
)

// SetPolicy installs a compiled policy; nil removes it. Sessions pick the
// new engine up at their next request, so a reload never drops a
// connection. It is safe to call at any time.
func (s *Server) SetPolicy(e *policy.Engine) { s.policy.Store(e) }

// Policy returns the engine in force (nil: everything is allowed).
func (s *Server) Policy() *policy.Engine { return s.policy.Load() }

// topicNames maps topic ids to names from every Metadata response the
// gateway passes on, so rules on topic names apply to requests that carry
// ids (Fetch v13+, Produce v13+, ...). Bounded: a cluster with more topics
// than maxTopicNames keeps the most recently seen.
type topicNames struct {
	mu    sync.RWMutex
	names map[[16]byte]string
}

const maxTopicNames = 1 << 20

func (t *topicNames) TopicName(id [16]byte) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n, ok := t.names[id]
	return n, ok
}

// learnMetadata records what a Metadata response body (at version) says
// about topics: their ids (names), and, with a policy, the names that
// exist (creations: a topic the backend has need not be created).
func (s *Server) learnMetadata(version int16, body []byte) {
	withPolicy := s.policy.Load() != nil
	if version < 10 && !withPolicy { // topic ids arrived in Metadata v10
		return
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = version
	if resp.ReadFrom(body) != nil {
		return
	}
	if version >= 10 {
		s.names.learn(resp)
	}
	if withPolicy {
		s.creations.exist(resp)
	}
}

// learn records the ids of a decoded Metadata response.
func (t *topicNames) learn(resp *kmsg.MetadataResponse) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.names == nil || len(t.names) > maxTopicNames {
		t.names = make(map[[16]byte]string)
	}
	for _, tp := range resp.Topics {
		if tp.Topic != nil && tp.TopicID != ([16]byte{}) {
			t.names[tp.TopicID] = *tp.Topic
		}
	}
}

// creations remembers, gateway-wide, the topic names a split Metadata
// request forwarded for auto-creation, and the names Metadata answers
// showed to exist (policy.Creations), for creationTTL: a request naming
// them with topics the client may not create is forwarded whole, with
// creation withheld, instead of being split over two rounds. Bounded by
// maxCreations (then it starts afresh, which costs at most one more split
// round per name).
type creations struct {
	mu    sync.Mutex
	tried map[string]time.Time
}

const (
	creationTTL  = 10 * time.Minute // twice kgo's and librdkafka's default metadata refresh
	maxCreations = 1 << 16
)

var _ policy.Creations = (*creations)(nil)

func (c *creations) CreationAttempted(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tried[name]
	return ok && time.Since(t) < creationTTL
}

func (c *creations) AttemptCreation(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mark(name, time.Now())
}

// exist marks the topics a Metadata answer lists without error.
func (c *creations) exist(resp *kmsg.MetadataResponse) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			c.mark(*t.Topic, now)
		}
	}
}

func (c *creations) mark(name string, now time.Time) {
	if c.tried == nil || len(c.tried) >= maxCreations {
		c.tried = make(map[string]time.Time)
	}
	c.tried[name] = now
}

// subjectFor keeps the session's policy subject in step with the request
// (client ids may change between requests; Kafka allows it).
func (s *session) subjectFor(h wire.RequestHeader) *policy.Subject {
	if string(h.ClientID) != s.subj.ClientID { // no allocation when equal
		s.subj.ClientID = string(h.ClientID)
	}
	return &s.subj
}

func remoteAddr(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// judged is what the policy stage decided for one request.
type judged struct {
	req        kmsg.Request // the decoded request, when something needed it
	whole      []byte       // the whole frame (size prefix included) when it was read for decoding
	forward    []byte       // a rewritten frame to send instead (Partial)
	merge      func(kmsg.Response)
	fwdVersion int16         // forward's version when policy raised it (pending.fwdVersion)
	throttle   time.Duration // ours, for throttle_time_ms
	rule       string
}

// judge applies the policy to one request. It returns done=true when the
// request was answered (denied) here.
func (s *session) judge(eng *policy.Engine, h wire.RequestHeader, size int, obs *observed) (j judged, done bool, err error) {
	return s.judgeFrom(eng, h, size, obs, nil, nil)
}

// judgeFrom is judge over a frame a stage already read: whole (the
// client's, consumed) and, when policy rewrote it, src (decoded instead).
// A virtual cluster's own policy judges so (vcluster_policy.go).
func (s *session) judgeFrom(eng *policy.Engine, h wire.RequestHeader, size int, obs *observed, whole, src []byte) (j judged, done bool, err error) {
	subj := s.subjectFor(h)
	var body kmsg.Request
	j.whole = whole
	if h.Known && eng.NeedsBody(subj, h.Key, h.Version) {
		switch {
		case src != nil:
			fh, err := wire.ParseRequestHeader(src[4:])
			if err != nil {
				return j, false, fmt.Errorf("re-encoded request: %w", err)
			}
			if body, err = decodeRequest(fh, src); err != nil {
				return j, false, err
			}
		case whole != nil:
			if body, err = decodeRequest(h, whole); err != nil {
				return j, false, err
			}
		default:
			if j.whole, obs.frame, err = s.readFrame(size); err != nil {
				return j, false, err
			}
			if body, err = decodeRequest(h, j.whole); err != nil {
				return j, false, err
			}
		}
		j.req = body
	}
	v := eng.Check(&policy.Request{
		Subject: subj, Key: h.Key, Version: h.Version, Size: 4 + size,
		Body: body, Names: s.policyNames(), Creations: &s.srv.creations, Now: time.Now(),
	})
	j.rule, j.throttle = v.Rule, v.Throttle
	obs.rule = v.Rule
	if v.Throttle > 0 {
		j.rule, obs.rule = v.ThrottleRule, v.ThrottleRule
		s.mute(v.Throttle)
		s.hooks.Throttled(v.ThrottleRule, v.Throttle)
	}
	if h.Key != apis.Fetch {
		// Kafka reports a fetch quota in Fetch responses only.
	} else if d, rule := s.takeFetchThrottle(); d > j.throttle && v.Action != policy.Deny {
		// A fetch rate charged after the last Fetch: this request's answer
		// and audit record carry it (KIP-219 throttle_time_ms).
		j.throttle, j.rule, obs.rule = d, rule, rule
	}
	switch v.Action {
	case policy.Deny:
		if j.whole == nil {
			if _, err := s.cr.Discard(4 + size); err != nil {
				return j, false, badRequest(closeMalformed, "request truncated: %w", truncated(err))
			}
		}
		if s.srv.noisy.Allow("request_denied", s.remote) {
			s.log.Info("request denied", "api", apiName(h.Key), "version", h.Version, "rule", v.Rule)
		}
		s.hooks.Denied(v.Rule)
		obs.denied, obs.rule, obs.req = true, v.Rule, body
		if v.Close {
			s.finishUnanswered(h, *obs)
			return j, false, badRequest(closeDenied, "%s denied by rule %q and it cannot be answered (acks=0)", apiName(h.Key), v.Rule)
		}
		policy.SetThrottle(v.Response, v.Throttle)
		return j, true, s.answerLocal(h, wire.Bytes(v.Response.AppendTo(nil)), v.Throttle, *obs)
	case policy.Partial:
		f := kmsg.NewRequestFormatter() // a null client id
		if !h.ClientIDNull {
			f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(string(h.ClientID)))
		}
		j.forward = f.AppendRequest(nil, v.Forward, h.Correlation)
		j.merge = v.Merge
		if fv := v.Forward.GetVersion(); fv != h.Version {
			j.fwdVersion = fv // Metadata v0-3 raised to v4 (policy/partial.go)
		}
	}
	return j, false, nil
}

// readWhole consumes the whole frame (size prefix included) into memory.
func (s *session) readWhole(size int) ([]byte, error) {
	return s.ownedBody(4 + size) // body.go
}

// readFrame is readWhole for a frame read only to be decoded (policy,
// audit): in upstream mode the buffer comes from a pool and ref is set; it
// is released once the request is accounted (its decoded form aliases the
// buffer) and written, or its write failed. The built-in broker owns the
// frames it is handed, so those are read whole into the heap (readWhole,
// ownedBody) and never go back to a pool.
func (s *session) readFrame(size int) (frame []byte, ref *frameBuf, err error) {
	if s.local != nil {
		frame, err = s.readWhole(size)
		return frame, nil, err
	}
	if ref, err = s.readBody(4+size, false); err != nil { // body.go
		return nil, nil, err
	}
	return ref.b, ref, nil
}

// frameBuf is a pooled request buffer with a count of its holders: the
// read loop while it writes the frame upstream, the write loop until the
// request is accounted. The last to let go returns it to the pool, so an
// upstream that answers before it has read the whole request cannot make
// a buffer be reused while it is still being written.
type frameBuf struct {
	b    []byte
	refs atomic.Int32
	// mem, when set, is b's memory mapped outside the Go heap
	// (frame_mem.go), whole as mapped; unmapped when the frame is dropped.
	mem []byte
	// reserved bytes of budget (body.go) go back when the last holder lets go.
	budget   *byteBudget
	reserved int64
}

// hold adds a holder.
func (f *frameBuf) hold() {
	if f != nil {
		f.refs.Add(1)
	}
}

// framePools hold request buffers by power-of-two size class up to
// 512 KiB (larger ones are in bigFrames, below; over 1<<maxFrameClass,
// 16 MiB, they are allocated and left to the GC). Without them a policy
// with topic rules or a full audit allocated (and zeroed) every Produce.
var framePools [bigFrameClass]sync.Pool

const maxFrameClass = 24

// Frames over 512 KiB (bigFrameClass's half) are kept in one free list
// bounded by bytes (bigFramesLimit, freelist.go), not in framePools: a
// sync.Pool keeps a buffer per P (and a second generation across a GC),
// so a single-port session's 4 MiB Produce frames were kept twice or
// more — a quarter of its heap in the 2026-12-06 profile. A miss costs
// an allocation the size of a frame that is then read from the socket
// anyway.
//
// Over 1 MiB a frame's capacity is the request's size rounded up to
// bigFrameGrain, not the next power of two: single-port reads a Produce
// whole to split it by leader, and kgo's requests of three 1 MiB
// partitions (a little over 3 MiB) took 4 MiB frames, one in use and one
// kept. A free frame is reused for a request it fits with less than
// bigFrameSlack to spare, so a 16 MiB frame does not serve a 1 MiB
// request while the next large one allocates.
const (
	bigFrameClass  = 20
	bigFramesLimit = 6 << 20
	bigFrameGrain  = 256 << 10
	bigFrameSlack  = 1 << 20
)

var bigFrames = freeList[*frameBuf]{limit: bigFramesLimit, size: func(f *frameBuf) int { return cap(f.b) }, drop: dropFrame}

// frameCap is the capacity getFrame gives a frame of n bytes: the power
// of two at or above n up to 1 MiB, then n rounded up to bigFrameGrain.
// Frames over 1<<maxFrameClass are not pooled and get exactly n.
func frameCap(n int) int {
	switch c := bits.Len(uint(max(n, 1) - 1)); {
	case c <= bigFrameClass:
		return 1 << c
	case c <= maxFrameClass:
		return (n + bigFrameGrain - 1) / bigFrameGrain * bigFrameGrain
	default:
		return n
	}
}

// getFrame returns a buffer of n bytes with one holder.
func getFrame(n int) *frameBuf { return getFrameIn(n, framesOffHeap) }

// getFrameIn is getFrame with mapped false for a frame whose bytes are
// handed over for good (ownedBody) and so must be in the heap: it is
// neither mapped nor taken from the free list's mapped frames.
func getFrameIn(n int, mapped bool) *frameBuf {
	size := frameCap(n)
	var f *frameBuf
	switch c := bits.Len(uint(size - 1)); {
	case c > maxFrameClass:
	case size > 1<<(bigFrameClass-1):
		f, _ = bigFrames.take(func(f *frameBuf) bool {
			return cap(f.b) >= n && cap(f.b)-n < bigFrameSlack && (mapped || f.mem == nil)
		})
		if f == nil && mapped {
			if mem := mapFrame(size); mem != nil {
				f = &frameBuf{b: mem[:0], mem: mem}
				framesMapped.Add(1)
				framesMappedBytes.Add(int64(len(mem)))
			}
		}
	default:
		f, _ = framePools[c].Get().(*frameBuf)
	}
	if f == nil {
		f = &frameBuf{b: make([]byte, 0, size)}
	}
	f.b = f.b[:n]
	f.refs.Store(1)
	f.budget, f.reserved = nil, 0
	return f
}

// putFrame drops one holder; the last returns the buffer to its pool.
func putFrame(f *frameBuf) {
	if f == nil || f.refs.Add(-1) != 0 {
		return
	}
	f.budget.release(f.reserved)
	f.budget, f.reserved = nil, 0
	if f.mem != nil {
		f.b = f.mem[:0]
	}
	switch n := cap(f.b); {
	case n > 1<<maxFrameClass || n != frameCap(n):
		// Not a size getFrame makes (a frame grown elsewhere): dropped.
		dropFrame(f)
	case n > 1<<(bigFrameClass-1):
		bigFrames.put(f)
	default:
		framePools[bits.Len(uint(n-1))].Put(f)
	}
}

// dropFrame lets a frame go: unmapped if it was mapped, else left to the
// garbage collector. Nothing may hold it.
func dropFrame(f *frameBuf) {
	if f.mem != nil {
		unmapFrame(f.mem)
		framesUnmapped.Add(1)
		framesMappedBytes.Add(-int64(len(f.mem)))
		f.mem, f.b = nil, nil
	}
}

// answerLocal queues a response made by the gateway in the request's slot.
// The request's bytes must already be consumed.
func (s *session) answerLocal(h wire.RequestHeader, body wire.Body, throttle time.Duration, obs observed) error {
	ch := make(chan result, 1)
	ch <- result{body: body}
	return s.push(pending{key: h.Key, version: h.Version, corr: h.Correlation, local: ch,
		throttle: throttle, delay: throttle > 0 && !policy.AppliesAfterResponse(h.Key, h.Version), obs: obs})
}

// decodeRequest decodes the body of a whole frame (size prefix included).
func decodeRequest(h wire.RequestHeader, whole []byte) (kmsg.Request, error) {
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	if err := req.ReadFrom(whole[4+h.Len:]); err != nil {
		return nil, badRequest(closeMalformed, "decode %s v%d request: %w", apiName(h.Key), h.Version, err)
	}
	return req, nil
}

// finishUnanswered accounts a request that gets no response because the
// connection closes (a denied acks=0 produce).
func (s *session) finishUnanswered(h wire.RequestHeader, obs observed) {
	s.hooks.Request(s.l.opts.Name, h.Key, outcomeDenied, time.Since(obs.start), obs.bytesIn, 0)
	if obs.rec != nil {
		obs.rec.Decision, obs.rec.Rule = audit.Denied, obs.rule
		s.srv.opts.Audit.Log(obs.rec)
	}
}

// mute stops reading the client for d after the current request, the
// way a Kafka broker mutes a throttled channel (KIP-219): clients that
// ignore throttle_time_ms (librdkafka) are slowed by TCP backpressure.
func (s *session) mute(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := s.muteUntil.Load()
		if cur >= until || s.muteUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitMuted blocks the read loop while the connection is muted.
func (s *session) waitMuted() error {
	until := s.muteUntil.Load()
	d := time.Until(time.Unix(0, until))
	if until == 0 || d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.closed:
		return net.ErrClosed
	case <-s.drained: // a drain stops at this frame boundary, mute or not
		return nil
	}
}

// adjust applies a pending entry's merge and throttle to a decoded
// response body and returns the re-encoded body.
func adjust(p pending, body []byte) ([]byte, error) {
	resp := kmsg.ResponseForKey(p.key)
	if resp == nil {
		return nil, fmt.Errorf("no response type for key %d", p.key)
	}
	v := p.version
	if p.fwdVersion != 0 {
		v = p.fwdVersion // the backend answered the raised request
	}
	resp.SetVersion(v)
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d response: %w", apiName(p.key), v, err)
	}
	if p.merge != nil {
		p.merge(resp)
	}
	policy.SetThrottle(resp, p.throttle)
	resp.SetVersion(p.version)
	return resp.AppendTo(nil), nil
}

// chargeFetchBytes charges the Fetch bytes written since the last request
// to fetch byte-rate rules, muting the connection if they are over budget.
// It runs on the read loop, which owns the policy subject.
func (s *session) chargeFetchBytes() {
	n := s.fetchBytes.Swap(0)
	if n == 0 {
		return
	}
	if d, rule := s.srv.opts.Quotas.OnFetch(&s.subj, int(n), time.Now()); d > 0 {
		s.fetchThrottled(d, rule) // consumer_byte_rate (quota_stage.go)
	}
	eng := s.srv.policy.Load()
	if eng == nil {
		return
	}
	if d, rule := eng.OnResponse(&s.subj, apis.Fetch, int(n), time.Now()); d > 0 {
		s.fetchThrottled(d, rule) // throttle.go
	}
}

// delayFor holds a response back for its throttle when the client's
// version predates KIP-219 (the broker then delayed responses instead of
// muting the channel).
func (s *session) delayFor(p pending) error {
	if !p.delay {
		return nil
	}
	t := time.NewTimer(p.throttle)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.closed:
		return net.ErrClosed
	}
}

// materialize returns a response body as bytes, writing (and so releasing)
// a zero-copy body into memory.
func materialize(b wire.Body) ([]byte, error) {
	if bs, ok := b.(wire.Bytes); ok {
		return bs, nil
	}
	var buf bytes.Buffer
	buf.Grow(b.Len())
	if _, err := b.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("read response body: %w", err)
	}
	return buf.Bytes(), nil
}

// saslKeys are the versions the gateway serves when it terminates SASL
// itself (apis.Info.GatewayVersions): SaslHandshake never above v1
// (KAFKA-9577), SaslAuthenticate v0-2.
var saslKeys = func() map[int16][2]int16 {
	m := map[int16][2]int16{}
	for _, in := range apis.All() {
		if in.GatewayVersions != nil {
			m[in.Key] = *in.GatewayVersions
		}
	}
	return m
}()

// offerKeys sets the version ranges of keys the gateway answers itself in
// an ApiVersions response body, whatever the backend offers.
func offerKeys(version int16, body []byte, keys map[int16][2]int16) ([]byte, error) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	if version > resp.MaxVersion() || len(body) < 2 || body[0] != 0 || body[1] != 0 {
		return body, nil // an error answer (v0 body)
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode ApiVersions: %w", err)
	}
	seen := map[int16]bool{}
	for i := range resp.ApiKeys {
		if r, ok := keys[resp.ApiKeys[i].ApiKey]; ok {
			resp.ApiKeys[i].MinVersion, resp.ApiKeys[i].MaxVersion = r[0], r[1]
			seen[resp.ApiKeys[i].ApiKey] = true
		}
	}
	for k, r := range keys {
		if !seen[k] {
			ak := kmsg.NewApiVersionsResponseApiKey()
			ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, r[0], r[1]
			resp.ApiKeys = append(resp.ApiKeys, ak)
		}
	}
	slices.SortFunc(resp.ApiKeys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return resp.AppendTo(nil), nil
}

// hideKeys removes keys from an ApiVersions response body.
func hideKeys(version int16, body []byte, hide []int16) ([]byte, error) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	if version > resp.MaxVersion() || body[0] != 0 || body[1] != 0 {
		return body, nil // an error answer (v0 body): nothing to hide
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode ApiVersions: %w", err)
	}
	keys := resp.ApiKeys[:0]
	for _, k := range resp.ApiKeys {
		if !slices.Contains(hide, k.ApiKey) {
			keys = append(keys, k)
		}
	}
	resp.ApiKeys = keys
	return resp.AppendTo(nil), nil
}
