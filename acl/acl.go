// Package acl is the gateway's own ACL store and authorizer, with
// Kafka's semantics (AclAuthorizer / StandardAuthorizer, KIP-290 prefixed
// ACLs): an ACL binds a resource pattern (type, name, LITERAL or
// PREFIXED) to an entry (principal, host, operation, ALLOW or DENY).
//
// A request is allowed when a super user sends it, or when some ALLOW
// ACL matches it and no DENY ACL does (deny wins). A resource no ACL
// names at all is allowed only with allow_everyone_if_no_acl_found
// (Kafka's allow.everyone.if.no.acl.found, false by default).
//
// Matching, as Kafka's authorizers do it:
//   - resource: the same type, and a LITERAL name equal to the resource's
//     or the wildcard "*", or a PREFIXED name the resource's starts with;
//   - principal: equal ("User:alice"), or the wildcard "User:*";
//   - host: equal to the client's address, or "*";
//   - operation: equal, or ALL; an ALLOW of READ, WRITE, DELETE or ALTER
//     also allows DESCRIBE, and an ALLOW of ALTER_CONFIGS also allows
//     DESCRIBE_CONFIGS (AclEntry's implied operations). DENY implies
//     nothing beyond ALL.
//
// The store (store.go) keeps the ACLs in one JSON file, written durably
// (temp file, fsync, rename, fsync of the directory), and publishes a
// compiled index (index.go) through an atomic pointer: a change applies
// to the next request of every session. kafka.go answers DescribeAcls,
// CreateAcls and DeleteAcls; ops.go says which operation on which
// resource each API key needs; authorizer.go plugs it all into the
// policy engine (policy.Authorizer).
package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's names, as kmsg spells its enums.
type (
	ResourceType = kmsg.ACLResourceType
	PatternType  = kmsg.ACLResourcePatternType
	Operation    = kmsg.ACLOperation
	Permission   = kmsg.ACLPermissionType
)

// Enum values (Kafka's ResourceType, PatternType, AclOperation,
// AclPermissionType).
const (
	TypeAny           ResourceType = 1
	TypeTopic         ResourceType = 2
	TypeGroup         ResourceType = 3
	TypeCluster       ResourceType = 4
	TypeTransactional ResourceType = 5
	TypeDelegation    ResourceType = 6
	TypeUser          ResourceType = 7

	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4

	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
	OpTwoPhaseCommit  Operation = 15

	PermAny   Permission = 1
	PermDeny  Permission = 2
	PermAllow Permission = 3
)

// Wildcards and fixed names (Kafka's ResourcePattern.WILDCARD_RESOURCE,
// AclEntry.WILDCARD_PRINCIPAL_STRING / WILDCARD_HOST, the cluster
// resource name and the anonymous principal).
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
	ClusterName       = "kafka-cluster"
	Anonymous         = "User:ANONYMOUS"
)

// Binding is one ACL.
type Binding struct {
	ResourceType ResourceType `json:"resource_type"`
	ResourceName string       `json:"resource_name"`
	PatternType  PatternType  `json:"pattern_type"`
	Principal    string       `json:"principal"`
	Host         string       `json:"host"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

func (b Binding) String() string {
	return fmt.Sprintf("(%s:%s:%s, %s from %s: %s %s)", b.ResourceType, b.PatternType, b.ResourceName,
		b.Principal, b.Host, b.Permission, b.Operation)
}

// ErrInvalid marks a binding or filter Kafka would refuse with
// INVALID_REQUEST.
var ErrInvalid = errors.New("invalid ACL")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks a new ACL as Kafka does (AclControlManager
// validateNewAcl, and the principal parse of SecurityUtils): a concrete
// resource type, LITERAL or PREFIXED, a concrete operation and
// permission, a non-empty resource name, a principal "Type:name", and the
// cluster named kafka-cluster.
func (b Binding) Validate() error {
	switch {
	case b.ResourceType < TypeTopic || b.ResourceType > TypeUser:
		return invalid("invalid resource type %s", b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return invalid("invalid pattern type %s: want LITERAL or PREFIXED", b.PatternType)
	case b.Operation < OpAll || b.Operation > OpTwoPhaseCommit:
		return invalid("invalid operation %s", b.Operation)
	case b.Permission != PermAllow && b.Permission != PermDeny:
		return invalid("invalid permission type %s: want ALLOW or DENY", b.Permission)
	case b.ResourceName == "":
		return invalid("resource name should not be empty")
	case b.ResourceType == TypeCluster && b.ResourceName != ClusterName:
		return invalid("the cluster resource name must be %q, not %q", ClusterName, b.ResourceName)
	case b.Host == "":
		return invalid("host should not be empty (use %q for any host)", WildcardHost)
	}
	typ, name, ok := strings.Cut(b.Principal, ":")
	if !ok || typ == "" || name == "" {
		return invalid("principal %q: want Type:name, e.g. User:alice", b.Principal)
	}
	return nil
}

// Filter selects ACLs (DescribeAcls, DeleteAcls). A nil name, principal
// or host matches any; ANY matches every type, operation and permission.
// Pattern types: ANY matches the name exactly under any pattern type;
// MATCH matches every ACL that would apply to a resource of that name
// (LITERAL equal or "*", PREFIXED a prefix of it); LITERAL and PREFIXED
// match that pattern type exactly (Kafka's ResourcePatternFilter and
// AccessControlEntryFilter).
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Validate checks a filter as Kafka does: no UNKNOWN element (Kafka's
// AclBindingFilter.isUnknown answers INVALID_REQUEST).
func (f Filter) Validate() error {
	switch {
	case f.ResourceType < TypeAny || f.ResourceType > TypeUser:
		return invalid("invalid resource type filter %s", f.ResourceType)
	case f.PatternType < PatternAny || f.PatternType > PatternPrefixed:
		return invalid("invalid pattern type filter %s", f.PatternType)
	case f.Operation < OpAny || f.Operation > OpTwoPhaseCommit:
		return invalid("invalid operation filter %s", f.Operation)
	case f.Permission < PermAny || f.Permission > PermAllow:
		return invalid("invalid permission type filter %s", f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != TypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		switch {
		case f.PatternType == PatternAny || f.PatternType == b.PatternType:
			if name != b.ResourceName {
				return false
			}
		case b.PatternType == PatternLiteral: // MATCH
			if name != b.ResourceName && b.ResourceName != WildcardResource {
				return false
			}
		case b.PatternType == PatternPrefixed: // MATCH
			if !strings.HasPrefix(name, b.ResourceName) {
				return false
			}
		default:
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermAny || f.Permission == b.Permission
}

// Principal is the Kafka principal of a gateway identity: "User:" and
// the SASL user or mapped certificate name, or User:ANONYMOUS for a
// connection that did not authenticate (Kafka's KafkaPrincipal.ANONYMOUS).
func Principal(name string) string {
	if name == "" {
		return Anonymous
	}
	return "User:" + name
}
