package acl

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/policy"
)

func lit(typ ResourceType, name, principal, host string, op Operation, perm Permission) Binding {
	return Binding{ResourceType: typ, ResourceName: name, PatternType: PatternLiteral, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func pre(typ ResourceType, name, principal, host string, op Operation, perm Permission) Binding {
	b := lit(typ, name, principal, host, op, perm)
	b.PatternType = PatternPrefixed
	return b
}

// TestAuthorizeKafkaCases is a table of the cases Kafka's authorizer
// tests and documentation spell out (AclAuthorizerTest,
// StandardAuthorizerTest, KIP-290): wildcards, prefixes, deny wins,
// implied operations, hosts, and allow.everyone.if.no.acl.found.
func TestAuthorizeKafkaCases(t *testing.T) {
	alice, bob := who{"User:alice", "10.0.0.1"}, who{"User:bob", "10.0.0.2"}
	cases := []struct {
		name     string
		acls     []Binding
		w        who
		op       Operation
		typ      ResourceType
		res      string
		everyone bool
		want     bool
	}{
		{"no acls, default deny", nil, alice, OpRead, TypeTopic, "t", false, false},
		{"no acls, allow everyone", nil, alice, OpRead, TypeTopic, "t", true, true},
		{"literal allow", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow)}, alice, OpRead, TypeTopic, "t", false, true},
		{"literal is not a prefix", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow)}, alice, OpRead, TypeTopic, "t2", false, false},
		{"other principal", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow)}, bob, OpRead, TypeTopic, "t", false, false},
		{"acl on resource: allow everyone does not apply", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow)}, bob, OpRead, TypeTopic, "t", true, false},
		{"acl on other resource: allow everyone applies", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow)}, bob, OpRead, TypeTopic, "u", true, true},
		{"wildcard principal", []Binding{lit(TypeTopic, "t", "User:*", "*", OpRead, PermAllow)}, bob, OpRead, TypeTopic, "t", false, true},
		{"wildcard resource", []Binding{lit(TypeTopic, "*", "User:alice", "*", OpWrite, PermAllow)}, alice, OpWrite, TypeTopic, "anything", false, true},
		{"wildcard resource is per type", []Binding{lit(TypeGroup, "*", "User:alice", "*", OpRead, PermAllow)}, alice, OpRead, TypeTopic, "t", false, false},
		{"prefixed", []Binding{pre(TypeTopic, "fin-", "User:alice", "*", OpRead, PermAllow)}, alice, OpRead, TypeTopic, "fin-ledger", false, true},
		{"prefixed equal name", []Binding{pre(TypeTopic, "fin-", "User:alice", "*", OpRead, PermAllow)}, alice, OpRead, TypeTopic, "fin-", false, true},
		{"prefixed no match", []Binding{pre(TypeTopic, "fin-", "User:alice", "*", OpRead, PermAllow)}, alice, OpRead, TypeTopic, "fi", false, false},
		{"prefixed star is a literal prefix", []Binding{pre(TypeTopic, "*", "User:alice", "*", OpRead, PermAllow)}, alice, OpRead, TypeTopic, "t", false, false},
		{"host match", []Binding{lit(TypeTopic, "t", "User:alice", "10.0.0.1", OpRead, PermAllow)}, alice, OpRead, TypeTopic, "t", false, true},
		{"host mismatch", []Binding{lit(TypeTopic, "t", "User:alice", "10.0.0.9", OpRead, PermAllow)}, alice, OpRead, TypeTopic, "t", false, false},
		{"deny wins over allow", []Binding{
			lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow),
			lit(TypeTopic, "t", "User:alice", "*", OpRead, PermDeny)}, alice, OpRead, TypeTopic, "t", false, false},
		{"prefixed deny wins over literal allow", []Binding{
			lit(TypeTopic, "fin-ledger", "User:alice", "*", OpRead, PermAllow),
			pre(TypeTopic, "fin-", "User:alice", "*", OpRead, PermDeny)}, alice, OpRead, TypeTopic, "fin-ledger", false, false},
		{"wildcard deny wins", []Binding{
			lit(TypeTopic, "t", "User:alice", "*", OpAll, PermAllow),
			lit(TypeTopic, "*", "User:*", "10.0.0.1", OpRead, PermDeny)}, alice, OpRead, TypeTopic, "t", false, false},
		{"deny of another host does not apply", []Binding{
			lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow),
			lit(TypeTopic, "t", "User:alice", "10.0.0.9", OpRead, PermDeny)}, alice, OpRead, TypeTopic, "t", false, true},
		{"deny of another op does not apply", []Binding{
			lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow),
			lit(TypeTopic, "t", "User:alice", "*", OpWrite, PermDeny)}, alice, OpRead, TypeTopic, "t", false, true},
		{"deny ALL denies", []Binding{
			lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow),
			lit(TypeTopic, "t", "User:alice", "*", OpAll, PermDeny)}, alice, OpRead, TypeTopic, "t", false, false},
		{"allow ALL allows", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpAll, PermAllow)}, alice, OpDelete, TypeTopic, "t", false, true},
		{"READ implies DESCRIBE", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow)}, alice, OpDescribe, TypeTopic, "t", false, true},
		{"WRITE implies DESCRIBE", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpWrite, PermAllow)}, alice, OpDescribe, TypeTopic, "t", false, true},
		{"DELETE implies DESCRIBE", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpDelete, PermAllow)}, alice, OpDescribe, TypeTopic, "t", false, true},
		{"ALTER implies DESCRIBE", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpAlter, PermAllow)}, alice, OpDescribe, TypeTopic, "t", false, true},
		{"ALTER_CONFIGS implies DESCRIBE_CONFIGS", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpAlterConfigs, PermAllow)}, alice, OpDescribeConfigs, TypeTopic, "t", false, true},
		{"DESCRIBE implies nothing", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpDescribe, PermAllow)}, alice, OpRead, TypeTopic, "t", false, false},
		{"READ does not imply WRITE", []Binding{lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow)}, alice, OpWrite, TypeTopic, "t", false, false},
		{"deny READ does not deny DESCRIBE", []Binding{
			lit(TypeTopic, "t", "User:alice", "*", OpDescribe, PermAllow),
			lit(TypeTopic, "t", "User:alice", "*", OpRead, PermDeny)}, alice, OpDescribe, TypeTopic, "t", false, true},
		{"cluster", []Binding{lit(TypeCluster, ClusterName, "User:alice", "*", OpCreate, PermAllow)}, alice, OpCreate, TypeCluster, ClusterName, false, true},
		{"empty resource name", []Binding{pre(TypeTopic, "a", "User:alice", "*", OpRead, PermAllow)}, alice, OpRead, TypeTopic, "", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, b := range c.acls {
				if err := b.Validate(); err != nil {
					t.Fatalf("case ACL %v: %v", b, err)
				}
			}
			if got := compile(c.acls).authorize(c.w, c.op, c.typ, c.res, c.everyone); got != c.want {
				t.Errorf("authorize(%v, %s on %s %q) = %v, want %v", c.w, c.op, c.typ, c.res, got, c.want)
			}
		})
	}
}

