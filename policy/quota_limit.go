package policy

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/time/rate"

	"github.com/tollgate-kafka/tollgate/apis"
)

// Enforcement. Like Kafka's ClientQuotaManager, each quota type is
// resolved on its own for the request's (user, client id): the most
// specific entity with a value for that type wins (KIP-55 precedence,
// Resolve), and the budget is shared by everything the winning entity's
// metric tags cover: a quota on user=alice is one budget for all of
// alice's clients, a default-user quota one budget per user, a
// user+client-id quota one per pair. A request over budget is never
// refused (except controller mutations, below): its bucket goes into
// debt and the debt is the KIP-219 throttle the gateway already applies
// for rate rules (throttle_time_ms, then muting the connection).
//
//   - producer_byte_rate: Produce request bytes.
//   - consumer_byte_rate: Fetch response bytes, charged after they are
//     sent; the next request pays (as rate rules' fetch_bytes_per_second).
//   - request_percentage: Kafka measures request handler thread time; the
//     gateway does not have one, so it counts requests, each as 1 ms of
//     a thread: request_percentage=100 is 1000 requests/s (documented in
//     README, "Client quotas").
//   - controller_mutation_rate (KIP-599): partitions created or deleted
//     per second. CreateTopics v6+, CreatePartitions v3+ and DeleteTopics
//     v5+ are decided topic by topic, as Kafka's strict quota: once the
//     budget is in debt the remaining topics get THROTTLING_QUOTA_EXCEEDED
//     (quota_mutation.go); older versions are throttled. The
//     gateway does not know a topic's partition count, so CreateTopics
//     counts num_partitions (or its assignments; 1 for the broker
//     default), CreatePartitions and DeleteTopics count 1 per topic.
//
// Budgets hold one second of their rate (controller mutations: Kafka's
// 11 one-second samples, the KIP-599 token bucket's burst).

// AnonymousUser is the user entity of an unauthenticated connection, as
// Kafka's KafkaPrincipal.ANONYMOUS.
const AnonymousUser = "ANONYMOUS"

// quotaType indexes the four enforced quota keys.
type quotaType int

const (
	qtProduce quotaType = iota
	qtFetch
	qtRequest
	qtMutation
	numQuotaTypes
)

var quotaTypeKeys = [numQuotaTypes]string{QuotaProducerByteRate, QuotaConsumerByteRate, QuotaRequestPercentage, QuotaControllerMutationRate}

// quotaRule names a quota type in throttle metrics and logs (the rule
// label of tollgate_policy_throttles_total).
var quotaRule = [numQuotaTypes]string{"quota:" + QuotaProducerByteRate, "quota:" + QuotaConsumerByteRate, "quota:" + QuotaRequestPercentage, "quota:" + QuotaControllerMutationRate}

// MaxQuotaThrottle bounds one quota throttle: 11 s, the span of Kafka's
// default quota samples (quota.window.num 11 x quota.window.size.seconds
// 1), so one huge request cannot mute a connection for hours; a budget
// still in debt throttles the next request again.
const MaxQuotaThrottle = 11 * time.Second

// requestCost is the request thread time one request is counted as for
// request_percentage.
const requestCost = time.Millisecond

// Resolve returns the quota of key that applies to user and client id
// (KIP-55 precedence, most specific first: user+client-id,
// user+default client-id, user, default user+client-id, default
// user+default client-id, default user, client-id, default client-id),
// the entity it comes from, and the metric tags whose budget it shares.
func (q *Quotas) Resolve(key, user, clientID string) (value float64, from QuotaEntity, tags [2]string, ok bool) {
	return resolve(*q.entries.Load(), key, user, clientID)
}

func resolve(m map[QuotaEntity]map[string]float64, key, user, clientID string) (float64, QuotaEntity, [2]string, bool) {
	name := func(n string) EntityPart { return EntityPart{Set: true, Name: n} }
	def := EntityPart{Set: true, Default: true}
	none := EntityPart{}
	levels := [...]struct {
		e    QuotaEntity
		tags [2]string
	}{
		{QuotaEntity{name(user), name(clientID)}, [2]string{user, clientID}},
		{QuotaEntity{name(user), def}, [2]string{user, clientID}},
		{QuotaEntity{name(user), none}, [2]string{user, ""}},
		{QuotaEntity{def, name(clientID)}, [2]string{user, clientID}},
		{QuotaEntity{def, def}, [2]string{user, clientID}},
		{QuotaEntity{def, none}, [2]string{user, ""}},
		{QuotaEntity{none, name(clientID)}, [2]string{"", clientID}},
		{QuotaEntity{none, def}, [2]string{"", clientID}},
	}
	for _, l := range levels {
		if v, ok := m[l.e][key]; ok {
			return v, l.e, l.tags, true
		}
	}
	return 0, QuotaEntity{}, [2]string{}, false
}

type quotaBucketKey struct {
	t    quotaType
	tags [2]string
}

// quotaBucket is one budget; its limit follows the quota's value.
type quotaBucket struct {
	b       bucket // rate.go: take, with oversize reservations
	lim     *rate.Limiter
	value   float64
	lastUse time.Time
}

// quotaLimiters holds the budgets, bounded by MaxKeysPerRule per type
// (idle budgets that are full again are dropped first, losing nothing).
type quotaLimiters struct {
	mu      sync.Mutex
	buckets map[quotaBucketKey]*quotaBucket
}

