package configs

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"regexp"
	"regexp/syntax"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
	yaml "go.yaml.in/yaml/v3"

	"github.com/tollgate-kafka/tollgate/apis"
)

// Policy.Default and Rule.Action values.
const (
	PolicyAllow = "allow"
	PolicyDeny  = "deny"
)

// Rate.Per values: whose budget a rate rule's limiter counts.
const (
	RatePerClientID  = "client_id" // one budget per client id (Kafka's client-id quota)
	RatePerPrincipal = "principal" // one budget per authenticated identity (Kafka's user quota)
	RatePerAddress   = "address"   // one budget per client IP address
	RatePerShared    = "shared"    // one budget for everything the rule matches
)

// Policy is the access policy: rules evaluated in order, the first allow or
// deny rule that matches decides, and Default decides when none does. Rate
// rules without an action limit what they match and let evaluation go on.
// Package policy compiles it; this type is data only.
type Policy struct {
	// Default is allow or deny. It applies to every request no rule
	// decides, except ApiVersions, SaslHandshake and SaslAuthenticate
	// (a client cannot even learn it is denied without them) and the
	// Metadata request itself (its topics are decided one by one).
	Default string `yaml:"default"`
	// HideDeniedAPIs names listeners on which ApiVersions leaves out the
	// API keys denied outright for the connection, instead of answering
	// those requests with an authorization error.
	HideDeniedAPIs []string `yaml:"hide_denied_apis,omitempty"`
	Rules          []Rule   `yaml:"rules,omitempty"`

	// ACLs: the gateway's own ACL store (package acl; README, "ACLs").
	//
	// ACLs is off, enforce or upstream. enforce: the gateway answers
	// DescribeAcls, CreateAcls and DeleteAcls from its store and
	// authorizes every request against it, on either backend. off: the
	// gateway answers those keys SECURITY_DISABLED, as a broker without
	// an authorizer does, and checks nothing. upstream (gateway mode
	// only): they are forwarded to the upstream, as any other key. Left
	// out: off with the built-in broker, upstream in gateway mode, so
	// that nothing changes until an operator turns ACLs on.
	ACLs string `yaml:"acls,omitempty"`
	// ACLsFile is where the store keeps its ACLs (JSON, written
	// durably). Default: acls.json in broker.data_dir, in both modes.
	ACLsFile string `yaml:"acls_file,omitempty"`
	// SuperUsers are principals ("User:admin") the ACLs do not apply to
	// (Kafka's super.users).
	SuperUsers []string `yaml:"super_users,omitempty"`
	// AllowEveryoneIfNoACLFound allows a resource no ACL names (Kafka's
	// allow.everyone.if.no.acl.found; default false, as Kafka's).
	AllowEveryoneIfNoACLFound bool `yaml:"allow_everyone_if_no_acl_found,omitempty"`

	// Client quotas (KIP-546; quota.go): Quotas is off, enforce or
	// upstream ("" = enforce with the built-in broker, upstream with an
	// upstream); QuotasFile is where enforce keeps them (default
	// <data_dir>/tollgate-quotas.json with the built-in broker; required
	// with an upstream). Both need a restart to change.
	Quotas     string `yaml:"quotas,omitempty"`
	QuotasFile string `yaml:"quotas_file,omitempty"`

	// Source is the file the policy was read from ("" when built in
	// code), for warnings that name a line; not configuration (Changed
	// skips it).
	Source string `yaml:"-" diff:"-"`

	// parsed is what Validate compiled (Regex, Address, APIKeys).
	parsed *policyParsed
}

// policyParsed holds the policy's regexes, address patterns and API sets
// as Validate compiled them, keyed by the text the rules give, so that
// package policy compiles nothing again. Ownership: written by Validate,
// read-only afterwards (shared by copies of the Policy).
type policyParsed struct {
	regex map[string]*regexp.Regexp
	addr  map[string]netip.Prefix
	api   map[string][]int16
}

