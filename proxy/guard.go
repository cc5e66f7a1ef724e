package proxy

import (
	"container/list"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// addrGuard keeps per-source-address state for the accept path: a token
// bucket for the connection rate and a count of recent authentication
// failures. It is bounded: past maxGuarded addresses the least recently
// seen are forgotten, so a flood of addresses cannot grow it without end.
type addrGuard struct {
	mu       sync.Mutex
	rate     float64 // guarded by mu, like the settings below (a reload changes them: set)
	failures int
	lockout  time.Duration

	lru   *list.List // of *guardEntry, most recent first
	byKey map[string]*list.Element
}

const maxGuarded = 65536

type guardEntry struct {
	ip       string
	limiter  *rate.Limiter
	fails    []time.Time // within the lockout window
	lockedAt time.Time
}

func newAddrGuard(r float64, failures int, lockout time.Duration) *addrGuard {
	return &addrGuard{rate: r, failures: failures, lockout: lockout, lru: list.New(), byKey: make(map[string]*list.Element)}
}

// set changes the guard's settings (a configuration reload). Addresses
// keep their failures and lockouts; their connection budgets take the
// new rate at once.
func (g *addrGuard) set(r float64, failures int, lockout time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rate, g.failures, g.lockout = r, failures, lockout
	for el := g.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*guardEntry)
		switch {
		case r <= 0:
			e.limiter = nil
		case e.limiter == nil:
			e.limiter = rate.NewLimiter(rate.Limit(r), max(1, int(r)))
		default:
			e.limiter.SetLimit(rate.Limit(r))
			e.limiter.SetBurst(max(1, int(r)))
		}
	}
}

func (g *addrGuard) entry(ip string) *guardEntry {
	if el, ok := g.byKey[ip]; ok {
		g.lru.MoveToFront(el)
		return el.Value.(*guardEntry)
	}
	e := &guardEntry{ip: ip}
	if g.rate > 0 {
		e.limiter = rate.NewLimiter(rate.Limit(g.rate), max(1, int(g.rate)))
	}
	g.byKey[ip] = g.lru.PushFront(e)
	if g.lru.Len() > maxGuarded {
		old := g.lru.Back()
		g.lru.Remove(old)
		delete(g.byKey, old.Value.(*guardEntry).ip)
	}
	return e
}

// Why a new connection is refused: label values of
// tollgate_connections_refused_total and the "reason" of the log line.
const (
	refuseShutdown    = "shutting_down"
	refuseMaxConns    = "max_connections"             // limits.max_connections
	refuseMaxPerAddr  = "max_connections_per_address" // limits.max_connections_per_address
	refuseConnRate    = "connection_rate_per_address" // limits.connection_rate_per_address
	refuseAuthLockout = "auth_failures_per_address"   // limits.auth_failures_per_address within auth_lockout
)

// admit reports why a new connection from ip must be refused (a refuse*
// constant), or "".
func (g *addrGuard) admit(ip string, now time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.rate <= 0 && g.failures <= 0 {
		return ""
	}
	e := g.entry(ip)
	if !e.lockedAt.IsZero() {
		if now.Sub(e.lockedAt) < g.lockout {
			return refuseAuthLockout
		}
		e.lockedAt, e.fails = time.Time{}, nil
	}
	if e.limiter != nil && !e.limiter.AllowN(now, 1) {
		return refuseConnRate
	}
	return ""
}

// authFailed records a failed authentication from ip and locks the address
// out once it reaches the limit within the lockout window.
func (g *addrGuard) authFailed(ip string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failures <= 0 {
		return
	}
	e := g.entry(ip)
	kept := e.fails[:0]
	for _, t := range e.fails {
		if now.Sub(t) < g.lockout {
			kept = append(kept, t)
		}
	}
	e.fails = append(kept, now)
	if len(e.fails) >= g.failures {
		e.lockedAt = now
	}
}