// TestFilterMatches: ResourcePatternFilter and AccessControlEntryFilter
// semantics (ANY, MATCH, exact pattern types, null fields).
func TestFilterMatches(t *testing.T) {
	s := kmsg.StringPtr
	litT := lit(TypeTopic, "fin-ledger", "User:alice", "*", OpRead, PermAllow)
	star := lit(TypeTopic, "*", "User:alice", "*", OpRead, PermAllow)
	preF := pre(TypeTopic, "fin-", "User:alice", "*", OpRead, PermAllow)
	all := Filter{ResourceType: TypeAny, PatternType: PatternAny, Operation: OpAny, Permission: PermAny}
	cases := []struct {
		name string
		f    Filter
		want [3]bool // litT, star, preF
	}{
		{"all", all, [3]bool{true, true, true}},
		{"any pattern, exact name", func() Filter { f := all; f.ResourceName = s("fin-ledger"); return f }(), [3]bool{true, false, false}},
		{"match", func() Filter { f := all; f.PatternType = PatternMatch; f.ResourceName = s("fin-ledger"); return f }(), [3]bool{true, true, true}},
		{"match other", func() Filter { f := all; f.PatternType = PatternMatch; f.ResourceName = s("hr"); return f }(), [3]bool{false, true, false}},
		{"literal only", func() Filter { f := all; f.PatternType = PatternLiteral; return f }(), [3]bool{true, true, false}},
		{"prefixed by name", func() Filter { f := all; f.PatternType = PatternPrefixed; f.ResourceName = s("fin-"); return f }(), [3]bool{false, false, true}},
		{"group type", func() Filter { f := all; f.ResourceType = TypeGroup; return f }(), [3]bool{false, false, false}},
		{"principal", func() Filter { f := all; f.Principal = s("User:bob"); return f }(), [3]bool{false, false, false}},
		{"principal exact, no wildcard", func() Filter { f := all; f.Principal = s("User:*"); return f }(), [3]bool{false, false, false}},
		{"host", func() Filter { f := all; f.Host = s("*"); return f }(), [3]bool{true, true, true}},
		{"operation", func() Filter { f := all; f.Operation = OpWrite; return f }(), [3]bool{false, false, false}},
		{"permission", func() Filter { f := all; f.Permission = PermAllow; return f }(), [3]bool{true, true, true}},
	}
	for _, c := range cases {
		got := [3]bool{c.f.Matches(litT), c.f.Matches(star), c.f.Matches(preF)}
		if got != c.want {
			t.Errorf("%s: matches %v, want %v", c.name, got, c.want)
		}
	}
}

