package proxy

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sessions (KIP-227) in single-port mode. The gateway is the
// client's one broker, so it keeps the client's fetch session itself,
// with the rules of Kafka's FetchManager.newContext and FetchContext
// (server/src/main/java/org/apache/kafka/server/FetchManager.java,
// FetchContext.java, FetchSession.java):
//
//   - epoch -1 (FINAL) is a sessionless fetch; a session id with it
//     closes that session. The answer has session id 0 and lists every
//     partition asked for.
//   - epoch 0 (INITIAL) is a full fetch that opens a new session (and
//     closes the one its session id names); the answer carries the new
//     id and lists every partition.
//   - epoch > 0 is incremental: an unknown id is FETCH_SESSION_ID_NOT_FOUND,
//     another epoch than the session's INVALID_FETCH_SESSION_EPOCH, a
//     request whose version names topics differently than the session's
//     (ids from v13) FETCH_SESSION_TOPIC_ID_ERROR; each answered with no
//     partitions and session id 0, nothing changed. Otherwise the listed
//     partitions are added or updated, the forgotten ones removed (a
//     session left empty is closed and the fetch is sessionless), the
//     epoch advances (MaxInt32 wraps to 1), and the answer lists only the
//     partitions Kafka's CachedPartition.maybeUpdateResponseData says it
//     must: records, a high watermark or log start offset other than the
//     last one sent, an error (which also forgets the high watermark, so
//     the partition is sent again once the error is gone), a diverging
//     epoch.
//
// Toward each upstream broker the gateway holds its own session per
// client session (fetchUpstream), as a consumer would: a full request
// (epoch 0, carrying the old id to close it) when it has none, then
// incremental ones that list only the partitions whose fetch parameters
// changed since the last request, and forget the ones that left that
// broker (the client forgot them, or their leader moved). An upstream
// session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
// FETCH_SESSION_TOPIC_ID_ERROR: evicted, or a request lost with a broken
// connection) is never shown to the client: that broker's partitions
// are left out of the answer (unchanged, as far as the client can tell)
// and its next request is a full one. A part that got no answer resets
// its session the same way. A client's full fetch makes every upstream
// request of that round full too, so every answer lists every partition.
// A sessionless client gets sessionless upstream requests, as before.
//
// Ownership: fetchState belongs to the tunnel; the read loop plans under
// mu, the merges (brokerConn readers) update under mu.
//
// Memory: one client session per connection (a new one replaces the
// old, whose upstream sessions are closed or reused) and at most
// maxFetchSessionPartitions partitions in it; per partition the client
// side keeps ~100 bytes and each upstream side ~80, so a connection's
// fetch session state is at most ~2 MiB (a session that would grow past
// the cap is dropped: the client's next incremental fetch is
// FETCH_SESSION_ID_NOT_FOUND, and its full fetch then gets session id 0,
// as from a broker whose session cache is full).

// maxFetchSessionPartitions caps one client fetch session.
const maxFetchSessionPartitions = 10000

// fetchSessionIDs numbers client sessions across the Server's tunnels,
// so a client that carries an id over to a new connection is told
// FETCH_SESSION_ID_NOT_FOUND, never given another connection's session.
var fetchSessionIDs atomic.Int32

func nextFetchSessionID() int32 {
	for {
		id := fetchSessionIDs.Add(1)
		if id > 0 {
			return id
		}
		fetchSessionIDs.CompareAndSwap(id, 0)
	}
}

// nextFetchEpoch is Kafka's FetchMetadata.nextEpoch for a session epoch.
func nextFetchEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// fsKey names a session partition: by topic id for v13+ sessions, by
// name below (Kafka's CachedPartition equality).
type fsKey struct {
	id    [16]byte
	topic string
	part  int32
}

// fsPart is one partition of the client's session.
type fsPart struct {
	name string // the topic's name ("" while the id is unknown)
	req  kmsg.FetchRequestTopicPartition
	// hwm and logStart are what the client was last sent (-1: send the
	// partition in the next answer whatever it holds).
	hwm, logStart int64
}

