package policy

import (
	"container/list"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/time/rate"
)

// Rate rules work like Kafka's quotas: a request is never refused for
// being over budget. It is charged to a token bucket, which may go into
// debt; the debt, turned into time at the bucket's rate, is the throttle:
// the gateway sends the response at once with throttle_time_ms set and
// then stops reading the connection for that long (KIP-219; for older
// versions it delays the response instead, see AppliesAfterResponse).
// Throttle = Reservation.DelayFrom(now) = the time until the budget is
// back to zero, Kafka's "time to get back within quota".
//
// A frame larger than the burst still fits: the
// bucket's burst is raised for that one reservation, so it goes into debt
// by the whole frame instead of being refused.

// MaxKeysPerRule bounds the buckets one rule keeps (per client id,
// principal or address). Beyond it the least recently used bucket is
// dropped; buckets idle long enough to be full again are dropped first,
// which loses nothing (a fresh bucket is full too).
var MaxKeysPerRule = 10000

// rateSpec is a rule's rate settings; a reload keeps the limiter of a
// rule whose name and spec are unchanged.
type rateSpec struct {
	reqRate, reqBurst     int
	prodRate, prodBurst   int64
	fetchRate, fetchBurst int64
	per                   string
}

func newRateSpec(r *configs.Rate) rateSpec {
	rb, pb, fb := r.Bursts()
	return rateSpec{reqRate: r.RequestsPerSecond, reqBurst: rb, prodRate: int64(r.ProduceBytesPerSecond), prodBurst: int64(pb),
		fetchRate: int64(r.FetchBytesPerSecond), fetchBurst: int64(fb), per: r.Per}
}

// refill is how long an idle bucket takes to be full again.
func (s *rateSpec) refill() time.Duration {
	var d time.Duration
	for _, p := range [][2]int64{{int64(s.reqRate), int64(s.reqBurst)}, {s.prodRate, s.prodBurst}, {s.fetchRate, s.fetchBurst}} {
		if p[0] > 0 {
			d = max(d, time.Duration(float64(p[1])/float64(p[0])*float64(time.Second)))
		}
	}
	return d
}

// bucket is one key's budget.
type bucket struct {
	mu                  sync.Mutex // serializes oversize reservations (burst raised for one call)
	key                 bucketKey
	req, produce, fetch *rate.Limiter
	lastUse             time.Time // guarded by limiter.mu
}

type bucketKey struct {
	s string
	a netip.Addr
}

// limiter is one rule's buckets.
type limiter struct {
	spec   rateSpec
	mu     sync.Mutex
	shared *bucket
	keys   map[bucketKey]*list.Element // of *bucket
	lru    list.List                   // front = most recently used
}

func newLimiter(spec rateSpec) *limiter {
	l := &limiter{spec: spec, keys: map[bucketKey]*list.Element{}}
	if spec.per == configs.RatePerShared {
		l.shared = l.newBucket(bucketKey{})
	}
	return l
}

func (l *limiter) newBucket(k bucketKey) *bucket {
	b := &bucket{key: k}
	s := &l.spec
	if s.reqRate > 0 {
		b.req = rate.NewLimiter(rate.Limit(s.reqRate), s.reqBurst)
	}
	if s.prodRate > 0 {
		b.produce = rate.NewLimiter(rate.Limit(s.prodRate), clampInt(s.prodBurst))
	}
	if s.fetchRate > 0 {
		b.fetch = rate.NewLimiter(rate.Limit(s.fetchRate), clampInt(s.fetchBurst))
	}
	return b
}

func clampInt(v int64) int { return int(min(max(v, 1), math.MaxInt32)) }

func (l *limiter) keyFor(s *Subject) bucketKey {
	switch l.spec.per {
	case configs.RatePerPrincipal:
		return bucketKey{s: s.Principal}
	case configs.RatePerAddress:
		return bucketKey{a: s.Addr.Unmap()}
	}
	return bucketKey{s: s.ClientID}
}

// bucket returns the subject's bucket, creating it (and evicting idle or
// least recently used ones) as needed.
func (l *limiter) bucket(s *Subject, now time.Time) *bucket {
	if l.shared != nil {
		return l.shared
	}
	k := l.keyFor(s)
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.keys[k]; ok {
		l.lru.MoveToFront(el)
		b := el.Value.(*bucket)
		b.lastUse = now
		return b
	}
	// Drop up to two buckets idle long enough to be full again, then the
	// least recently used one if still at the cap.
	idle := l.spec.refill()
	for range 2 {
		back := l.lru.Back()
		if back == nil || now.Sub(back.Value.(*bucket).lastUse) < idle {
			break
		}
		l.remove(back)
	}
	for len(l.keys) >= MaxKeysPerRule && l.lru.Len() > 0 {
		l.remove(l.lru.Back())
	}
	b := l.newBucket(k)
	b.lastUse = now
	l.keys[k] = l.lru.PushFront(b)
	return b
}