// Regex returns the compiled form of a StringMatch regex (CompileRegex):
// the one Validate compiled, or compiled now for an expression Validate
// has not seen. A *regexp.Regexp is safe for concurrent use.
func (p *Policy) Regex(expr string) (*regexp.Regexp, error) {
	if re, ok := p.parsed.lookupRegex(expr); ok {
		return re, nil
	}
	return CompileRegex(expr)
}

// Address returns a parsed Match.Address entry (ParseAddressPattern), as
// Regex does.
func (p *Policy) Address(s string) (netip.Prefix, error) {
	if p.parsed != nil {
		if a, ok := p.parsed.addr[s]; ok {
			return a, nil
		}
	}
	return ParseAddressPattern(s)
}

// APIKeys returns a resolved Match.API entry (ResolveAPI), as Regex does.
// The slice is shared: do not modify it.
func (p *Policy) APIKeys(s string) ([]int16, error) {
	if p.parsed != nil {
		if k, ok := p.parsed.api[s]; ok {
			return k, nil
		}
	}
	return ResolveAPI(s)
}

func (pp *policyParsed) lookupRegex(expr string) (*regexp.Regexp, bool) {
	if pp == nil {
		return nil, false
	}
	re, ok := pp.regex[expr]
	return re, ok
}

// Rule is one policy rule.
type Rule struct {
	// Name identifies the rule in logs, metrics and verdicts; rate
	// budgets survive a reload for a rule whose name and rate stay the
	// same. Default: "rules[i]". Letters, digits, '.', '_', '-'.
	Name  string `yaml:"name,omitempty"`
	Match Match  `yaml:"match"`
	// Action is allow or deny. It may be left out when Rate is set: the
	// rule then only limits, and evaluation goes on to later rules.
	Action string `yaml:"action,omitempty"`
	Rate   *Rate  `yaml:"rate,omitempty"`

	// Line is where the rule starts in Source (0 when unknown).
	Line int `yaml:"-" diff:"-"`
}

// Match lists a rule's conditions; all that are set must hold. An empty
// match matches every request.
type Match struct {
	// Listener names one or more listeners.
	Listener Patterns `yaml:"listener,omitempty"`
	// Address lists client source addresses as CIDRs or single IPs.
	Address Patterns `yaml:"address,omitempty"`
	// ClientID matches the client.id of the request header.
	ClientID *StringMatch `yaml:"client_id,omitempty"`
	// Principal matches the TLS or SASL identity of the connection ("" until
	// the connection authenticates).
	Principal *StringMatch `yaml:"principal,omitempty"`
	// API lists API keys by name (Produce, CreateTopics, as Kafka or kmsg
	// spell them, in any case), number, or group (see APIGroups).
	API Patterns `yaml:"api,omitempty"`
	// APIVersions limits the request versions matched.
	APIVersions *VersionRange `yaml:"api_versions,omitempty"`
	// Topic and TopicNot match each topic a request names (Produce, Fetch,
	// Metadata, ...); a rule with either applies only to requests that name
	// topics, topic by topic.
	Topic    *StringMatch `yaml:"topic,omitempty"`
	TopicNot *StringMatch `yaml:"topic_not,omitempty"`
	// Group matches consumer group ids; TransactionalID transactional ids.
	Group           *StringMatch `yaml:"group,omitempty"`
	TransactionalID *StringMatch `yaml:"transactional_id,omitempty"`
}

// HasResourceConditions reports whether the match looks inside request
// bodies (topics, groups, transactional ids).
func (m *Match) HasResourceConditions() bool {
	return m.Topic != nil || m.TopicNot != nil || m.Group != nil || m.TransactionalID != nil
}

// StringMatch matches a string exactly, by prefix or by regular
// expression; any one of the listed patterns is enough. A regular
// expression must match the whole string (it is anchored). In YAML a
// plain string or a list of strings is shorthand for exact.
type StringMatch struct {
	Exact  Patterns `yaml:"exact,omitempty"`
	Prefix Patterns `yaml:"prefix,omitempty"`
	Regex  Patterns `yaml:"regex,omitempty"`
}