// fetchUpstream is the gateway's own fetch session with one broker.
type fetchUpstream struct {
	id, epoch int32 // id 0: none; the next request is full (epoch 0)
	// full forces the next request to be full (epoch 0 with id, which
	// closes that session on the broker and opens a new one).
	full bool
	// opening: a full request is in flight and the broker's new id is not
	// known yet; requests until then go sessionless.
	opening bool
	// gen counts resets; an answer to a request planned in an older
	// generation changes nothing.
	gen uint32
	// held is what the broker's session holds, with the parameters it
	// was last sent.
	held map[fsKey]kmsg.FetchRequestTopicPartition
	// skipAhead: answers to pass before the next fetch-ahead here, after
	// one the client's Fetch did not match; aheadBackoff: the last such
	// pause, doubled by each miss (route_fetch_ahead.go).
	skipAhead, aheadBackoff int
}

// fetchState is a tunnel's client fetch session and its upstream halves.
type fetchState struct {
	mu    sync.Mutex
	id    int32 // the client's session (0: none)
	epoch int32 // the epoch the client must send next
	ids   bool  // the session names topics by id (opened at v13+)
	parts map[fsKey]*fsPart
	up    map[int32]*fetchUpstream
	gen   uint32 // the last upstream generation handed out (nextGen)
	// out are the parts that outlived the client Fetch they were sent
	// for, by broker: in flight, or in and held (route_fetch_hold.go).
	out map[int32]*heldPart
	// closed: the tunnel closed; nothing more is held.
	closed bool
	// lastRound is the latest client Fetch planned, when it is answered
	// from held parts (nil otherwise): only its answer fetches ahead.
	lastRound *fetchRound
}

// fetchMode is what a client Fetch is, for the gateway's session rules.
type fetchMode int8

const (
	fetchSessionless fetchMode = iota // pre-v7, or epoch -1: answer every partition, session id 0
	fetchFull                         // epoch 0: a new session; answer every partition
	fetchIncremental                  // epoch > 0 of the current session
)

// fetchPlan is one client Fetch planned against the session.
type fetchPlan struct {
	mode fetchMode
	sid  int32 // the session id the answer carries
	// byNode is each broker's share of the session's partitions (full
	// and incremental modes), for answering a part that failed.
	byNode map[int32][]fsKey
	gens   map[int32]uint32 // each part's upstream generation
	// opens are the parts that open an upstream session (epoch 0).
	opens map[int32]bool
	// closes are parts that only close an upstream session.
	closes map[int32]bool
	// deferred are parts the answer went without: still out, held for
	// the client's next Fetch (route_fetch_hold.go).
	deferred map[int32]bool
}

func (t *tunnel) fetchSessions() *fetchState {
	if t.fetch == nil {
		t.fetch = &fetchState{parts: map[fsKey]*fsPart{}, up: map[int32]*fetchUpstream{}, out: map[int32]*heldPart{}}
	}
	return t.fetch
}

// sessionErrorAnswer is the answer to a Fetch whose session is invalid.
func sessionErrorAnswer(r *kmsg.FetchRequest, code int16) *kmsg.FetchResponse {
	out := r.ResponseKind().(*kmsg.FetchResponse)
	out.ErrorCode = code
	return out
}

func (t *tunnel) keyOf(r *kmsg.FetchRequest, topic string, id [16]byte, p int32) fsKey {
	if r.Version >= 13 {
		return fsKey{id: id, part: p}
	}
	return fsKey{topic: topic, part: p}
}

