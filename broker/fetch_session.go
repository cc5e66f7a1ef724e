package broker

import (
	"container/list"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sessions (KIP-227).
//
// A consumer fetching many partitions repeats the same partition list in
// every Fetch. With a session the broker remembers the list: the request
// that creates it (SessionID 0, SessionEpoch 0, a "full" fetch) names every
// partition; later "incremental" requests (the session's id and its next
// epoch) name only partitions that are new or whose fetch offset or max
// bytes changed, and list in ForgottenTopics the ones to drop. An
// incremental response carries only partitions with records, an error, or a
// high watermark / last stable offset / log start offset different from
// the one last sent. Epoch -1 closes the session (the request is then
// served as a sessionless full fetch).
//
// What follows Kafka (FetchSession.scala, FetchManager.newContext):
//   - a full request naming a session id closes that session first; epoch
//     0 then creates a new one, epoch -1 does not;
//   - an incremental request for an unknown id is FETCH_SESSION_ID_NOT_FOUND,
//     with the wrong epoch INVALID_FETCH_SESSION_EPOCH, and switching
//     between topic names and topic ids (v12 <-> v13) mid-session
//     FETCH_SESSION_TOPIC_ID_ERROR; all three answer with no partitions;
//   - an incremental request that leaves the session empty closes it and
//     is answered sessionless;
//   - the epoch advances on every accepted incremental request, wrapping
//     from MaxInt32 to 1 (FetchMetadata.nextEpoch);
//   - partitions an incremental response includes move to the end of the
//     session's order, so a partition that keeps filling the response
//     cannot starve the others.
//
// Differences: the cache holds maxFetchSessions sessions (Kafka's
// max.incremental.fetch.session.cache.slots default) and, when full,
// evicts the least recently used one at once; Kafka keeps a session at
// least 120 s and ranks by size. An evicted session's next request gets
// FETCH_SESSION_ID_NOT_FOUND and the client starts a new one. A full
// request with no partitions creates no session.

// maxFetchSessions bounds the session cache (Kafka's
// max.incremental.fetch.session.cache.slots default).
const maxFetchSessions = 1000

// sessKey names a partition in a session: by topic id from v13 on, by
// name before (one session uses one or the other).
type sessKey struct {
	name      string
	id        [16]byte
	partition int32
}

// sessPart is one partition of a session: what the client asked for and
// what the broker last told it (to decide what an incremental response
// must carry).
type sessPart struct {
	key      sessKey
	offset   int64
	maxBytes int32

	sent           bool // some response carried it
	hw, lso, start int64
}

// fetchSession is one session. Its fields are guarded by mu; a request
// checks and advances the epoch under mu, so two requests can never use
// the same epoch.
type fetchSession struct {
	id       int32
	topicIDs bool // created with v13+: keyed by topic id

	mu    sync.Mutex
	epoch int32 // the epoch the next incremental request must carry
	parts []*sessPart
	byKey map[sessKey]*sessPart
}

// fetchSessionCache is one broker's sessions, least recently used first
// out.
type fetchSessionCache struct {
	mu   sync.Mutex
	max  int
	byID map[int32]*list.Element // of *fetchSession
	lru  *list.List              // front: most recently used
}

func newFetchSessionCache(max int) *fetchSessionCache {
	return &fetchSessionCache{max: max, byID: map[int32]*list.Element{}, lru: list.New()}
}

// add stores s under a fresh random id, evicting the least recently used
// session when full, and returns the id.
func (c *fetchSessionCache) add(s *fetchSession) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.byID) >= c.max && c.lru.Len() > 0 {
		old := c.lru.Remove(c.lru.Back()).(*fetchSession)
		delete(c.byID, old.id)
	}
	for {
		id := rand.Int32N(math.MaxInt32) + 1 // 0 means "no session"
		if _, used := c.byID[id]; !used {
			s.id = id
			c.byID[id] = c.lru.PushFront(s)
			return id
		}
	}
}

// get returns the session with id and marks it used.
func (c *fetchSessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(e)
	return e.Value.(*fetchSession)
}

// remove drops the session with id, if any.
func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		c.lru.Remove(e)
		delete(c.byID, id)
	}
}

func (c *fetchSessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID)
}

func (b *Broker) fetchSessions() *fetchSessionCache { return b.sessions }

// nextEpoch follows FetchMetadata.nextEpoch: after MaxInt32 comes 1 (0
// creates and -1 closes a session).
func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// fetchItem is one partition a fetch reads: from the request, or from
// the session for an incremental fetch.
type fetchItem struct {
	key      sessKey
	offset   int64
	maxBytes int32
	sp       *sessPart // the session's entry, when in a session
}