// Patterns is a list of strings. In YAML one string is a list of one; it
// is not split on commas (client ids and principals may contain them).
type Patterns []string

// VersionRange is an inclusive range of API versions; a missing bound is
// open.
type VersionRange struct {
	Min *int `yaml:"min,omitempty"`
	Max *int `yaml:"max,omitempty"`
}

// Rate limits what a rule matches, with token buckets (one per Per key).
// A request over budget is still served; the connection is then throttled
// the way Kafka's quotas do it (KIP-219).
type Rate struct {
	RequestsPerSecond     int  `yaml:"requests_per_second,omitempty"`
	RequestBurst          int  `yaml:"request_burst,omitempty"`
	ProduceBytesPerSecond Size `yaml:"produce_bytes_per_second,omitempty"`
	ProduceBurst          Size `yaml:"produce_burst,omitempty"`
	FetchBytesPerSecond   Size `yaml:"fetch_bytes_per_second,omitempty"`
	FetchBurst            Size `yaml:"fetch_burst,omitempty"`
	// Burst is shorthand for the burst of the only rate set.
	Burst Size `yaml:"burst,omitempty"`
	// Per is client_id (default), principal, address or shared.
	Per string `yaml:"per"`
}

func (r *Rate) setDefaults() { r.Per = RatePerClientID }

// Bursts returns the effective bursts: the ones set, Burst for the only
// rate set, else one second's worth (and at least one request).
func (r *Rate) Bursts() (requests int, produce, fetch Size) {
	requests, produce, fetch = r.RequestBurst, r.ProduceBurst, r.FetchBurst
	if r.Burst > 0 {
		switch {
		case r.RequestsPerSecond > 0 && requests == 0:
			requests = int(r.Burst)
		case r.ProduceBytesPerSecond > 0 && produce == 0:
			produce = r.Burst
		case r.FetchBytesPerSecond > 0 && fetch == 0:
			fetch = r.Burst
		}
	}
	if requests == 0 {
		requests = max(r.RequestsPerSecond, 1)
	}
	if produce == 0 {
		produce = r.ProduceBytesPerSecond
	}
	if fetch == 0 {
		fetch = r.FetchBytesPerSecond
	}
	return requests, produce, fetch
}

// MaxNamedKey is the largest API key a rule can name. Keys above
// kmsg.MaxKey are ones this build cannot decode; the gateway refuses them
// unless upstream.forward_unknown_apis relays them, and rules can still
// deny them by number or with the group "unknown".
const MaxNamedKey = 127

func unknownKeys() []int16 {
	var keys []int16
	for k := int16(kmsg.MaxKey + 1); k <= MaxNamedKey; k++ {
		keys = append(keys, k)
	}
	return keys
}

// APIGroups are the names usable in Match.API for sets of keys, from the
// API table (apis.GroupNames; "admin" is every key in no other group
// except Metadata, ApiVersions, the SASL keys and client telemetry, which
// every client sends).
var APIGroups = func() map[string][]int16 {
	m := make(map[string][]int16, len(apis.GroupNames))
	for _, name := range apis.GroupNames {
		g, _ := apis.GroupByName(name)
		m[name] = apis.Keys(g)
	}
	m["unknown"] = unknownKeys() // keys newer than this build
	return m
}()

// ResolveAPI turns one Match.API entry into API keys: a group name
// (lowercase, exactly), an API name (otherwise case-insensitive: Kafka's
// "InitProducerId" or kmsg's "InitProducerID"), or a key number up to
// MaxNamedKey.
func ResolveAPI(s string) ([]int16, error) {
	t := strings.TrimSpace(s)
	// Group names are lowercase and matched exactly, so "produce" is the
	// group and "Produce" the API.
	if g, ok := APIGroups[t]; ok {
		return g, nil
	}
	if n, err := strconv.Atoi(t); err == nil {
		if n < 0 || n > MaxNamedKey {
			return nil, fmt.Errorf("API key %d is out of range (0-%d; keys above %d are newer than this version)", n, MaxNamedKey, kmsg.MaxKey)
		}
		return []int16{int16(n)}, nil
	}
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		if strings.EqualFold(kmsg.NameForKey(k), t) {
			return []int16{k}, nil
		}
	}
	msg := fmt.Sprintf("unknown API %q", s)
	if c := closestAPI(t); c != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", c)
	}
	return nil, fmt.Errorf("%s: want an API name such as Produce or CreateTopics, a key number, or a group (admin, produce, consume, group, transaction, unknown)", msg)
}