// routeFetchSession routes a v7+ Fetch through the gateway's sessions.
// handled false: the fetch is sessionless and there is no session to
// close, so routeFetch's sessionless path serves it.
func (t *tunnel) routeFetchSession(r *kmsg.FetchRequest, rep reply) (handled bool, err error) {
	fs := t.fetch
	if r.SessionEpoch == -1 && (fs == nil || fs.id == 0 || r.SessionID != fs.id) {
		return false, nil
	}
	if r.SessionEpoch < -1 {
		return true, t.answerFetch(rep, sessionErrorAnswer(r, kerr.InvalidFetchSessionEpoch.Code))
	}
	fs = t.fetchSessions()
	fs.mu.Lock()
	fs.lastRound = nil // no answer fetches ahead past a later Fetch
	plan := &fetchPlan{byNode: map[int32][]fsKey{}, gens: map[int32]uint32{}, opens: map[int32]bool{}, closes: map[int32]bool{}, deferred: map[int32]bool{}}
	switch {
	case r.SessionEpoch == -1: // closes the session, then sessionless
		fs.dropLocked()
		plan.mode = fetchSessionless
	case r.SessionEpoch == 0:
		// One session per connection: a new one replaces the old (and
		// Kafka closes the one a full fetch's session id names).
		fs.dropLocked()
		plan.mode = fetchFull
		if n := countFetchPartitions(r); n <= maxFetchSessionPartitions {
			fs.id, fs.epoch, fs.ids = nextFetchSessionID(), 1, r.Version >= 13
			plan.sid = fs.id
		} else {
			plan.mode = fetchSessionless // like a broker whose cache has no room: session id 0
		}
	default:
		code := int16(0)
		switch {
		case fs.id == 0 || r.SessionID != fs.id:
			code = kerr.FetchSessionIDNotFound.Code
		case r.SessionEpoch != fs.epoch:
			code = kerr.InvalidFetchSessionEpoch.Code
		case fs.ids != (r.Version >= 13):
			code = kerr.FetchSessionTopicIDError.Code
		}
		if code != 0 {
			fs.mu.Unlock()
			return true, t.answerFetch(rep, sessionErrorAnswer(r, code))
		}
		plan.mode, plan.sid = fetchIncremental, fs.id
	}
	if plan.mode == fetchSessionless {
		// Upstream: close every session, fetch sessionless.
		closes := fs.closeAllLocked()
		fs.mu.Unlock()
		return true, t.routeFetchSessionless(r, rep, closes)
	}
	// Apply the request to the client's session (Kafka's FetchSession.update).
	for i := range r.Topics {
		rt := &r.Topics[i]
		for _, rp := range rt.Partitions {
			k := t.keyOf(r, rt.Topic, rt.TopicID, rp.Partition)
			// Kept past this request, whose frame goes back to its pool
			// (or is unmapped) once it is answered, and re-encoded into
			// later upstream Fetches: kmsg leaves unknown tagged fields
			// aliasing the frame, so they are not kept (a broker ignores
			// tags it does not know anyway).
			rp.UnknownTags = kmsg.Tags{}
			if p, ok := fs.parts[k]; ok {
				p.req = rp
				continue
			}
			fs.parts[k] = &fsPart{name: rt.Topic, req: rp, hwm: -1, logStart: -1}
		}
	}
	if plan.mode == fetchIncremental {
		for _, ft := range r.ForgottenTopics {
			for _, p := range ft.Partitions {
				delete(fs.parts, t.keyOf(r, ft.Topic, ft.TopicID, p))
			}
		}
		if len(fs.parts) > maxFetchSessionPartitions {
			// Over the cap: dropped, as an evicted session would be.
			closes := fs.closeAllLocked()
			fs.dropLocked()
			fs.mu.Unlock()
			t.eventInfo(routeFetchSessionLimit, "single-port: a fetch session grew past the partition cap; dropped", "conn", t.s.id, "cap", maxFetchSessionPartitions)
			return true, t.closeUpstreamThenAnswer(r, rep, closes, kerr.FetchSessionIDNotFound.Code)
		}
		if len(fs.parts) == 0 {
			// Kafka closes a session its request empties and answers it
			// sessionless (FetchManager.newContext).
			closes := fs.closeAllLocked()
			fs.dropLocked()
			fs.mu.Unlock()
			return true, t.routeFetchSessionless(r, rep, closes)
		}
		fs.epoch = nextFetchEpoch(fs.epoch)
	}
	// Names of v13 topics (resolved outside the lock: a lookup may ask
	// the cluster), then leaders.
	var unnamed []fsKey
	for k, p := range fs.parts {
		if p.name == "" && k.id != ([16]byte{}) {
			unnamed = append(unnamed, k)
		}
	}
	type want struct {
		k    fsKey
		name string
	}
	wants := make([]want, 0, len(fs.parts))
	for k, p := range fs.parts {
		wants = append(wants, want{k, p.name})
	}
	fs.mu.Unlock()
	names := map[[16]byte]string{}
	for _, k := range unnamed {
		if _, ok := names[k.id]; !ok {
			names[k.id] = t.topicName("", k.id)
		}
	}
	leaders := make(map[fsKey]int32, len(wants))
	for _, w := range wants {
		name := w.name
		if name == "" {
			name = names[w.k.id]
		}
		n, err := t.leaderFor(name, w.k.part)
		if err != nil {
			return true, err
		}
		leaders[w.k] = n
	}

	fs.mu.Lock()
	for _, k := range unnamed {
		if p, ok := fs.parts[k]; ok && p.name == "" {
			p.name = names[k.id]
		}
	}
	if plan.mode == fetchFull {
		// A full answer lists every partition, so every upstream request
		// of this round is full too.
		for _, u := range fs.up {
			fs.reset(u)
		}
	}
	if fs.id != plan.sid {
		// Replaced while the lock was let go (cannot happen: only the
		// read loop plans); answer nothing rather than mix sessions.
		fs.mu.Unlock()
		return true, t.answerFetch(rep, sessionErrorAnswer(r, kerr.FetchSessionIDNotFound.Code))
	}
	for k := range fs.parts {
		n, ok := leaders[k]
		if !ok {
			continue // added by nothing we saw: cannot happen under the read loop
		}
		plan.byNode[n] = append(plan.byNode[n], k)
	}
	parts := make(map[int32]kmsg.Request, len(plan.byNode)+len(fs.up))
	fetching := len(plan.byNode)
	// An incremental fetch is a held-mode round (route_fetch_hold.go):
	// over several brokers it is answered once the parts in carry
	// records, the rest held; from one broker or several, its answer may
	// fetch ahead (route_fetch_ahead.go).
	var round *fetchRound
	if plan.mode == fetchIncremental && fetching > 0 && rep != nil {
		round = &fetchRound{r: r, plan: plan, rep: rep, trace: t.trace, parts: map[int32]*heldPart{}, sending: true}
	}
	fs.lastRound = round
	for n, keys := range plan.byNode {
		u := fs.up[n]
		if u == nil {
			u = &fetchUpstream{held: map[fsKey]kmsg.FetchRequestTopicPartition{}, gen: fs.nextGen()}
			fs.up[n] = u
		}
		if round == nil {
			fs.dropOut(n)
		} else if h := fs.takeOut(n, u, keys); h != nil {
			h.round = round
			round.parts[n] = h
			plan.gens[n] = h.gen
			plan.opens[n] = h.opens
			continue
		}
		parts[n] = fs.upstreamPart(r, u, keys, n, plan, fetching)
		if round != nil {
			round.parts[n] = &heldPart{node: n, gen: plan.gens[n], opens: plan.opens[n], round: round}
		}
	}
	for n, u := range fs.up {
		if _, fetches := plan.byNode[n]; fetches {
			continue
		}
		fs.dropOut(n)
		// A broker that leads none of the session's partitions now: close
		// its session (epoch -1), if it has one.
		if u.id != 0 {
			c := *r
			c.Topics, c.ForgottenTopics = nil, nil
			c.SessionID, c.SessionEpoch, c.MaxWaitMillis, c.MinBytes = u.id, -1, 0, 0
			parts[n] = &c
			plan.closes[n] = true
		}
		delete(fs.up, n)
	}
	fs.mu.Unlock()
	if round != nil {
		t.sendHeld(round, parts)
		return true, nil
	}
	if len(parts) == 0 { // no partition anywhere (cannot happen: the session is not empty)
		return true, t.answerFetch(rep, r.ResponseKind().(*kmsg.FetchResponse))
	}
	return true, t.scatterPartial(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		return t.mergeFetchSession(r, plan, m), nil
	})
}