func (l *quotaLimiters) init() { l.buckets = map[quotaBucketKey]*quotaBucket{} }

func quotaRate(t quotaType, v float64) (rate.Limit, int) {
	switch t {
	case qtRequest:
		perSec := v / 100 * float64(time.Second/requestCost)
		return rate.Limit(perSec), clampInt(int64(perSec))
	case qtMutation:
		return rate.Limit(v), clampInt(int64(v * 11))
	}
	return rate.Limit(v), clampInt(int64(v))
}

func (l *quotaLimiters) get(t quotaType, tags [2]string, v float64, now time.Time) *quotaBucket {
	k := quotaBucketKey{t, tags}
	l.mu.Lock()
	defer l.mu.Unlock()
	qb := l.buckets[k]
	if qb == nil {
		if len(l.buckets) >= MaxKeysPerRule*int(numQuotaTypes) {
			l.evict(now)
		}
		r, burst := quotaRate(t, v)
		qb = &quotaBucket{lim: rate.NewLimiter(r, burst), value: v}
		l.buckets[k] = qb
	} else if qb.value != v {
		r, burst := quotaRate(t, v)
		qb.b.mu.Lock()
		qb.lim.SetLimitAt(now, r)
		qb.lim.SetBurstAt(now, burst)
		qb.b.mu.Unlock()
		qb.value = v
	}
	qb.lastUse = now
	return qb
}

// evict drops budgets that are full again, or else half of them.
func (l *quotaLimiters) evict(now time.Time) {
	for k, qb := range l.buckets {
		if now.Sub(qb.lastUse) > 11*time.Second {
			delete(l.buckets, k)
		}
	}
	n := len(l.buckets) / 2
	for k := range l.buckets {
		if len(l.buckets) <= n {
			break
		}
		delete(l.buckets, k)
	}
}

// QuotaVerdict is what the quotas decide for one request.
type QuotaVerdict struct {
	Throttle time.Duration
	Rule     string // the quota type that asked for the longest throttle
	// Response, when set, is the complete answer: the request is refused
	// with THROTTLING_QUOTA_EXCEEDED (KIP-599) and must not be forwarded.
	Response kmsg.Response
	// Forward and Merge, when set, refuse some topics only: Forward is the
	// request with the others, Merge adds the refused topics' errors to
	// its response (as policy's Partial verdict).
	Forward kmsg.Request
	Merge   func(kmsg.Response)
}

// quotaUser is the user entity name of a subject.
func quotaUser(s *Subject) string {
	if s.Principal == "" {
		return AnonymousUser
	}
	return s.Principal
}

// Active reports whether any quota is set (no quota: nothing to do).
func (q *Quotas) Active() bool { return q != nil && len(*q.entries.Load()) > 0 }

// NeedsBody reports whether Check needs the decoded request: controller
// mutations count partitions.
func (q *Quotas) NeedsBody(key int16) bool {
	return isMutationKey(key) && q.Active() && q.present.Load()&(1<<qtMutation) != 0
}

func isMutationKey(key int16) bool {
	return key == apis.CreateTopics || key == apis.CreatePartitions || key == apis.DeleteTopics
}

// Check charges one request to the quotas that apply to its subject and
// returns the throttle (and, for a strict controller mutation quota in
// debt, the refusal). size is the request frame's bytes.
func (q *Quotas) Check(s *Subject, key, version int16, size int, body kmsg.Request, now time.Time) QuotaVerdict {
	var v QuotaVerdict
	if !q.Active() {
		return v
	}
	now = nowOr(now)
	m := *q.entries.Load()
	present := q.present.Load()
	user := quotaUser(s)
	charge := func(t quotaType, n int) {
		if present&(1<<t) == 0 || n <= 0 {
			return
		}
		val, _, tags, ok := resolve(m, quotaTypeKeys[t], user, s.ClientID)
		if !ok {
			return
		}
		qb := q.lim.get(t, tags, val, now)
		if d := qb.b.take(qb.lim, n, now); d > v.Throttle {
			v.Throttle, v.Rule = d, quotaRule[t]
		}
	}
	if !apis.Of(key).PreAuth {
		charge(qtRequest, 1)
	}
	if key == apis.Produce {
		charge(qtProduce, size)
	}
	if isMutationKey(key) && body != nil && present&(1<<qtMutation) != 0 {
		q.checkMutation(&v, m, user, s.ClientID, key, version, body, now)
	}
	v.Throttle = min(v.Throttle, MaxQuotaThrottle)
	if v.Response != nil {
		SetThrottle(v.Response, v.Throttle)
	}
	return v
}

// OnFetch charges Fetch response bytes to consumer_byte_rate and returns
// the throttle and its rule name.
func (q *Quotas) OnFetch(s *Subject, n int, now time.Time) (time.Duration, string) {
	if !q.Active() || n <= 0 || q.present.Load()&(1<<qtFetch) == 0 {
		return 0, ""
	}
	now = nowOr(now)
	val, _, tags, ok := resolve(*q.entries.Load(), QuotaConsumerByteRate, quotaUser(s), s.ClientID)
	if !ok {
		return 0, ""
	}
	qb := q.lim.get(qtFetch, tags, val, now)
	if d := qb.b.take(qb.lim, n, now); d > 0 {
		return min(d, MaxQuotaThrottle), quotaRule[qtFetch]
	}
	return 0, ""
}