func closestAPI(s string) string {
	names := make([]string, 0, kmsg.MaxKey+6)
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		names = append(names, strings.ToLower(kmsg.NameForKey(k)))
	}
	for g := range APIGroups {
		names = append(names, g)
	}
	sort.Strings(names)
	c := closest(s, names)
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		if strings.ToLower(kmsg.NameForKey(k)) == c {
			return kmsg.NameForKey(k)
		}
	}
	return c
}

// CompileRegex compiles a StringMatch regex the way policy matching uses
// it: anchored at both ends.
func CompileRegex(expr string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + expr + `)$`)
}

// ParseAddressPattern parses a Match.Address entry: a CIDR or one IP.
func ParseAddressPattern(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or fd00::/8", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or a CIDR such as 10.0.0.0/8", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// decodeYAML reads one string or a list of strings.
func (p *Patterns) decodeYAML(d *decoder, n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.ScalarNode:
		*p = Patterns{n.Value}
		d.mark(path, n, false, "")
		d.mark(path+"[0]", n, true, n.Value)
	case yaml.SequenceNode:
		d.mark(path, n, false, "")
		out := make(Patterns, 0, len(n.Content))
		for i, it := range n.Content {
			if !d.spend(it) {
				return
			}
			it = d.resolve(it)
			ip := fmt.Sprintf("%s[%d]", path, i)
			if it.Kind != yaml.ScalarNode || isNull(it) {
				d.errorf(it, ip, "want a string, got %s", describe(it))
				continue
			}
			d.mark(ip, it, true, it.Value)
			out = append(out, it.Value)
		}
		*p = out
	default:
		d.errorf(n, path, "want a string or a list of strings, got %s", describe(n))
	}
}

// decodeYAML reads a mapping of exact/prefix/regex, or a string or list
// of strings as shorthand for exact.
func (m *StringMatch) decodeYAML(d *decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.MappingNode {
		d.mapping(n, path, reflect.ValueOf(m).Elem())
		return
	}
	m.Exact.decodeYAML(d, n, path+".exact")
	d.mark(path, n, false, "")
}

// setLines records where each rule starts, for warnings from package
// policy.
func (p *Policy) setLines(meta *sourceMeta) {
	if meta == nil {
		return
	}
	p.Source = meta.source
	for i := range p.Rules {
		if m, ok := meta.marks[fmt.Sprintf("policy.rules[%d]", i)]; ok {
			p.Rules[i].Line = m.line
		}
	}
}

// RuleName returns the rule's name, or "rules[i]" when it has none.
func (p *Policy) RuleName(i int) string {
	if p.Rules[i].Name != "" {
		return p.Rules[i].Name
	}
	return fmt.Sprintf("rules[%d]", i)
}

var ruleNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func (v *validator) policy() {
	p := &v.c.Policy
	pp := &policyParsed{regex: map[string]*regexp.Regexp{}, addr: map[string]netip.Prefix{}, api: map[string][]int16{}}
	v.pp = pp
	defer func() { v.pp, p.parsed = nil, pp }()
	switch p.Default {
	case PolicyAllow, PolicyDeny:
	default:
		v.errf("policy.default", p.Default, "%q: want allow or deny", p.Default)
	}
	v.policyACLs()
	v.quotas() // quota.go
	listeners := v.c.listenerNames()
	for i, name := range p.HideDeniedAPIs {
		if !listeners[name] {
			v.errf(fmt.Sprintf("policy.hide_denied_apis[%d]", i), name, "no listener is named %q", name)
		}
	}
	v.policyRules("policy", p)
}