// sameFetchParams reports whether a partition's fetch parameters are
// unchanged (the fields the Java client's FetchSessionHandler compares).
func sameFetchParams(a, b *kmsg.FetchRequestTopicPartition) bool {
	return a.FetchOffset == b.FetchOffset && a.PartitionMaxBytes == b.PartitionMaxBytes &&
		a.CurrentLeaderEpoch == b.CurrentLeaderEpoch && a.LastFetchedEpoch == b.LastFetchedEpoch &&
		a.LogStartOffset == b.LogStartOffset && a.ReplicaDirectoryID == b.ReplicaDirectoryID
}

func countFetchPartitions(r *kmsg.FetchRequest) int {
	n := 0
	for _, t := range r.Topics {
		n += len(t.Partitions)
	}
	return n
}

// reset makes the next request to u's broker a full one, and the
// answers to requests already out stale for u. The caller holds mu.
func (fs *fetchState) reset(u *fetchUpstream) {
	u.full, u.opening = true, false
	u.gen = fs.nextGen()
	clear(u.held)
}

// nextGen numbers upstream generations across the tunnel, so an answer
// never matches an upstream session made after its request.
func (fs *fetchState) nextGen() uint32 {
	fs.gen++
	return fs.gen
}

// upstreamPart builds the request for broker n: its partitions keys
// against what its session holds. The caller holds fs.mu.
func (fs *fetchState) upstreamPart(r *kmsg.FetchRequest, u *fetchUpstream, keys []fsKey, n int32, plan *fetchPlan, fetching int) kmsg.Request {
	c := *r
	c.Topics, c.ForgottenTopics = nil, nil
	if fetching > 1 && c.MaxWaitMillis > fetchPartWait {
		c.MaxWaitMillis = fetchPartWait
	}
	plan.gens[n] = u.gen
	add := func(k fsKey, p *fsPart) {
		j := len(c.Topics) - 1
		if j < 0 || c.Topics[j].Topic != p.name || c.Topics[j].TopicID != k.id {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = p.name, k.id
			if r.Version >= 13 {
				t.Topic = ""
			}
			c.Topics = append(c.Topics, t)
			j++
		}
		c.Topics[j].Partitions = append(c.Topics[j].Partitions, p.req)
	}
	switch {
	case u.opening:
		// The broker's id for the session being opened is not back yet:
		// sessionless this time (the answer lists every partition).
		c.SessionID, c.SessionEpoch = 0, -1
		for _, k := range keys {
			add(k, fs.parts[k])
		}
	case u.full || u.id == 0:
		c.SessionID, c.SessionEpoch = u.id, 0
		clear(u.held)
		for _, k := range keys {
			p := fs.parts[k]
			add(k, p)
			u.held[k] = p.req
		}
		u.full, u.opening = false, true
		plan.opens[n] = true
	default:
		c.SessionID, c.SessionEpoch = u.id, u.epoch
		u.epoch = nextFetchEpoch(u.epoch)
		in := make(map[fsKey]bool, len(keys))
		for _, k := range keys {
			in[k] = true
			p := fs.parts[k]
			if h, ok := u.held[k]; ok && sameFetchParams(&h, &p.req) {
				continue
			}
			add(k, p)
			u.held[k] = p.req
		}
		for k := range u.held {
			if in[k] {
				continue
			}
			delete(u.held, k)
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID = k.topic, k.id
			j := 0
			for ; j < len(c.ForgottenTopics) && (c.ForgottenTopics[j].Topic != ft.Topic || c.ForgottenTopics[j].TopicID != ft.TopicID); j++ {
			}
			if j == len(c.ForgottenTopics) {
				c.ForgottenTopics = append(c.ForgottenTopics, ft)
			}
			c.ForgottenTopics[j].Partitions = append(c.ForgottenTopics[j].Partitions, k.part)
		}
	}
	return &c
}

