package console

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const aclUsage = `
usage: tollgate acl list|create|delete [flags]

  tollgate acl list                                         # every ACL
  tollgate acl list --topic orders --pattern match          # every ACL that applies to topic orders
  tollgate acl create --principal User:alice --operation read,describe --topic orders
  tollgate acl create --principal User:alice --operation write --topic fin- --pattern prefixed
  tollgate acl create --principal User:* --deny --operation read --topic secret --host 10.0.0.9
  tollgate acl create --principal User:ops --operation alter --cluster
  tollgate acl delete --principal User:alice --topic orders           # every operation of alice on orders

Resources: --topic, --group, --transactional-id NAME or --cluster (one).
--pattern: literal (create's and delete's default), prefixed, and for list
and delete also match (what applies to the name) and any (list's default).
--operation: all, read, write, create, delete, alter, describe,
cluster_action, describe_configs, alter_configs, idempotent_write (comma-
separated; create needs one, list and delete default to any).
--allow (default) or --deny; list and delete match both unless one is given.
A principal without a type is a User ("alice" is User:alice).
The ACLs are the ones the gateway keeps (policy.acls: enforce) or the
upstream's (policy.acls: upstream); the caller needs ALTER (create, delete)
or DESCRIBE (list) on the cluster.
Exit codes: 0 done, 1 the cluster refused (invalid ACL, denied, security disabled), 2 usage, 3 unreachable.`

// aclFlags are the acl subcommands' own flags.
type aclFlags struct {
	topic, group, txn   string
	cluster             bool
	pattern             string
	principal, host, op string
	allow, deny         bool
}

func registerACL(fs *flag.FlagSet, f *aclFlags) {
	fs.StringVar(&f.topic, "topic", "", "topic name (or prefix with --pattern prefixed)")
	fs.StringVar(&f.group, "group", "", "consumer group id")
	fs.StringVar(&f.txn, "transactional-id", "", "transactional id")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	fs.StringVar(&f.pattern, "pattern", "", "literal, prefixed, match or any")
	fs.StringVar(&f.principal, "principal", "", "principal, e.g. User:alice (User:* for everyone)")
	fs.StringVar(&f.host, "host", "", `client address, "*" for any (create's default)`)
	fs.StringVar(&f.op, "operation", "", "operations, comma-separated")
	fs.BoolVar(&f.allow, "allow", false, "ALLOW (create's default)")
	fs.BoolVar(&f.deny, "deny", false, "DENY")
}

// ACL is `tollgate acl`.
func ACL(ctx context.Context, args []string, std IO) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(std.Err, strings.TrimSpace(aclUsage))
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	sub, args := args[0], args[1:]
	run, ok := map[string]func(context.Context, *common, *aclFlags, IO) error{
		"list":   aclList,
		"create": aclCreate,
		"delete": aclDelete,
	}[sub]
	name := "acl " + sub
	if !ok {
		return finish(std.Err, "acl", usagef("unknown subcommand %q (list, create, delete)", sub))
	}
	var c common
	var f aclFlags
	fs := newFlagSet(name, aclUsage, std.Err)
	c.register(fs)
	registerACL(fs, &f)
	pos, err := parseArgs(fs, args)
	if err == nil && len(pos) > 0 {
		err = usagef("%s takes flags only, not %q", name, pos[0])
	}
	if err == nil {
		err = c.check(std)
	}
	if err == nil {
		err = run(ctx, &c, &f, std)
	}
	return finish(std.Err, name, err)
}

// ACLSpec is what the acl flags say, in Kafka's terms: a binding for
// create, a filter for list and delete (nil strings match any).
type ACLSpec struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	Pattern      kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operations   []kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// parseACLSpec reads the flags for sub (list, create or delete).
func parseACLSpec(f *aclFlags, sub string) (ACLSpec, error) {
	create := sub == "create"
	var s ACLSpec
	n := 0
	for _, r := range []struct {
		set  bool
		typ  kmsg.ACLResourceType
		name string
	}{
		{f.topic != "", kmsg.ACLResourceTypeTopic, f.topic},
		{f.group != "", kmsg.ACLResourceTypeGroup, f.group},
		{f.txn != "", kmsg.ACLResourceTypeTransactionalId, f.txn},
		{f.cluster, kmsg.ACLResourceTypeCluster, "kafka-cluster"},
	} {
		if r.set {
			n++
			s.ResourceType, s.ResourceName = r.typ, kmsg.StringPtr(r.name)
		}
	}
	switch {
	case n > 1:
		return s, usagef("name one resource: --topic, --group, --transactional-id or --cluster")
	case n == 0 && create:
		return s, usagef("create needs a resource: --topic, --group, --transactional-id or --cluster")
	case n == 0:
		s.ResourceType = kmsg.ACLResourceTypeAny
	}
	switch strings.ToLower(f.pattern) {
	case "":
		s.Pattern = kmsg.ACLResourcePatternTypeLiteral
		if sub == "list" {
			s.Pattern = kmsg.ACLResourcePatternTypeAny
		}
	case "literal":
		s.Pattern = kmsg.ACLResourcePatternTypeLiteral
	case "prefixed":
		s.Pattern = kmsg.ACLResourcePatternTypePrefixed
	case "match", "any":
		if create {
			return s, usagef("--pattern %s is for list and delete: an ACL is literal or prefixed", f.pattern)
		}
		s.Pattern = kmsg.ACLResourcePatternTypeMatch
		if strings.EqualFold(f.pattern, "any") {
			s.Pattern = kmsg.ACLResourcePatternTypeAny
		}
	default:
		return s, usagef("--pattern %q: want literal, prefixed, match or any", f.pattern)
	}
	if f.principal != "" {
		p := f.principal
		if !strings.Contains(p, ":") {
			p = "User:" + p
		}
		s.Principal = &p
	} else if create {
		return s, usagef("create needs --principal (e.g. User:alice)")
	}
	switch {
	case f.host != "":
		s.Host = kmsg.StringPtr(f.host)
	case create:
		s.Host = kmsg.StringPtr("*")
	}
	for _, o := range strings.Split(f.op, ",") {
		if o = strings.TrimSpace(o); o == "" {
			continue
		}
		op, err := kmsg.ParseACLOperation(o)
		if err != nil || op == kmsg.ACLOperationUnknown || op == kmsg.ACLOperationAny && create {
			return s, usagef("--operation %q: want all, read, write, create, delete, alter, describe, cluster_action, describe_configs, alter_configs or idempotent_write", o)
		}
		s.Operations = append(s.Operations, op)
	}
	if len(s.Operations) == 0 {
		if create {
			return s, usagef("create needs --operation")
		}
		s.Operations = []kmsg.ACLOperation{kmsg.ACLOperationAny}
	}
	switch {
	case f.allow && f.deny:
		return s, usagef("--allow or --deny, not both")
	case f.deny:
		s.Permission = kmsg.ACLPermissionTypeDeny
	case f.allow || create:
		s.Permission = kmsg.ACLPermissionTypeAllow
	default:
		s.Permission = kmsg.ACLPermissionTypeAny
	}
	return s, nil
}