// TestValidate: what Kafka refuses with INVALID_REQUEST.
func TestValidate(t *testing.T) {
	ok := lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func(*Binding){
		"any type":        func(b *Binding) { b.ResourceType = TypeAny },
		"unknown type":    func(b *Binding) { b.ResourceType = 0 },
		"match pattern":   func(b *Binding) { b.PatternType = PatternMatch },
		"any pattern":     func(b *Binding) { b.PatternType = PatternAny },
		"any operation":   func(b *Binding) { b.Operation = OpAny },
		"unknown op":      func(b *Binding) { b.Operation = 0 },
		"any permission":  func(b *Binding) { b.Permission = PermAny },
		"empty name":      func(b *Binding) { b.ResourceName = "" },
		"bare principal":  func(b *Binding) { b.Principal = "alice" },
		"empty principal": func(b *Binding) { b.Principal = "" },
		"cluster name":    func(b *Binding) { b.ResourceType, b.ResourceName = TypeCluster, "other" },
		"empty host":      func(b *Binding) { b.Host = "" },
	}
	for name, f := range bad {
		b := ok
		f(&b)
		if err := b.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := (Filter{ResourceType: 0, PatternType: PatternAny, Operation: OpAny, Permission: PermAny}).Validate(); err == nil {
		t.Error("a filter with an UNKNOWN resource type is valid")
	}
}

// TestStoreSurvivesReopen: what Create and Delete commit is in the file,
// and a reopened store has it; a broken file is an error naming it.
func TestStoreSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "acls.json")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	a := lit(TypeTopic, "t", "User:alice", "*", OpRead, PermAllow)
	b := pre(TypeGroup, "g-", "User:bob", "*", OpAll, PermDeny)
	if err := s.Create([]Binding{a, b, a}); err != nil {
		t.Fatal(err)
	}
	removed, err := s.Delete([]Filter{{ResourceType: TypeGroup, PatternType: PatternAny, Operation: OpAny, Permission: PermAny}})
	if err != nil || len(removed) != 1 || len(removed[0]) != 1 || removed[0][0] != b {
		t.Fatalf("delete: %v %v", removed, err)
	}
	if err := s.Create([]Binding{b}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Bindings(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("reopened: %v", got)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want the file alone (no temporary left)", len(ents))
	}
	os.WriteFile(path, []byte(`{"version":1,"acls":[{"resource_type":"TOPIC"}]}`), 0o600)
	if _, err := Open(path); err == nil {
		t.Error("a file with an invalid ACL opened")
	}
}

