package broker

import (
	"sync"
)

// Share sessions (KIP-932, Kafka's ShareSessionCache and ShareSession):
// a member's ShareFetch/ShareAcknowledge conversation with this broker.
// ShareSessionEpoch 0 opens a session (replacing the member's previous
// one) whose partitions are the request's; a positive epoch must be the
// session's next one (else INVALID_SHARE_SESSION_EPOCH; no session:
// SHARE_SESSION_NOT_FOUND) and adds the request's partitions and removes
// the forgotten ones; -1 closes it, releasing the records the member
// holds on the session's partitions. Every successful request moves the
// epoch on by one (wrapping to 1). A connection that closes ends its
// sessions the same way (Kafka's ConnectionDisconnectListener).
//
// A session lives in its group's shareGroup (guarded by group.mu); the
// connection index (shareConns) has its own leaf lock.

// shareSession is one member's session.
type shareSession struct {
	epoch int32
	// parts maps topic id -> partition -> "must appear in the next
	// response" (new to the session, or its last answer was an error), as
	// Kafka's CachedSharePartition.requiresUpdateInResponse.
	parts map[[16]byte]map[int32]bool
	order [][16]byte // topic ids in the order they joined (response order)
	size  int        // partitions in parts
	conn  *Conn
}

// maxShareSessionPartitions bounds the partitions of one share session
// (the broker's per-topic partition limit): only partitions that exist are
// kept, so a legitimate member never comes near it.
const maxShareSessionPartitions = maxPartitions

// add adds (tid, p) to the session; false if the session is full.
func (s *shareSession) add(tid [16]byte, p int32) bool {
	ps := s.parts[tid]
	if _, ok := ps[p]; ok {
		return true
	}
	if s.size >= maxShareSessionPartitions {
		return false
	}
	if ps == nil {
		ps = map[int32]bool{}
		s.parts[tid] = ps
		s.order = append(s.order, tid)
	}
	ps[p] = true
	s.size++
	return true
}

func (s *shareSession) forget(tid [16]byte, p int32) {
	if ps := s.parts[tid]; ps != nil {
		if _, ok := ps[p]; ok {
			delete(ps, p)
			s.size--
		}
		if len(ps) == 0 {
			delete(s.parts, tid)
			for i, t := range s.order {
				if t == tid {
					s.order = append(s.order[:i:i], s.order[i+1:]...)
					break
				}
			}
		}
	}
}

func (s *shareSession) bump() {
	s.epoch++
	if s.epoch <= 0 {
		s.epoch = 1
	}
}

// maxShareSessions is Kafka's group.share.max.share.sessions: a ShareFetch
// opening a session past it is SHARE_SESSION_LIMIT_REACHED.
const maxShareSessions = 2000

// shareConns indexes share sessions by connection and counts them.
type shareConns struct {
	mu       sync.Mutex
	m        map[*Conn]map[string]string // conn -> member id -> group
	sessions int                         // open sessions, every group
}

// reserve counts a new session, or reports that the limit is reached.
func (sc *shareConns) reserve() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.sessions >= maxShareSessions {
		return false
	}
	sc.sessions++
	return true
}

func (sc *shareConns) release() {
	sc.mu.Lock()
	sc.sessions--
	sc.mu.Unlock()
}

func (sc *shareConns) add(c *Conn, group, member string) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.m == nil {
		sc.m = map[*Conn]map[string]string{}
	}
	if sc.m[c] == nil {
		sc.m[c] = map[string]string{}
	}
	sc.m[c][member] = group
}

func (sc *shareConns) take(c *Conn) map[string]string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	out := sc.m[c]
	delete(sc.m, c)
	return out
}

// openShareSession starts member's session on c, or returns nil at the
// session limit. Caller holds g.mu.
func (g *group) openShareSession(c *Conn, member string) *shareSession {
	g.closeShareSession(member)
	if !g.c.shareConns.reserve() {
		return nil
	}
	s := &shareSession{parts: map[[16]byte]map[int32]bool{}, conn: c}
	g.sg.sessions[member] = s
	g.c.shareConns.add(c, g.name, member)
	return s
}

// closeShareSession ends member's session, releasing the records it holds
// on the session's partitions. Caller holds g.mu.
func (g *group) closeShareSession(member string) {
	s := g.sg.sessions[member]
	if s == nil {
		return
	}
	delete(g.sg.sessions, member)
	g.c.shareConns.release()
	limit := g.c.shareConfig(g.name).deliveryLimit
	released := false
	for tid, ps := range s.parts {
		t := g.c.b.lookupID(tid)
		if t == nil {
			continue
		}
		for p := range ps {
			if sp := g.sg.parts[tpKey{t.name, p}]; sp != nil {
				released = sp.releaseWhere(limit, func(r *shareRecord) bool { return r.owner == member }) || released
			}
		}
	}
	if released {
		g.sg.notify()
	}
	g.persistShareParts()
}

// shareConnClosed ends every share session opened on c.
func (b *Broker) shareConnClosed(c *Conn) {
	if b.groups == nil {
		return
	}
	for member, name := range b.groups.shareConns.take(c) {
		g := b.groups.lock(name, false)
		if g == nil {
			continue
		}
		if g.sg != nil && g.sg.sessions[member] != nil && g.sg.sessions[member].conn == c {
			g.closeShareSession(member)
			g.dropIfUnusedShare()
		}
		g.mu.Unlock()
	}
}