// aclRow is one ACL in list and delete output.
type aclRow struct {
	ResourceType string `json:"resource_type"`
	Pattern      string `json:"pattern"`
	Name         string `json:"name"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

func (c *common) emitACLs(w io.Writer, rows []aclRow) error {
	return c.emit(w, rows, func(w io.Writer) error {
		t := newTable("TYPE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
		for _, r := range rows {
			t.row(r.ResourceType, r.Pattern, r.Name, r.Principal, r.Host, r.Operation, r.Permission)
		}
		return t.write(w)
	})
}

func kafkaErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

func aclList(ctx context.Context, c *common, f *aclFlags, std IO) error {
	s, err := parseACLSpec(f, "list")
	if err != nil {
		return err
	}
	cl, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	rows := []aclRow{}
	for _, op := range s.Operations {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourceName, req.ResourcePatternType = s.ResourceType, s.ResourceName, s.Pattern
		req.Principal, req.Host, req.Operation, req.PermissionType = s.Principal, s.Host, op, s.Permission
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("describe acls: %w", err)
		}
		if err := kafkaErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return fmt.Errorf("describe acls: %w", err)
		}
		for _, r := range resp.Resources {
			for _, a := range r.ACLs {
				rows = append(rows, aclRow{r.ResourceType.String(), r.ResourcePatternType.String(), r.ResourceName,
					a.Principal, a.Host, a.Operation.String(), a.PermissionType.String()})
			}
		}
	}
	return c.emitACLs(std.Out, rows)
}

func aclCreate(ctx context.Context, c *common, f *aclFlags, std IO) error {
	s, err := parseACLSpec(f, "create")
	if err != nil {
		return err
	}
	cl, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, op := range s.Operations {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = s.ResourceType, *s.ResourceName, s.Pattern
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = *s.Principal, *s.Host, op, s.Permission
		req.Creations = append(req.Creations, cr)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create acls: %w", err)
	}
	for i, r := range resp.Results {
		if err := kafkaErr(r.ErrorCode, r.ErrorMessage); err != nil {
			return fmt.Errorf("create acl %s: %w", req.Creations[i].Operation, err)
		}
	}
	fmt.Fprintf(std.Out, "created %d ACL(s)\n", len(resp.Results))
	return nil
}

func aclDelete(ctx context.Context, c *common, f *aclFlags, std IO) error {
	s, err := parseACLSpec(f, "delete")
	if err != nil {
		return err
	}
	cl, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, op := range s.Operations {
		df := kmsg.NewDeleteACLsRequestFilter()
		df.ResourceType, df.ResourceName, df.ResourcePatternType = s.ResourceType, s.ResourceName, s.Pattern
		df.Principal, df.Host, df.Operation, df.PermissionType = s.Principal, s.Host, op, s.Permission
		req.Filters = append(req.Filters, df)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("delete acls: %w", err)
	}
	rows := []aclRow{}
	for _, r := range resp.Results {
		if err := kafkaErr(r.ErrorCode, r.ErrorMessage); err != nil {
			return fmt.Errorf("delete acls: %w", err)
		}
		for _, m := range r.MatchingACLs {
			if err := kafkaErr(m.ErrorCode, m.ErrorMessage); err != nil {
				return fmt.Errorf("delete acls: %w", err)
			}
			rows = append(rows, aclRow{m.ResourceType.String(), m.ResourcePatternType.String(), m.ResourceName,
				m.Principal, m.Host, m.Operation.String(), m.PermissionType.String()})
		}
	}
	return c.emitACLs(std.Out, rows)
}