func (l *limiter) remove(el *list.Element) {
	delete(l.keys, el.Value.(*bucket).key)
	l.lru.Remove(el)
}

// size returns how many keyed buckets the limiter holds.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// take charges n tokens and returns how long until the budget is back.
func (b *bucket) take(lim *rate.Limiter, n int, now time.Time) time.Duration {
	if lim == nil || n <= 0 {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	burst := lim.Burst()
	if n <= burst {
		return lim.ReserveN(now, n).DelayFrom(now)
	}
	lim.SetBurstAt(now, n)
	r := lim.ReserveN(now, n)
	lim.SetBurstAt(now, burst)
	return r.DelayFrom(now)
}

// rateHits collects the rate rules a request passed, without allocating
// for up to eight.
type rateHits struct {
	n    int
	a    [8]int32
	more []int32
}

func (h *rateHits) add(i int32) {
	if h == nil {
		return
	}
	for j := range min(h.n, len(h.a)) {
		if h.a[j] == i {
			return
		}
	}
	for _, j := range h.more {
		if j == i {
			return
		}
	}
	if h.n < len(h.a) {
		h.a[h.n] = i
	} else {
		h.more = append(h.more, i)
	}
	h.n++
}

func (h *rateHits) each(f func(int32)) {
	for j := range min(h.n, len(h.a)) {
		f(h.a[j])
	}
	for _, j := range h.more {
		f(j)
	}
}

// charge bills a request to the rate rules it passed and sets the
// verdict's throttle.
func (e *Engine) charge(v *Verdict, h *rateHits, s *Subject, key int16, size int, now time.Time) {
	if h.n == 0 {
		return
	}
	h.each(func(i int32) {
		r := &e.rules[i]
		b := r.rate.bucket(s, now)
		d := b.take(b.req, 1, now)
		if key == apis.Produce {
			d = max(d, b.take(b.produce, size, now))
		}
		if d > v.Throttle {
			v.Throttle, v.ThrottleRule = d, r.name
		}
	})
}

// OnResponse accounts bytes known only once the response is in (fetch
// bytes per second, for Fetch and ShareFetch) and returns the throttle to
// apply and the rule that asked for it. It charges the fetch rates of
// rules that match the subject and key, in order, up to the first allow or
// deny rule without body or version conditions (which Check would have
// stopped at); fetch rates cannot have body conditions (configs rejects
// them), because the body is gone by now.
func (e *Engine) OnResponse(s *Subject, key int16, responseBytes int, now time.Time) (time.Duration, string) {
	if e.limiters == 0 || (key != apis.Fetch && key != apis.ShareFetch) {
		return 0, ""
	}
	if now.IsZero() {
		now = time.Now()
	}
	bits := e.subjectBits(s)
	var throttle time.Duration
	var name string
	for _, i := range e.rulesFor(key) {
		if !bitSet(bits, int(i)) {
			continue
		}
		r := &e.rules[i]
		if r.rate != nil && r.rate.spec.fetchRate > 0 && !r.resourceCond() {
			b := r.rate.bucket(s, now)
			if d := b.take(b.fetch, responseBytes, now); d > throttle {
				throttle, name = d, r.name
			}
		}
		if r.verb != verbRate && !r.resourceCond() && r.vmin == 0 && r.vmax == 32767 {
			break
		}
	}
	return throttle, name
}

// SetThrottle sets throttle_time_ms on a response that has the field to
// max(its value, d), rounded up to a millisecond.
func SetThrottle(resp kmsg.Response, d time.Duration) {
	tr, ok := resp.(kmsg.ThrottleResponse)
	if !ok || d <= 0 {
		return
	}
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	ms = min(ms, math.MaxInt32)
	if cur, _ := tr.Throttle(); int64(cur) >= ms {
		return
	}
	if st, ok := resp.(kmsg.SetThrottleResponse); ok {
		st.SetThrottle(int32(ms))
	}
}

// AppliesAfterResponse reports whether responses of key/version follow
// KIP-219 (send at once, then mute). False means the throttle must be
// applied by delaying the response, as brokers before Kafka 2.0 did.
// Keys without a throttle field (SASL, inter-broker) report true: only
// muting can slow them, and delaying a SASL step gains nothing. The
// versions come from the API table (apis.Info.KIP219Since).
func AppliesAfterResponse(key, version int16) bool { return apis.AppliesAfterResponse(key, version) }
