package policy

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// ACLs: an Authorizer (package acl, the gateway's ACL store) decides each
// unit the rules let through, so a request passes only when the rules and
// the ACLs both allow it, and a denied unit is answered with the same
// broker-like machinery as a rule's denial (per topic for Produce, Fetch
// and Metadata, whole for the rest; partial.go, deny.go). A rule that
// denies wins; an allow rule does not bypass the ACLs.

// ACLRule is the rule name of a denial by the ACLs, in verdicts, metrics
// and audit records.
const ACLRule = "acl"

// aclRule is decision.rule for a denial by the ACLs (-1 is the default).
const aclRule = -2

// Authorizer decides ACLs for the resources of a request. It must be
// safe for concurrent use; the gateway's is backed by a store whose
// compiled index it swaps atomically, so a change applies to the next
// request of every session.
type Authorizer interface {
	// Governs reports whether requests of key from s are checked at all:
	// false for super users and for the keys every client needs before
	// it can be authorized (ApiVersions, SASL).
	Governs(s *Subject, key int16) bool
	// Authorize decides one resource unit of a request of key/version
	// (req is the decoded body). It returns 0 to allow, else the Kafka
	// error code the resource gets.
	Authorize(s *Subject, key, version int16, res Resource, req kmsg.Request) int16
}

// Resource is what one unit of a request acts on (see extractUnits): a
// topic (with the group or transactional id it is used under), a group,
// a transactional id, or nothing (the request as a whole).
type Resource struct {
	Topic     string
	TopicID   [16]byte
	HasTopic  bool
	UnknownID bool // named by an id the gateway has no name for
	Group     string
	HasGroup  bool
	TxnID     string
	HasTxn    bool
}

// WithAuthorizer returns a copy of e that asks a after its rules (nil:
// no ACLs). The gateway attaches its ACL store's authorizer to every
// engine it compiles, the first and every reloaded one.
func (e *Engine) WithAuthorizer(a Authorizer) *Engine {
	c := *e
	c.authz = a
	return &c
}

// governs reports whether the engine's ACLs check key for s.
func (e *Engine) governs(s *Subject, key int16) bool {
	return e.authz != nil && s != nil && e.authz.Governs(s, key)
}

// decide is decideRules, then the ACLs for what the rules allow.
func (e *Engine) decide(s *Subject, bits []uint64, key, version int16, u *unit, req kmsg.Request, rates *rateHits) decision {
	d := e.decideRules(bits, key, version, u, req, rates)
	if d.deny || !e.governs(s, key) {
		return d
	}
	if u == nil {
		if key == apis.Metadata {
			return d // the request itself; its topics are decided one by one
		}
		// No body to authorize (a version this build cannot decode):
		// refuse rather than let it through unchecked.
		return decision{deny: true, rule: aclRule, code: keyCode(key, req, nil)}
	}
	res := Resource{Topic: u.topic, TopicID: u.topicID, HasTopic: u.hasTopic, UnknownID: u.unknownID,
		Group: u.group, HasGroup: u.hasGroup, TxnID: u.txn, HasTxn: u.hasTxn}
	if code := e.authz.Authorize(s, key, version, res, req); code != 0 {
		return decision{deny: true, rule: aclRule, code: code}
	}
	return d
}

// aclFilterList hides, in a ListGroups, ListTransactions or all-topics
// OffsetFetch answer, what the principal may not describe, as Kafka does
// (KafkaApis handleListGroupsRequest: every group with DESCRIBE on the
// cluster, else those with DESCRIBE on the group;
// handleListTransactionsRequest: those with DESCRIBE on the
// transactional id; handleOffsetFetchRequest: the topics with DESCRIBE).
func (e *Engine) aclFilterList(r *Request, v Verdict) Verdict {
	if v.Action == Deny || r.Body == nil || !e.governs(r.Subject, r.Key) {
		return v
	}
	s, az := r.Subject, e.authz
	var filter func(kmsg.Response)
	switch r.Key {
	case apis.ListGroups:
		// DESCRIBE on the cluster, asked through a key that needs
		// exactly that (DescribeLogDirs: acl/ops.go).
		if az.Authorize(s, apis.DescribeLogDirs, 0, Resource{}, nil) == 0 {
			return v
		}
		filter = func(resp kmsg.Response) {
			lr, ok := resp.(*kmsg.ListGroupsResponse)
			if !ok {
				return
			}
			kept := lr.Groups[:0]
			for _, g := range lr.Groups {
				if az.Authorize(s, apis.DescribeGroups, 0, Resource{Group: g.Group, HasGroup: true}, nil) == 0 {
					kept = append(kept, g)
				}
			}
			lr.Groups = kept
		}
	case apis.ListTransactions:
		filter = func(resp kmsg.Response) {
			lr, ok := resp.(*kmsg.ListTransactionsResponse)
			if !ok {
				return
			}
			kept := lr.TransactionStates[:0]
			for _, t := range lr.TransactionStates {
				if az.Authorize(s, apis.DescribeTransactions, 0, Resource{TxnID: t.TransactionalID, HasTxn: true}, nil) == 0 {
					kept = append(kept, t)
				}
			}
			lr.TransactionStates = kept
		}
	case apis.OffsetFetch:
		// Committed offsets of every topic (no topic named): Kafka leaves
		// out the topics the principal may not describe.
		if !offsetFetchAll(r.Body) {
			return v
		}
		names := r.Names
		may := func(name string, id [16]byte) bool {
			if name == "" && names != nil {
				name, _ = names.TopicName(id)
			}
			return name != "" && az.Authorize(s, apis.OffsetFetch, 0, Resource{Topic: name, HasTopic: true}, nil) == 0
		}
		filter = func(resp kmsg.Response) {
			or, ok := resp.(*kmsg.OffsetFetchResponse)
			if !ok {
				return
			}
			kept := or.Topics[:0]
			for _, t := range or.Topics {
				if may(t.Topic, [16]byte{}) {
					kept = append(kept, t)
				}
			}
			or.Topics = kept
			for i := range or.Groups {
				g := &or.Groups[i]
				kept := g.Topics[:0]
				for _, t := range g.Topics {
					if may(t.Topic, t.TopicID) {
						kept = append(kept, t)
					}
				}
				g.Topics = kept
			}
		}
	default:
		return v
	}
	prev := v.Merge
	v.Merge = func(resp kmsg.Response) {
		if prev != nil {
			prev(resp)
		}
		filter(resp)
	}
	if v.Action == Allow {
		v.Action, v.Forward = Partial, r.Body
	}
	return v
}

// offsetFetchAll reports whether an OffsetFetch asks for every topic of
// some group (a null topic list).
func offsetFetchAll(req kmsg.Request) bool {
	r, ok := req.(*kmsg.OffsetFetchRequest)
	if !ok {
		return false
	}
	if r.Version < 8 {
		return r.Topics == nil
	}
	for _, g := range r.Groups {
		if g.Topics == nil {
			return true
		}
	}
	return false
}