// requestItems lists the request's partitions in order.
func requestItems(req *kmsg.FetchRequest) []fetchItem {
	var items []fetchItem
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := sessKey{partition: rp.Partition}
			if req.Version >= 13 {
				k.id = rt.TopicID
			} else {
				k.name = rt.Topic
			}
			items = append(items, fetchItem{key: k, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes})
		}
	}
	return items
}

// openSession decides, per KIP-227, which partitions the fetch reads and
// in which session. It sets f.sess, f.sessionID and f.incremental, or
// f.sessionCode for a session error.
func (f *fetch) openSession() []fetchItem {
	req := f.req
	if req.Version < 7 {
		return requestItems(req)
	}
	cache := f.c.b.fetchSessions()
	full := req.SessionEpoch == 0 || req.SessionEpoch == -1
	if full {
		if req.SessionID != 0 {
			cache.remove(req.SessionID)
		}
		items := requestItems(req)
		if req.SessionEpoch == -1 || len(items) == 0 {
			return items // sessionless
		}
		s := &fetchSession{topicIDs: req.Version >= 13, epoch: 1, byKey: make(map[sessKey]*sessPart, len(items))}
		for i := range items {
			it := &items[i]
			sp := s.byKey[it.key]
			if sp == nil {
				sp = &sessPart{key: it.key}
				s.byKey[it.key] = sp
				s.parts = append(s.parts, sp)
			}
			sp.offset, sp.maxBytes = it.offset, it.maxBytes
			it.sp = sp
		}
		f.sess = s
		f.sessionID = cache.add(s)
		return items
	}

	s := cache.get(req.SessionID)
	if s == nil {
		f.sessionCode = kerr.FetchSessionIDNotFound.Code
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.epoch != req.SessionEpoch:
		f.sessionCode = kerr.InvalidFetchSessionEpoch.Code
		return nil
	case s.topicIDs != (req.Version >= 13):
		f.sessionCode = kerr.FetchSessionTopicIDError.Code
		return nil
	}
	for _, it := range requestItems(req) {
		sp := s.byKey[it.key]
		if sp == nil {
			sp = &sessPart{key: it.key}
			s.byKey[it.key] = sp
			s.parts = append(s.parts, sp)
		}
		sp.offset, sp.maxBytes = it.offset, it.maxBytes
	}
	forgot := false
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := sessKey{partition: p}
			if s.topicIDs {
				k.id = ft.TopicID
			} else {
				k.name = ft.Topic
			}
			if _, ok := s.byKey[k]; ok {
				delete(s.byKey, k)
				forgot = true
			}
		}
	}
	if forgot {
		keep := s.parts[:0]
		for _, sp := range s.parts {
			if s.byKey[sp.key] == sp {
				keep = append(keep, sp)
			}
		}
		clear(s.parts[len(keep):])
		s.parts = keep
	}
	if len(s.parts) == 0 {
		cache.remove(s.id)
		return nil // nothing left: answered sessionless, with no partitions
	}
	s.epoch = nextEpoch(s.epoch)
	f.sess, f.sessionID, f.incremental = s, s.id, true
	items := make([]fetchItem, len(s.parts))
	for i, sp := range s.parts {
		items[i] = fetchItem{key: sp.key, offset: sp.offset, maxBytes: sp.maxBytes, sp: sp}
	}
	return items
}

// settleSession runs as the response is built: it records what the
// response tells the client about each partition and, for an incremental
// fetch, marks the partitions that carry nothing new to be left out and
// moves the included ones to the end of the session's order.
func (f *fetch) settleSession() {
	s := f.sess
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var included map[*sessPart]bool
	if f.incremental {
		included = map[*sessPart]bool{}
	}
	for ti := range f.topics {
		for pi := range f.topics[ti].parts {
			fp := &f.topics[ti].parts[pi]
			sp := fp.sp
			if sp == nil {
				continue
			}
			hw, lso, start := fp.hw, fp.lso, fp.start
			if fp.code != 0 || fp.p == nil {
				hw, lso, start = -1, -1, -1
			}
			changed := !sp.sent || sp.hw != hw || sp.lso != lso || sp.start != start
			if f.incremental && fp.code == 0 && fp.rr == nil && !changed {
				fp.skip = true
				continue
			}
			sp.sent, sp.hw, sp.lso, sp.start = true, hw, lso, start
			if fp.code != 0 {
				// An error is reported every time it is seen; the next good
				// answer must carry the partition's offsets again.
				sp.sent = false
			}
			if included != nil {
				included[sp] = true
			}
		}
	}
	if len(included) > 0 && len(included) < len(s.parts) {
		order := make([]*sessPart, 0, len(s.parts))
		for _, sp := range s.parts {
			if !included[sp] {
				order = append(order, sp)
			}
		}
		for _, sp := range s.parts {
			if included[sp] {
				order = append(order, sp)
			}
		}
		s.parts = order
	}
}