// policyRules checks the rules of the policy at path (the top-level
// one, or a virtual cluster's).
func (v *validator) policyRules(path string, p *Policy) {
	listeners := v.c.listenerNames()
	names := map[string]int{}
	for i := range p.Rules {
		r := &p.Rules[i]
		rp := fmt.Sprintf("%s.rules[%d]", path, i)
		if r.Name != "" {
			switch j, dup := names[r.Name]; {
			case !ruleNameRE.MatchString(r.Name):
				v.errf(rp+".name", r.Name, "%q is not a valid rule name: use up to 128 letters, digits, '.', '_' or '-'", r.Name)
			case dup:
				v.errf(rp+".name", r.Name, "duplicate rule name %q: %s.rules[%d]%s has it too", r.Name, path, j, v.where(fmt.Sprintf("%s.rules[%d].name", path, j)))
			default:
				names[r.Name] = i
			}
		}
		v.match(rp+".match", &r.Match, listeners)
		switch r.Action {
		case PolicyAllow, PolicyDeny:
		case "":
			if r.Rate == nil {
				v.errf(rp, nil, "the rule has no action: set action (allow or deny) or rate")
			}
		default:
			v.errf(rp+".action", r.Action, "%q: want allow or deny", r.Action)
		}
		if r.Rate != nil {
			if r.Action == PolicyDeny {
				v.errf(rp+".rate", nil, "a deny rule cannot have a rate: denied requests use no budget")
			}
			v.rate(rp+".rate", r.Rate, &r.Match)
		}
	}
}

func (v *validator) match(path string, m *Match, listeners map[string]bool) {
	for i, l := range m.Listener {
		if !listeners[l] {
			v.errf(fmt.Sprintf("%s.listener[%d]", path, i), l, "no listener is named %q", l)
		}
	}
	for i, a := range m.Address {
		if pfx, err := ParseAddressPattern(a); err != nil {
			v.errf(fmt.Sprintf("%s.address[%d]", path, i), a, "%s", err)
		} else {
			v.pp.addr[a] = pfx
		}
	}
	for i, a := range m.API {
		if keys, err := ResolveAPI(a); err != nil {
			v.errf(fmt.Sprintf("%s.api[%d]", path, i), a, "%s", err)
		} else {
			v.pp.api[a] = keys
		}
	}
	if r := m.APIVersions; r != nil {
		p := path + ".api_versions"
		if r.Min != nil && (*r.Min < 0 || *r.Min > 32767) {
			v.errf(p+".min", r.Min, "%d is out of range 0-32767", *r.Min)
		}
		if r.Max != nil && (*r.Max < 0 || *r.Max > 32767) {
			v.errf(p+".max", r.Max, "%d is out of range 0-32767", *r.Max)
		}
		if r.Min != nil && r.Max != nil && *r.Min > *r.Max {
			v.errf(p, nil, "min %d is above max %d: the rule can never match", *r.Min, *r.Max)
		}
	}
	for _, s := range []struct {
		name string
		m    *StringMatch
	}{{"client_id", m.ClientID}, {"principal", m.Principal}, {"topic", m.Topic}, {"topic_not", m.TopicNot}, {"group", m.Group}, {"transactional_id", m.TransactionalID}} {
		if s.m != nil {
			v.stringMatch(path+"."+s.name, s.m)
		}
	}
}

func (v *validator) stringMatch(path string, m *StringMatch) {
	if len(m.Exact)+len(m.Prefix)+len(m.Regex) == 0 {
		v.errf(path, nil, "empty: give exact, prefix or regex")
	}
	for i, p := range m.Prefix {
		if p == "" {
			v.errf(fmt.Sprintf("%s.prefix[%d]", path, i), p, "an empty prefix matches everything: leave the condition out instead")
		}
	}
	for i, re := range m.Regex {
		compiled, err := CompileRegex(re)
		if err == nil && v.pp != nil {
			v.pp.regex[re] = compiled
		}
		if err != nil {
			// The message of a *syntax.Error quotes the anchored
			// expression, which the operator did not write: show the code.
			msg := err.Error()
			var se *syntax.Error
			if errors.As(err, &se) {
				msg = string(se.Code)
			}
			v.errf(fmt.Sprintf("%s.regex[%d]", path, i), re, "%q is not a valid regular expression: %s", re, msg)
		}
	}
}