// closeAllLocked resets the upstream side and returns the close
// requests (node → session id) for the sessions brokers hold.
func (fs *fetchState) closeAllLocked() map[int32]int32 {
	fs.dropAllOut()
	closes := map[int32]int32{}
	for n, u := range fs.up {
		if u.id != 0 {
			closes[n] = u.id
		}
	}
	clear(fs.up)
	return closes
}

// dropLocked ends the client's session (its upstream halves stay for a
// new session to reuse, each reset to a full request).
func (fs *fetchState) dropLocked() {
	fs.dropAllOut()
	fs.id, fs.epoch = 0, 0
	clear(fs.parts)
	for _, u := range fs.up {
		fs.reset(u)
	}
}

// answerFetch delivers an answer the gateway makes itself.
func (t *tunnel) answerFetch(rep reply, resp *kmsg.FetchResponse) error {
	if rep != nil {
		rep(resp, nil)
	}
	return nil
}

// closeFetchParts are the epoch -1 requests that close upstream sessions.
func closeFetchParts(r *kmsg.FetchRequest, closes map[int32]int32, into map[int32]kmsg.Request) {
	for n, id := range closes {
		if _, ok := into[n]; ok {
			continue
		}
		c := *r
		c.Topics, c.ForgottenTopics = nil, nil
		c.SessionID, c.SessionEpoch, c.MaxWaitMillis, c.MinBytes = id, -1, 0, 0
		into[n] = &c
	}
}

