package acl

import (
	"slices"
	"strings"
)

// index is the compiled, immutable form of a set of ACLs: per resource
// type, the LITERAL names in a map (the wildcard "*" among them) and the
// PREFIXED names in a list, each with its entries. The store swaps a new
// index in on every change.
type index struct {
	bindings []Binding // in creation order
	types    map[ResourceType]*typeIndex
}

type entry struct {
	principal, host string
	op              Operation
	perm            Permission
}

type typeIndex struct {
	literal  map[string][]entry
	prefixed []prefixed // sorted by prefix
	all      []entry    // every entry of the type (authorizeByType)
}

type prefixed struct {
	prefix  string
	entries []entry
}

func compile(bs []Binding) *index {
	ix := &index{bindings: bs, types: map[ResourceType]*typeIndex{}}
	for _, b := range bs {
		t := ix.types[b.ResourceType]
		if t == nil {
			t = &typeIndex{literal: map[string][]entry{}}
			ix.types[b.ResourceType] = t
		}
		e := entry{principal: b.Principal, host: b.Host, op: b.Operation, perm: b.Permission}
		t.all = append(t.all, e)
		if b.PatternType == PatternLiteral {
			t.literal[b.ResourceName] = append(t.literal[b.ResourceName], e)
			continue
		}
		i, found := slices.BinarySearchFunc(t.prefixed, b.ResourceName, func(p prefixed, s string) int { return strings.Compare(p.prefix, s) })
		if found {
			t.prefixed[i].entries = append(t.prefixed[i].entries, e)
		} else {
			t.prefixed = slices.Insert(t.prefixed, i, prefixed{prefix: b.ResourceName, entries: []entry{e}})
		}
	}
	return ix
}

// implies reports whether an ALLOW of acl grants op (AclEntry's implied
// operations: READ, WRITE, DELETE and ALTER imply DESCRIBE;
// ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL implies everything).
func implies(acl, op Operation) bool {
	switch {
	case acl == op || acl == OpAll:
		return true
	case op == OpDescribe:
		return acl == OpRead || acl == OpWrite || acl == OpDelete || acl == OpAlter
	case op == OpDescribeConfigs:
		return acl == OpAlterConfigs
	}
	return false
}

// who is the identity a request is authorized as.
type who struct {
	principal string // "User:alice"
	host      string // the client's address, "127.0.0.1"
}

func (e *entry) appliesTo(w who) bool {
	return (e.principal == w.principal || e.principal == WildcardPrincipal) &&
		(e.host == w.host || e.host == WildcardHost)
}

// verdict accumulates the entries that match one resource.
type verdict struct {
	found, allowed, denied bool
}

func (v *verdict) add(es []entry, w who, op Operation) {
	for i := range es {
		e := &es[i]
		v.found = true
		if !e.appliesTo(w) {
			continue
		}
		switch e.perm {
		case PermDeny:
			if e.op == op || e.op == OpAll {
				v.denied = true
			}
		case PermAllow:
			if implies(e.op, op) {
				v.allowed = true
			}
		}
	}
}

// authorize decides op on the resource typ/name for w: any matching DENY
// denies; otherwise any matching ALLOW allows; a resource no ACL names
// is allowed only when allowEveryone.
func (ix *index) authorize(w who, op Operation, typ ResourceType, name string, allowEveryone bool) bool {
	t := ix.types[typ]
	if t == nil {
		return allowEveryone
	}
	var v verdict
	v.add(t.literal[name], w, op)
	if name != WildcardResource {
		v.add(t.literal[WildcardResource], w, op)
	}
	for j := range t.prefixed {
		if p := &t.prefixed[j]; strings.HasPrefix(name, p.prefix) {
			v.add(p.entries, w, op)
		}
	}
	switch {
	case v.denied:
		return false
	case v.allowed:
		return true
	}
	return !v.found && allowEveryone
}

// authorizeByType reports whether w may do op on some resource of typ
// (Kafka's Authorizer.authorizeByResourceType, KIP-679; used for
// InitProducerId without a transactional id, which WRITE on any topic
// allows): an ALLOW for op applies to w, and no DENY of op applies to w
// on the LITERAL wildcard. A type no ACL names follows allowEveryone.
func (ix *index) authorizeByType(w who, op Operation, typ ResourceType, allowEveryone bool) bool {
	t := ix.types[typ]
	if t == nil {
		return allowEveryone
	}
	var wild verdict
	wild.add(t.literal[WildcardResource], w, op)
	if wild.denied {
		return false
	}
	for i := range t.all {
		e := &t.all[i]
		if e.perm == PermAllow && e.appliesTo(w) && implies(e.op, op) {
			return true
		}
	}
	return false
}