func (v *validator) rate(path string, r *Rate, m *Match) {
	if r.RequestsPerSecond < 0 {
		v.errf(path+".requests_per_second", r.RequestsPerSecond, "%d is negative: want a rate above zero", r.RequestsPerSecond)
	}
	if r.RequestBurst < 0 {
		v.errf(path+".request_burst", r.RequestBurst, "%d is negative", r.RequestBurst)
	}
	for _, s := range []struct {
		name string
		val  Size
	}{{"produce_bytes_per_second", r.ProduceBytesPerSecond}, {"produce_burst", r.ProduceBurst}, {"fetch_bytes_per_second", r.FetchBytesPerSecond}, {"fetch_burst", r.FetchBurst}, {"burst", r.Burst}} {
		if s.val < 0 {
			v.errf(path+"."+s.name, s.val, "%s is negative", s.val)
		}
	}
	set, given := 0, 0
	for _, val := range []int64{int64(r.RequestsPerSecond), int64(r.ProduceBytesPerSecond), int64(r.FetchBytesPerSecond)} {
		if val > 0 {
			set++
		}
		if val != 0 {
			given++
		}
	}
	if given == 0 {
		v.errf(path, nil, "no rate: set requests_per_second, produce_bytes_per_second or fetch_bytes_per_second above zero")
	}
	if r.Burst != 0 && set > 1 {
		v.errf(path+".burst", r.Burst, "burst is ambiguous with more than one rate: use request_burst, produce_burst and fetch_burst")
	}
	switch r.Per {
	case RatePerClientID, RatePerPrincipal, RatePerAddress, RatePerShared:
	default:
		v.errf(path+".per", r.Per, "%q: want client_id, principal, address or shared", r.Per)
	}
	if r.FetchBytesPerSecond > 0 && (m.HasResourceConditions() || m.APIVersions != nil) {
		v.errf(path+".fetch_bytes_per_second", r.FetchBytesPerSecond,
			"fetch bytes are counted when the response arrives, where only listener, address, client_id, principal and api are known: move the fetch rate to a rule without topic, group, transactional_id or api_versions")
	}
}

// Policy.ACLs values.
const (
	ACLsOff      = "off"
	ACLsEnforce  = "enforce"
	ACLsUpstream = "upstream"
)

// ACLsFileName is the ACL store's file in broker.data_dir when
// policy.acls_file is left out.
const ACLsFileName = "acls.json"

// ACLMode is the effective policy.acls: what was set, or off with the
// built-in broker and upstream in gateway mode.
func (c *Config) ACLMode() string {
	switch {
	case c.Policy.ACLs != "":
		return c.Policy.ACLs
	case c.UpstreamMode():
		return ACLsUpstream
	}
	return ACLsOff
}

// ACLsPath is the effective policy.acls_file.
func (c *Config) ACLsPath() string {
	if c.Policy.ACLsFile != "" {
		return c.Policy.ACLsFile
	}
	return filepath.Join(c.Broker.DataDir, ACLsFileName)
}

// policyACLs checks the ACL settings.
func (v *validator) policyACLs() {
	p := &v.c.Policy
	switch p.ACLs {
	case "", ACLsOff, ACLsEnforce:
	case ACLsUpstream:
		if !v.c.UpstreamMode() {
			v.errf("policy.acls", p.ACLs, "upstream needs an upstream: with the built-in broker use enforce or off")
		}
	default:
		v.errf("policy.acls", p.ACLs, "%q: want off, enforce or upstream", p.ACLs)
	}
	for i, u := range p.SuperUsers {
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			v.errf(fmt.Sprintf("policy.super_users[%d]", i), u, "%q: want a principal Type:name, e.g. User:admin", u)
		}
	}
}