// TestAuthorizerOperations: the per-key facts (ops.go) through the
// policy.Authorizer interface, with super users.
func TestAuthorizerOperations(t *testing.T) {
	s, _ := Open("")
	s.Create([]Binding{
		lit(TypeTopic, "t", "User:alice", "*", OpWrite, PermAllow),
		lit(TypeGroup, "g", "User:alice", "*", OpRead, PermAllow),
		lit(TypeTopic, "c", "User:alice", "*", OpRead, PermAllow),
		lit(TypeTransactional, "tx", "User:alice", "*", OpWrite, PermAllow),
	})
	a := NewAuthorizer(s, []string{"User:root"}, false)
	alice := &policy.Subject{Principal: "alice", Addr: netip.MustParseAddr("127.0.0.1")}
	root := &policy.Subject{Principal: "root"}
	if a.Governs(root, apis.Produce) || !a.Governs(alice, apis.Produce) || a.Governs(alice, apis.ApiVersions) {
		t.Fatal("Governs: super users and ApiVersions are not checked, others are")
	}
	topic := func(n string) policy.Resource { return policy.Resource{Topic: n, HasTopic: true} }
	cases := []struct {
		name string
		key  int16
		res  policy.Resource
		want int16
	}{
		{"produce allowed", apis.Produce, topic("t"), 0},
		{"produce other topic", apis.Produce, topic("u"), kerr.TopicAuthorizationFailed.Code},
		{"fetch needs READ", apis.Fetch, topic("t"), kerr.TopicAuthorizationFailed.Code},
		{"metadata: WRITE implies DESCRIBE", apis.Metadata, topic("t"), 0},
		{"commit", apis.OffsetCommit, policy.Resource{Group: "g", HasGroup: true, Topic: "c", HasTopic: true}, 0},
		{"commit other group", apis.OffsetCommit, policy.Resource{Group: "h", HasGroup: true, Topic: "c", HasTopic: true}, kerr.GroupAuthorizationFailed.Code},
		{"join", apis.JoinGroup, policy.Resource{Group: "g", HasGroup: true}, 0},
		{"transactional produce", apis.Produce, policy.Resource{TxnID: "tx", HasTxn: true, Topic: "t", HasTopic: true}, 0},
		{"transactional produce, other id", apis.Produce, policy.Resource{TxnID: "ty", HasTxn: true, Topic: "t", HasTopic: true}, kerr.TransactionalIDAuthorizationFailed.Code},
		{"idempotent init: WRITE on a topic", apis.InitProducerID, policy.Resource{}, 0},
		{"create topics needs CREATE", apis.CreateTopics, topic("t"), kerr.TopicAuthorizationFailed.Code},
		{"describe cluster: any principal, as Kafka", apis.DescribeCluster, policy.Resource{}, 0},
		{"describe log dirs", apis.DescribeLogDirs, policy.Resource{}, kerr.ClusterAuthorizationFailed.Code},
		{"create acls", apis.CreateACLs, policy.Resource{}, kerr.ClusterAuthorizationFailed.Code},
		{"broker configs", apis.DescribeConfigs, policy.Resource{}, kerr.ClusterAuthorizationFailed.Code},
		{"unknown id", apis.Fetch, policy.Resource{HasTopic: true, UnknownID: true}, kerr.UnknownTopicID.Code},
		{"inter-broker", apis.LeaderAndISR, policy.Resource{}, kerr.ClusterAuthorizationFailed.Code},
	}
	for _, c := range cases {
		if got := a.Authorize(alice, c.key, 0, c.res, nil); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	bob := &policy.Subject{Principal: "bob"}
	if got := a.Authorize(bob, apis.InitProducerID, 0, policy.Resource{}, nil); got != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("idempotent init without any WRITE: %d", got)
	}
	s.Create([]Binding{lit(TypeCluster, ClusterName, "User:bob", "*", OpCreate, PermAllow)})
	if got := a.Authorize(bob, apis.CreateTopics, 0, topic("new"), nil); got != 0 {
		t.Errorf("CREATE on the cluster allows CreateTopics: %d (a change applies at once)", got)
	}
}

// TestWriteFailureNamesNoPath: a CreateAcls or DeleteAcls whose change
// cannot be written answers UNKNOWN_SERVER_ERROR with a message that
// names no file; OnWriteError gets the real error (for the log).
func TestWriteFailureNamesNoPath(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "secret-state-dir")
	s, err := Open(filepath.Join(blocker, "acls.json")) // no file yet: an empty store
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blocker, nil, 0o600); err != nil { // a file where the directory should be
		t.Fatal(err)
	}
	var logged []error
	s.OnWriteError = func(err error) { logged = append(logged, err) }
	cr := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:a", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	cr.Creations = append(cr.Creations, c)
	resp, err := s.Answer(cr)
	if err != nil {
		t.Fatal(err)
	}
	res := resp.(*kmsg.CreateACLsResponse).Results[0]
	if res.ErrorCode != kerr.UnknownServerError.Code || res.ErrorMessage == nil || filepath.IsAbs(*res.ErrorMessage) ||
		strings.Contains(*res.ErrorMessage, "secret-state-dir") {
		t.Fatalf("create result %+v (message %q): want UNKNOWN_SERVER_ERROR naming no path", res, deref(res.ErrorMessage))
	}
	if len(logged) != 1 || !strings.Contains(logged[0].Error(), "secret-state-dir") {
		t.Fatalf("OnWriteError got %v, want the error naming the file", logged)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
