package policy

import (
	"fmt"
	"time"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Engine is a compiled, immutable rule set. The gateway holds the current
// one in an atomic.Pointer and swaps it on reload; every method is safe
// for concurrent use. Rate limiter state lives outside the immutable part
// (see CompileFrom).
type Engine struct {
	rules       []rule
	byKey       [][]int32 // key -> indexes of rules that can match it, in order
	anyKey      []int32   // rules without an api condition (for keys kmsg does not know)
	defaultDeny bool
	hide        map[string]bool // listeners with hide_denied_apis
	limiters    int             // rules with a rate
	authz       Authorizer      // the ACLs, asked after the rules (authz.go); nil: none
}

// Warning is a problem that does not stop a policy from loading: a rule
// that can never decide anything because an earlier one always decides
// first, or a rule that denies what every client needs.
type Warning struct {
	Rule   string // rule name
	Line   int    // line of the rule in Source (0 = unknown)
	Source string // config file ("" = unknown)
	Msg    string
}

func (w Warning) String() string {
	s := ""
	if w.Source != "" {
		s = w.Source + ":"
		if w.Line > 0 {
			s += fmt.Sprintf("%d:", w.Line)
		}
		s += " "
	}
	return s + "policy rule " + w.Rule + ": " + w.Msg
}

// Compile builds an engine from a validated policy; see CompileFrom.
func Compile(cfg configs.Policy) (*Engine, []Warning, error) {
	return CompileFrom(nil, cfg)
}

// CompileFrom builds an engine. Matchers (regexes, CIDRs, API sets) are
// compiled here, once. A rate rule whose name and rate settings are the
// same as in prev keeps prev's limiters, so a reload does not hand every
// client a fresh budget. Errors are those configs.Validate reports too
// (Compile checks again so an engine is never built from a bad policy).
func CompileFrom(prev *Engine, cfg configs.Policy) (*Engine, []Warning, error) {
	e := &Engine{byKey: make([][]int32, configs.MaxNamedKey+1), hide: map[string]bool{}}
	switch cfg.Default {
	case configs.PolicyAllow, "":
	case configs.PolicyDeny:
		e.defaultDeny = true
	default:
		return nil, nil, fmt.Errorf("policy default %q: want allow or deny", cfg.Default)
	}
	for _, l := range cfg.HideDeniedAPIs {
		e.hide[l] = true
	}
	old := map[string]*limiter{}
	if prev != nil {
		for i := range prev.rules {
			if l := prev.rules[i].rate; l != nil {
				old[prev.rules[i].name] = l
			}
		}
	}
	e.rules = make([]rule, len(cfg.Rules))
	for i := range cfg.Rules {
		src := &cfg.Rules[i]
		name := cfg.RuleName(i)
		r, err := compileRule(&cfg, i, src, name)
		if err != nil {
			return nil, nil, fmt.Errorf("policy rule %s%s: %w", name, lineSuffix(cfg.Source, src.Line), err)
		}
		if src.Rate != nil {
			spec := newRateSpec(src.Rate)
			if l := old[name]; l != nil && l.spec == spec {
				r.rate = l
			} else {
				r.rate = newLimiter(spec)
			}
			e.limiters++
		}
		e.rules[i] = *r
	}
	for _, k := range allKeys() {
		for i := range e.rules {
			if e.rules[i].anyKey || e.rules[i].keys.has(k) {
				e.byKey[k] = append(e.byKey[k], int32(i))
			}
		}
	}
	for i := range e.rules {
		if e.rules[i].anyKey {
			e.anyKey = append(e.anyKey, int32(i))
		}
	}
	return e, e.warnings(cfg.Source), nil
}

func lineSuffix(source string, line int) string {
	switch {
	case source != "" && line > 0:
		return fmt.Sprintf(" (%s:%d)", source, line)
	case line > 0:
		return fmt.Sprintf(" (line %d)", line)
	}
	return ""
}

// HidesKeys reports whether ApiVersions on this listener leaves out the
// keys DeniedKeys returns.
func (e *Engine) HidesKeys(listener string) bool { return e.hide[listener] }

// Rules returns the number of rules, for logs.
func (e *Engine) Rules() int { return len(e.rules) }

// exemptFromDefault lists keys a default deny does not apply to: a client
// cannot learn anything, not even that it is denied, without ApiVersions
// and (on SASL listeners) the handshake. Explicit rules still apply.
func exemptFromDefault(key int16) bool { return apis.Of(key).PreAuth }

// decision is the outcome for one unit.
type decision struct {
	deny bool
	rule int32 // -1: the default
	code int16 // Kafka error code when deny
}

// decide walks the rules for one unit (nil: the body is not decoded; rules
// with resource conditions are skipped, which NeedsBody guarantees cannot
// change the outcome). Rate rules passed on the way are added to rates.
func (e *Engine) decideRules(bits []uint64, key, version int16, u *unit, req kmsg.Request, rates *rateHits) decision {
	for _, i := range e.rulesFor(key) {
		if !bitSet(bits, int(i)) {
			continue
		}
		r := &e.rules[i]
		if version < r.vmin || version > r.vmax {
			continue
		}
		if r.resourceCond() {
			if u == nil {
				continue
			}
			if u.unknownID && r.hasTopicCond() {
				// The rule might match the topic, but the gateway has no
				// name for the id: answer as a broker does for an id it
				// does not know (docs/protocol.md §4.3).
				return decision{deny: true, rule: i, code: kerr.UnknownTopicID.Code}
			}
			if !r.matchUnit(u) {
				continue
			}
		}
		switch r.verb {
		case verbRate:
			rates.add(i)
			continue
		case verbAllow:
			if r.rate != nil {
				rates.add(i)
			}
			return decision{rule: i}
		}
		return decision{deny: true, rule: i, code: ruleCode(r, key, req, u)}
	}
	if e.defaultDeny && !exemptFromDefault(key) && (key != apis.Metadata || (u != nil && u.hasTopic)) {
		return decision{deny: true, rule: -1, code: keyCode(key, req, u)}
	}
	return decision{rule: -1}
}

func (e *Engine) ruleName(i int32) string {
	if i == aclRule {
		return ACLRule
	}
	if i < 0 {
		return ""
	}
	return e.rules[i].name
}

// NeedsBody reports whether deciding a request of key/version from s
// could depend on its body: a rule with topic, group or transactional id
// conditions may match, or the request may be denied (a deny needs the
// body to build the broker-like error response: Produce and Fetch errors
// mirror every topic and partition, so a key-only deny decodes them too).
// When it returns false the gateway may forward the frame without
// decoding it and call Check with a nil Body. It does not allocate once
// the subject's match cache is built (first request per connection and
// engine).
//
// Metadata (key 3) answers need body access whenever any topic rule or a
// default deny could hide topics, and whenever the subject may be denied
// CreateTopics (auto-creation is then withheld, partial.go).
func (e *Engine) NeedsBody(s *Subject, key, version int16) bool {
	if e.governs(s, key) {
		return true // ACLs decide resource by resource (authz.go)
	}
	bits := e.subjectBits(s)
	if key == apis.Metadata && e.creationDeniable(bits) {
		return true // auto-creation may have to be withheld (partial.go)
	}
	for _, i := range e.rulesFor(key) {
		if !bitSet(bits, int(i)) {
			continue
		}
		r := &e.rules[i]
		if version < r.vmin || version > r.vmax {
			continue
		}
		if r.resourceCond() {
			return true
		}
		switch r.verb {
		case verbAllow:
			return false
		case verbDeny:
			return true
		}
	}
	return e.defaultDeny && !exemptFromDefault(key)
}

// DeniedKeys returns the API keys denied outright for s: for every
// version, whatever the body says. ApiVersions filtering uses it on
// listeners where HidesKeys is true. ApiVersions itself is never listed.
func (e *Engine) DeniedKeys(s *Subject) []int16 {
	bits := e.subjectBits(s)
	var out []int16
	for _, k := range allKeys() {
		if k == 18 {
			continue
		}
		if e.deniedOutright(bits, k) {
			out = append(out, k)
		}
	}
	return out
}

func (e *Engine) deniedOutright(bits []uint64, key int16) bool {
	for _, i := range e.rulesFor(key) {
		if !bitSet(bits, int(i)) {
			continue
		}
		r := &e.rules[i]
		partial := r.resourceCond() || r.vmin > 0 || r.vmax < 32767
		switch {
		case r.verb == verbRate:
			continue
		case r.verb == verbAllow:
			// Allows some or all requests: not denied outright.
			return false
		case partial:
			// Denies some requests; later rules decide the others.
			continue
		}
		return true
	}
	return e.defaultDeny && !exemptFromDefault(key) && key != apis.Metadata
}

// Action is the kind of verdict.
type Action int

const (
	Allow   Action = iota // forward the request as it is
	Deny                  // answer with Verdict.Response (or close, see Verdict.Close)
	Partial               // forward Verdict.Forward, then apply Verdict.Merge to the response
)

func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	case Partial:
		return "partial"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// TopicNames resolves topic ids to names from metadata the gateway has
// seen. It must be safe for concurrent use.
type TopicNames interface {
	TopicName(id [16]byte) (string, bool)
}

// Creations remembers, across connections, the topic names a Metadata
// request was forwarded to auto-create (splitCreation). It must be safe
// for concurrent use.
type Creations interface {
	// CreationAttempted reports whether name was forwarded for
	// auto-creation recently.
	CreationAttempted(name string) bool
	// AttemptCreation records that name is being forwarded for
	// auto-creation.
	AttemptCreation(name string)
}

// Request is one request to decide.
type Request struct {
	Subject      *Subject
	Key, Version int16
	Size         int          // request frame bytes (what a produce byte rate counts)
	Body         kmsg.Request // decoded body when NeedsBody was true, else nil
	Names        TopicNames   // may be nil: every id is then unknown
	// Creations remembers the topics asked for auto-creation; nil: a
	// Metadata request naming topics the client may create and topics it
	// may not creates none of them (partial.go, splitCreation).
	Creations Creations
	Now       time.Time
}

// Verdict is the outcome of Check.
type Verdict struct {
	Action Action
	// Rule names the deciding rule ("" = the default). For Deny and
	// Partial, the first rule that denied something.
	Rule string
	// Response is, for Deny, the complete broker-like error response for
	// Body's key and version (docs/protocol.md §4.1–4.2). Nil with Close.
	Response kmsg.Response
	// Close means the request cannot be answered: a denied Produce with
	// acks=0 (Kafka closes the connection so the producer notices), or a
	// deny decided without a body. Close the connection.
	Close bool
	// Forward is, for Partial, the request with the denied parts removed
	// (a Metadata request keeps a non-nil, possibly empty, topic list),
	// or a Metadata request with auto-creation withheld. Its version may
	// be above the request's (Metadata v0-3 raised to v4, partial.go):
	// the backend then answers at Forward's version, which the caller
	// decodes and re-encodes at the request's.
	Forward kmsg.Request
	// Merge is, for Partial, applied to the backend's response to Forward
	// (decoded at Forward's version) before it goes to the client: it adds
	// the denied parts' error entries, and hides denied topics in
	// all-topics Metadata answers.
	Merge func(resp kmsg.Response)
	// Throttle is how long to stop reading the connection after the
	// response (KIP-219), from rate rules; ThrottleRule names the rule
	// that asked for the longest.
	Throttle     time.Duration
	ThrottleRule string
}

// Check decides one request. With a nil Body (NeedsBody returned false)
// rules with resource conditions are skipped; if such a request is denied
// anyway (the caller skipped NeedsBody), the verdict is Deny with Close,
// because no error response can be built without the body.
func (e *Engine) Check(r *Request) Verdict {
	bits := e.subjectBits(r.Subject)
	now := r.Now
	if now.IsZero() {
		now = time.Now()
	}
	var rates rateHits
	var v Verdict
	switch body := r.Body.(type) {
	case nil:
		d := e.decide(r.Subject, bits, r.Key, r.Version, nil, nil, &rates)
		v.Rule = e.ruleName(d.rule)
		if d.deny {
			v.Action, v.Close = Deny, true
			return v
		}
	case *kmsg.ProduceRequest:
		v = e.checkProduce(r, bits, body, &rates)
	case *kmsg.FetchRequest:
		v = e.checkFetch(r, bits, body, &rates)
	case *kmsg.MetadataRequest:
		v = e.checkMetadata(r, bits, body, &rates) // auto-creation withheld by the rules and the ACLs alike (partial.go)
	default:
		v = e.checkGeneric(r, bits, &rates)
		v = e.aclFilterList(r, v) // authz.go
	}
	if v.Action != Deny {
		e.charge(&v, &rates, r.Subject, r.Key, r.Size, now)
	}
	return v
}

// checkGeneric decides every unit of a request; any denied unit denies
// the whole request (only Produce, Fetch and Metadata are split), with
// each denied resource's own error and OPERATION_NOT_ATTEMPTED for the
// others, as Kafka does in batched calls it refuses in part.
func (e *Engine) checkGeneric(r *Request, bits []uint64, rates *rateHits) Verdict {
	units := extractUnits(r.Body, r.Names)
	var first *decision
	var all []decision
	for i := range units {
		d := e.decide(r.Subject, bits, r.Key, r.Version, &units[i], r.Body, rates)
		all = append(all, d)
		if d.deny && first == nil {
			first = &all[len(all)-1]
		}
	}
	if first == nil {
		rule := int32(-1)
		if len(all) > 0 {
			rule = all[0].rule
		}
		return Verdict{Action: Allow, Rule: e.ruleName(rule)}
	}
	codes := resourceCodes{top: first.code}
	if len(units) > 1 {
		codes.per = map[resKey]int16{}
		for i, u := range units {
			c := all[i].code
			if !all[i].deny {
				c = kerr.OperationNotAttempted.Code
			}
			if k, ok := u.key(); ok {
				if _, seen := codes.per[k]; !seen || all[i].deny {
					codes.per[k] = c
				}
			}
		}
	}
	return Verdict{Action: Deny, Rule: e.ruleName(first.rule), Response: denyResponse(r.Body, &codes)}
}
