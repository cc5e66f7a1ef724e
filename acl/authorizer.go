package acl

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/policy"
)

// Authorizer is the store's ACLs as a policy.Authorizer: the policy
// engine asks it for every resource unit of every request its rules let
// through (policy/authz.go), and answers a denial like a broker does.
// It is immutable; a reload builds a new one over the same store.
type Authorizer struct {
	store         *Store
	super         map[string]bool
	allowEveryone bool
}

// NewAuthorizer authorizes against store. superUsers are principals
// ("User:admin") that bypass the ACLs (Kafka's super.users);
// allowEveryone is Kafka's allow.everyone.if.no.acl.found.
func NewAuthorizer(store *Store, superUsers []string, allowEveryone bool) *Authorizer {
	a := &Authorizer{store: store, super: map[string]bool{}, allowEveryone: allowEveryone}
	for _, u := range superUsers {
		a.super[u] = true
	}
	return a
}

var _ policy.Authorizer = (*Authorizer)(nil)

// Governs reports whether requests of key from s are checked: not for a
// super user, nor for the keys every client needs first.
func (a *Authorizer) Governs(s *policy.Subject, key int16) bool {
	return !needOf(key).open && !a.super[Principal(s.Principal)]
}

func (a *Authorizer) who(s *policy.Subject) who {
	host := ""
	if s.Addr.IsValid() {
		host = s.Addr.Unmap().String()
	}
	return who{principal: Principal(s.Principal), host: host}
}

// Authorize decides one resource unit (policy.Authorizer).
func (a *Authorizer) Authorize(s *policy.Subject, key, version int16, res policy.Resource, req kmsg.Request) int16 {
	n := needOf(key)
	ix := a.store.index()
	w := a.who(s)
	ok := func(op Operation, typ ResourceType, name string) bool {
		return ix.authorize(w, op, typ, name, a.allowEveryone)
	}
	if n.cluster != 0 && !ok(n.cluster, TypeCluster, ClusterName) {
		return kerr.ClusterAuthorizationFailed.Code
	}
	if res.HasTxn && n.txn != 0 && !ok(n.txn, TypeTransactional, res.TxnID) {
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	if !res.HasTxn && n.idempotent {
		if !ok(OpIdempotentWrite, TypeCluster, ClusterName) && !ix.authorizeByType(w, OpWrite, TypeTopic, a.allowEveryone) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	}
	if res.HasGroup && n.group != 0 && !ok(n.group, TypeGroup, res.Group) {
		return kerr.GroupAuthorizationFailed.Code
	}
	if res.HasTopic && n.topic != 0 {
		if res.UnknownID {
			// No name to authorize: answer as a broker does for an id it
			// does not know (docs/protocol.md §4.3).
			return kerr.UnknownTopicID.Code
		}
		if !ok(n.topic, TypeTopic, res.Topic) && !(n.topicOnCluster && ok(n.topic, TypeCluster, ClusterName)) {
			return kerr.TopicAuthorizationFailed.Code
		}
	}
	if n.bare != 0 && !res.HasTopic && !res.HasGroup && !res.HasTxn && !ok(n.bare, TypeCluster, ClusterName) {
		return kerr.ClusterAuthorizationFailed.Code
	}
	return 0
}
