package audit

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/tollgate-kafka/tollgate/configs"
)

// Filter selects records. It is compiled once (from configuration or a
// /tap query) and is safe for concurrent use. Every dimension that is set
// must match; within a dimension any entry may match. Connection open and
// close records are selected by listener only: they have no API, topic
// or (at open) client id. A nil *Filter matches everything.
type Filter struct {
	listeners []string
	api       *[maxKey]bool // nil: any API
	apiNot    *[maxKey]bool // nil: none excluded
	topic     matcher
	client    matcher
}

type matcher struct {
	names    []string
	prefixes []string
	regexes  []*regexp.Regexp
}

func newMatcher(m configs.StringMatch) (matcher, error) {
	out := matcher{names: m.Exact, prefixes: m.Prefix}
	for _, expr := range m.Regex {
		re, err := configs.CompileRegex(expr)
		if err != nil {
			return matcher{}, fmt.Errorf("audit filter: regex %q: %w", expr, err)
		}
		out.regexes = append(out.regexes, re)
	}
	return out, nil
}

func (m *matcher) empty() bool {
	return len(m.names) == 0 && len(m.prefixes) == 0 && len(m.regexes) == 0
}

func (m *matcher) match(s string) bool {
	for _, n := range m.names {
		if s == n {
			return true
		}
	}
	for _, p := range m.prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	for _, re := range m.regexes {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// NewFilter compiles a configured filter. It fails on an API name or a
// regex it cannot use (configs.Validate has already refused those for a
// loaded file).
func NewFilter(c configs.AuditFilter) (*Filter, error) {
	f := &Filter{listeners: c.Listener}
	var err error
	if f.topic, err = newMatcher(c.Topic); err != nil {
		return nil, err
	}
	if f.client, err = newMatcher(c.ClientID); err != nil {
		return nil, err
	}
	if f.api, err = apiSet(c.API); err != nil {
		return nil, err
	}
	if f.apiNot, err = apiSet(c.APINot); err != nil {
		return nil, err
	}
	return f, nil
}

func apiSet(names []string) (*[maxKey]bool, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var set [maxKey]bool
	for _, n := range names {
		keys, err := configs.ResolveAPI(n)
		if err != nil {
			return nil, fmt.Errorf("audit filter: %w", err)
		}
		for _, k := range keys {
			if k >= 0 && int(k) < maxKey {
				set[k] = true
			}
		}
	}
	return &set, nil
}

// IsZero reports whether the filter selects everything.
func (f *Filter) IsZero() bool {
	return f == nil || (len(f.listeners) == 0 && f.api == nil && f.apiNot == nil && f.topic.empty() && f.client.empty())
}

// NeedsTopics reports whether Match looks at topics, which summary-level
// records do not carry.
func (f *Filter) NeedsTopics() bool { return f != nil && !f.topic.empty() }

// MatchHeader is the cheap pre-check made from the request header alone,
// before a record is built: listener, API and client id. A request that
// passes may still fail Match on its topics.
func (f *Filter) MatchHeader(listener string, key int16, clientID string) bool {
	if f == nil {
		return true
	}
	if !f.matchListener(listener) {
		return false
	}
	known := key >= 0 && int(key) < maxKey
	if f.api != nil && (!known || !f.api[key]) {
		return false
	}
	if f.apiNot != nil && known && f.apiNot[key] {
		return false
	}
	if !f.client.empty() && !f.client.match(clientID) {
		return false
	}
	return true
}

func (f *Filter) matchListener(l string) bool {
	if len(f.listeners) == 0 {
		return true
	}
	for _, x := range f.listeners {
		if x == l {
			return true
		}
	}
	return false
}

// Match reports whether the filter selects rec.
func (f *Filter) Match(rec *Record) bool {
	if f == nil {
		return true
	}
	if !rec.IsRequest() {
		return f.matchListener(rec.Listener)
	}
	if !f.MatchHeader(rec.Listener, rec.Key, rec.ClientID) {
		return false
	}
	if f.topic.empty() {
		return true
	}
	for i := range rec.Topics {
		if f.topic.match(rec.Topics[i].Name) {
			return true
		}
	}
	return false
}

// FilterFromQuery builds a filter from the query of a /tap URL:
//
//	listener=a,b  api=Produce,Fetch  api_not=Metadata  topic=orders,pay*  client=console*
//
// Values are comma-separated; a value ending in '*' is a prefix. API
// values are names, key numbers or policy groups (admin, produce, ...).
// The parameters may also repeat (api=Produce&api=Fetch).
func FilterFromQuery(q url.Values) (*Filter, error) {
	var c configs.AuditFilter
	for key, vals := range q {
		var items []string
		for _, v := range vals {
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					items = append(items, s)
				}
			}
		}
		switch key {
		case "listener":
			c.Listener = append(c.Listener, items...)
		case "api":
			c.API = append(c.API, items...)
		case "api_not":
			c.APINot = append(c.APINot, items...)
		case "topic":
			c.Topic = addMatch(c.Topic, items)
		case "client", "client_id":
			c.ClientID = addMatch(c.ClientID, items)
		default:
			return nil, fmt.Errorf("tap filter: unknown parameter %q (want listener, api, api_not, topic, client)", key)
		}
	}
	return NewFilter(c)
}

func addMatch(m configs.StringMatch, items []string) configs.StringMatch {
	for _, s := range items {
		if p, ok := strings.CutSuffix(s, "*"); ok {
			m.Prefix = append(m.Prefix, p)
		} else {
			m.Exact = append(m.Exact, s)
		}
	}
	return m
}