// closeUpstreamThenAnswer closes upstream sessions and answers the
// client with a session error.
func (t *tunnel) closeUpstreamThenAnswer(r *kmsg.FetchRequest, rep reply, closes map[int32]int32, code int16) error {
	if len(closes) == 0 {
		return t.answerFetch(rep, sessionErrorAnswer(r, code))
	}
	parts := map[int32]kmsg.Request{}
	closeFetchParts(r, closes, parts)
	return t.scatterPartial(parts, rep, func(map[int32]kmsg.Response) (kmsg.Response, error) {
		return sessionErrorAnswer(r, code), nil
	})
}

// mergeFetchSession joins the parts of a session Fetch (full or
// incremental) and applies the client session's answer rules.
func (t *tunnel) mergeFetchSession(r *kmsg.FetchRequest, plan *fetchPlan, m map[int32]kmsg.Response) *kmsg.FetchResponse {
	out := r.ResponseKind().(*kmsg.FetchResponse)
	fs := t.fetch
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var missing []int32 // brokers whose partitions get a retriable error
	for n := range plan.byNode {
		if plan.deferred[n] {
			continue // still out: its partitions are unchanged for now
		}
		resp, ok := m[n]
		u := fs.up[n]
		current := u != nil && u.gen == plan.gens[n]
		if !ok {
			if current {
				fs.reset(u)
			}
			missing = append(missing, n)
			continue
		}
		fr := resp.(*kmsg.FetchResponse)
		out.ThrottleMillis = max(out.ThrottleMillis, fr.ThrottleMillis)
		switch fr.ErrorCode {
		case kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code, kerr.FetchSessionTopicIDError.Code:
			// The broker lost (or never had) the session the gateway
			// used: its next request is full; the client sees its
			// partitions unchanged this time (a full answer cannot get
			// here: its upstream requests were full).
			if current {
				fs.reset(u)
			}
			t.event(routeFetchSessionReset, "single-port: an upstream fetch session was lost; the next fetch there is a full one", "conn", t.s.id, "node", n, "err", kerr.ErrorForCode(fr.ErrorCode))
			if plan.mode == fetchFull {
				missing = append(missing, n)
			}
			continue
		case 0:
		default:
			// Whatever the broker made of its session, start again.
			if current {
				fs.reset(u)
				current = false
			}
			if out.ErrorCode == 0 {
				out.ErrorCode = fr.ErrorCode
			}
		}
		if current && plan.opens[n] {
			u.opening = false
			if fr.ErrorCode == 0 && fr.SessionID > 0 {
				u.id, u.epoch = fr.SessionID, 1
			} else {
				u.id = 0 // no room for a session there: full again next time
			}
		}
		out.Topics = mergeTopics(out.Topics, fr.Topics, fetchRespKey, fetchRespParts)
		if len(out.Brokers) == 0 {
			out.Brokers = fr.Brokers
		}
	}
	stale := false
	if len(missing) > 0 || plan.mode == fetchFull {
		stale = t.fillSession(r, plan, fs, out, missing)
	}
	if fs.id == plan.sid && plan.sid != 0 {
		stale = fs.filterLocked(r, out, plan.mode == fetchIncremental) || stale
		out.SessionID = plan.sid
	} else {
		// The session ended while this fetch was out (a later request
		// replaced it): answer what came back, as sessionless.
		out.SessionID = 0
		stale = staleTopics(out.Topics) || stale
	}
	if stale {
		t.view.invalidate(true, nil)
	}
	t.virtualize(out)
	return out
}

