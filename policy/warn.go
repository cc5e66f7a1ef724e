package policy

import (
	"fmt"
	"slices"
	"strings"
)

// warnings reports rules that can never decide anything: an earlier allow
// or deny rule matches every request they match ("overlapping" rules are
// normal — a narrow deny before a broad allow — and only reported when
// the overlap is complete). The check is conservative: it warns only when
// coverage is certain from the patterns themselves (a regex covers only
// the same regex).
func (e *Engine) warnings(source string) []Warning {
	var out []Warning
	for j := range e.rules {
		b := &e.rules[j]
		for i := range j {
			a := &e.rules[i]
			if a.verb == verbRate || !covers(a, b) {
				continue
			}
			at := ""
			if a.line > 0 {
				at = fmt.Sprintf(" (line %d)", a.line)
			}
			out = append(out, Warning{Rule: b.name, Line: b.line, Source: source,
				Msg: fmt.Sprintf("unreachable: rule %s%s comes first and matches every request this rule matches", a.name, at)})
			break
		}
	}
	return out
}

// covers reports whether every request b matches, a matches too.
func covers(a, b *rule) bool {
	if a.listeners != nil && (b.listeners == nil || !subset(b.listeners, a.listeners)) {
		return false
	}
	if a.addrs != nil {
		if b.addrs == nil {
			return false
		}
		for _, bp := range b.addrs {
			if !slices.ContainsFunc(a.addrs, func(ap netipPrefix) bool { return ap.Bits() <= bp.Bits() && ap.Contains(bp.Addr()) }) {
				return false
			}
		}
	}
	if !a.anyKey && (b.anyKey || b.keys[0]&^a.keys[0] != 0 || b.keys[1]&^a.keys[1] != 0) {
		return false
	}
	if a.vmin > b.vmin || a.vmax < b.vmax {
		return false
	}
	for _, p := range [][2]*strMatcher{{a.clientID, b.clientID}, {a.principal, b.principal}, {a.topic, b.topic}, {a.group, b.group}, {a.txn, b.txn}} {
		if !strCovers(p[0], p[1]) {
			return false
		}
	}
	if a.topicNot != nil {
		// a excludes some topics: b must exclude them too.
		if b.topicNot == nil || !strCovers(b.topicNot, a.topicNot) {
			return false
		}
	} else if b.topicNot != nil && a.topic == nil && a.resourceCond() {
		return false
	}
	if a.hasTopicCond() && !b.hasTopicCond() {
		return false
	}
	return true
}

// strCovers reports whether every string b matches, a matches too.
func strCovers(a, b *strMatcher) bool {
	if a == nil {
		return true
	}
	if b == nil {
		return false
	}
	for _, e := range b.exact {
		if !a.match(e) {
			return false
		}
	}
	for _, p := range b.prefix {
		if !slices.ContainsFunc(a.prefix, func(q string) bool { return strings.HasPrefix(p, q) }) {
			return false
		}
	}
	for _, re := range b.regex {
		if !slices.ContainsFunc(a.regex, func(q *regexpT) bool { return q.String() == re.String() }) {
			return false
		}
	}
	return true
}

func subset(b, a []string) bool {
	for _, s := range b {
		if !slices.Contains(a, s) {
			return false
		}
	}
	return true
}
