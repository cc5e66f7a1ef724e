package policy

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/tollgate-kafka/tollgate/configs"
)

// strMatcher is a compiled configs.StringMatch: any pattern is enough.
type strMatcher struct {
	exact  []string
	prefix []string
	regex  []*regexp.Regexp
	src    *configs.StringMatch // for the reachability analysis
}

// compileString takes the regexes as Validate compiled them (pol.Regex).
func compileString(pol *configs.Policy, m *configs.StringMatch) (*strMatcher, error) {
	if m == nil {
		return nil, nil
	}
	c := &strMatcher{exact: slices.Clone(m.Exact), prefix: slices.Clone(m.Prefix), src: m}
	for _, expr := range m.Regex {
		re, err := pol.Regex(expr)
		if err != nil {
			return nil, fmt.Errorf("regex %q: %w", expr, err)
		}
		c.regex = append(c.regex, re)
	}
	return c, nil
}

func (m *strMatcher) match(s string) bool {
	for _, e := range m.exact {
		if s == e {
			return true
		}
	}
	for _, p := range m.prefix {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	for _, re := range m.regex {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// keySet is a bit set of API keys 0..127 (kmsg knows 0..94).
type keySet [2]uint64

func (k *keySet) add(key int16) { k[key>>6] |= 1 << (key & 63) }
func (k *keySet) has(key int16) bool {
	return key >= 0 && key < 128 && k[key>>6]&(1<<(key&63)) != 0
}

// verb is what a rule does when it matches.
type verb uint8

const (
	verbRate  verb = iota // limit and go on
	verbAllow             // decide: allow (after charging the rule's rate, if any)
	verbDeny              // decide: deny
)

// rule is a compiled configs.Rule.
type rule struct {
	name  string
	index int
	line  int
	verb  verb

	listeners []string       // nil = any
	addrs     []netip.Prefix // nil = any
	clientID  *strMatcher
	principal *strMatcher
	anyKey    bool
	keys      keySet
	vmin      int16
	vmax      int16

	topic, topicNot, group, txn *strMatcher

	rate *limiter // nil without a rate
	src  *configs.Rule
}

// resourceCond reports whether the rule looks at request bodies.
func (r *rule) resourceCond() bool {
	return r.topic != nil || r.topicNot != nil || r.group != nil || r.txn != nil
}

func (r *rule) hasTopicCond() bool { return r.topic != nil || r.topicNot != nil }

// matchSubject checks the connection-level conditions.
func (r *rule) matchSubject(s *Subject) bool {
	if r.listeners != nil && !slices.Contains(r.listeners, s.Listener) {
		return false
	}
	if r.addrs != nil {
		a := s.Addr.Unmap()
		ok := false
		for _, p := range r.addrs {
			if p.Contains(a) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if r.clientID != nil && !r.clientID.match(s.ClientID) {
		return false
	}
	if r.principal != nil && !r.principal.match(s.Principal) {
		return false
	}
	return true
}

func (r *rule) matchKey(key, version int16) bool {
	if !r.anyKey && !r.keys.has(key) {
		return false
	}
	return version >= r.vmin && version <= r.vmax
}

// unit is one thing a request acts on, decided by itself: a topic (with
// the group and transactional id it is used under), or a group or a
// transactional id alone, or nothing (a request that names no resource).
type unit struct {
	topic     string
	topicID   [16]byte
	group     string
	txn       string
	hasTopic  bool
	byID      bool // named by topic id
	unknownID bool // by id, and the id is not in the gateway's cache
	hasGroup  bool
	hasTxn    bool
}

// matchUnit checks the body-level conditions. A condition on a resource
// the unit does not have does not hold.
func (r *rule) matchUnit(u *unit) bool {
	if r.topic != nil || r.topicNot != nil {
		if !u.hasTopic || u.unknownID {
			return false
		}
		if r.topic != nil && !r.topic.match(u.topic) {
			return false
		}
		if r.topicNot != nil && r.topicNot.match(u.topic) {
			return false
		}
	}
	if r.group != nil && (!u.hasGroup || !r.group.match(u.group)) {
		return false
	}
	if r.txn != nil && (!u.hasTxn || !r.txn.match(u.txn)) {
		return false
	}
	return true
}

// Subject is who sends a request: fixed per connection, except Principal,
// which is set once the connection authenticates. The gateway keeps one
// Subject per connection and passes a pointer to it; do not copy a Subject
// after first use (it caches per-engine match results).
type Subject struct {
	Listener  string
	Addr      netip.Addr
	ClientID  string
	Principal string

	cache atomic.Pointer[subjectCache]
}

// subjectCache holds which rules' connection-level conditions hold for
// one subject under one engine, so a request costs a bit test per rule
// rather than regex matches. It is rebuilt when the engine or any subject
// field changes (a reload, SASL completing).
type subjectCache struct {
	eng                           *Engine
	listener, clientID, principal string
	addr                          netip.Addr
	bits                          []uint64
}

func (e *Engine) subjectBits(s *Subject) []uint64 {
	if c := s.cache.Load(); c != nil && c.eng == e && c.listener == s.Listener && c.clientID == s.ClientID &&
		c.principal == s.Principal && c.addr == s.Addr {
		return c.bits
	}
	c := &subjectCache{eng: e, listener: s.Listener, clientID: s.ClientID, principal: s.Principal, addr: s.Addr,
		bits: make([]uint64, (len(e.rules)+63)/64)}
	for i := range e.rules {
		if e.rules[i].matchSubject(s) {
			c.bits[i>>6] |= 1 << (i & 63)
		}
	}
	s.cache.Store(c)
	return c.bits
}

func bitSet(bits []uint64, i int) bool { return bits[i>>6]&(1<<(i&63)) != 0 }

// rulesFor returns the indexes of rules that can match key, in order.
func (e *Engine) rulesFor(key int16) []int32 {
	if key >= 0 && int(key) < len(e.byKey) {
		return e.byKey[key]
	}
	return e.anyKey
}

// compileRule builds rule i from what Validate parsed (pol.Address,
// APIKeys, Regex); pol parses only what Validate has not seen.
func compileRule(pol *configs.Policy, i int, src *configs.Rule, name string) (*rule, error) {
	r := &rule{name: name, index: i, line: src.Line, src: src, vmin: 0, vmax: 32767}
	switch src.Action {
	case configs.PolicyAllow:
		r.verb = verbAllow
	case configs.PolicyDeny:
		r.verb = verbDeny
	case "":
		if src.Rate == nil {
			return nil, fmt.Errorf("no action and no rate")
		}
		r.verb = verbRate
	default:
		return nil, fmt.Errorf("action %q: want allow or deny", src.Action)
	}
	m := &src.Match
	if len(m.Listener) > 0 {
		r.listeners = slices.Clone(m.Listener)
	}
	for _, a := range m.Address {
		p, err := pol.Address(a)
		if err != nil {
			return nil, err
		}
		r.addrs = append(r.addrs, p)
	}
	r.anyKey = len(m.API) == 0
	for _, a := range m.API {
		keys, err := pol.APIKeys(a)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			r.keys.add(k)
		}
	}
	if v := m.APIVersions; v != nil {
		if v.Min != nil {
			r.vmin = int16(min(max(*v.Min, 0), 32767))
		}
		if v.Max != nil {
			r.vmax = int16(min(max(*v.Max, 0), 32767))
		}
	}
	var err error
	for _, f := range []struct {
		dst  **strMatcher
		src  *configs.StringMatch
		name string
	}{{&r.clientID, m.ClientID, "client_id"}, {&r.principal, m.Principal, "principal"}, {&r.topic, m.Topic, "topic"},
		{&r.topicNot, m.TopicNot, "topic_not"}, {&r.group, m.Group, "group"}, {&r.txn, m.TransactionalID, "transactional_id"}} {
		if *f.dst, err = compileString(pol, f.src); err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return r, nil
}

// allKeys lists every key kmsg knows, for per-key rule tables.
// allKeys is every key a rule can name, those newer than kmsg included
// (configs.MaxNamedKey).
func allKeys() []int16 {
	keys := make([]int16, 0, configs.MaxNamedKey+1)
	for k := int16(0); k <= configs.MaxNamedKey; k++ {
		keys = append(keys, k)
	}
	return keys
}

type (
	netipPrefix = netip.Prefix
	regexpT     = regexp.Regexp
)