// fillSession adds a retriable error for the session partitions of the
// brokers in missing and, for a full answer, for any partition no part
// answered. It reports whether it added any.
func (t *tunnel) fillSession(r *kmsg.FetchRequest, plan *fetchPlan, fs *fetchState, out *kmsg.FetchResponse, missing []int32) bool {
	have := map[fsKey]bool{}
	if plan.mode == fetchFull {
		for _, tp := range out.Topics {
			for _, p := range tp.Partitions {
				have[t.keyOf(r, tp.Topic, tp.TopicID, p.Partition)] = true
			}
		}
	}
	var keys []fsKey
	if plan.mode == fetchFull {
		for _, ks := range plan.byNode {
			keys = append(keys, ks...)
		}
	} else {
		for _, n := range missing {
			keys = append(keys, plan.byNode[n]...)
		}
	}
	var add []kmsg.FetchResponseTopic
	for _, k := range keys {
		if have[k] {
			continue
		}
		p := fs.parts[k]
		if p == nil {
			continue
		}
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = p.name, k.id
		if r.Version >= 13 {
			rt.Topic = ""
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.ErrorCode = k.part, kerr.NotLeaderForPartition.Code
		rt.Partitions = append(rt.Partitions, rp)
		add = append(add, rt)
	}
	out.Topics = mergeTopics(out.Topics, add, fetchRespKey, fetchRespParts)
	return len(add) > 0
}

// filterLocked applies Kafka's rules for what an answer of the session
// must list (CachedPartition.maybeUpdateResponseData) and records what
// the client is sent; incremental false (a full answer) keeps every
// partition. It reports whether an answer says the view is stale.
func (fs *fetchState) filterLocked(r *kmsg.FetchRequest, out *kmsg.FetchResponse, incremental bool) (stale bool) {
	nt := 0
	for i := range out.Topics {
		tp := &out.Topics[i]
		np := 0
		for j := range tp.Partitions {
			p := &tp.Partitions[j]
			var k fsKey
			if r.Version >= 13 {
				k = fsKey{id: tp.TopicID, part: p.Partition}
			} else {
				k = fsKey{topic: tp.Topic, part: p.Partition}
			}
			stale = stale || staleCode(p.ErrorCode)
			c := fs.parts[k]
			must := !incremental || c == nil || len(p.RecordBatches) > 0 || p.ErrorCode != 0 ||
				c.hwm != p.HighWatermark || c.logStart != p.LogStartOffset || p.DivergingEpoch.Epoch != -1
			if c != nil {
				c.hwm, c.logStart = p.HighWatermark, p.LogStartOffset
				if p.ErrorCode != 0 {
					c.hwm = -1
				}
			}
			if !must {
				continue
			}
			tp.Partitions[np] = *p
			np++
		}
		tp.Partitions = tp.Partitions[:np]
		if np > 0 || !incremental {
			out.Topics[nt] = *tp
			nt++
		}
	}
	out.Topics = out.Topics[:nt]
	return stale
}

func staleTopics(ts []kmsg.FetchResponseTopic) bool {
	for _, tp := range ts {
		for _, p := range tp.Partitions {
			if staleCode(p.ErrorCode) {
				return true
			}
		}
	}
	return false
}
