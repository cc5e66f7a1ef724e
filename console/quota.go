package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

const quotaUsage = `
usage: tollgate quota list|set|delete [flags] [KEY=VALUE | KEY ...]

  tollgate quota list                                              # every quota
  tollgate quota list --user alice                                 # alice's, with any client id
  tollgate quota set --user alice producer_byte_rate=1048576 consumer_byte_rate=2097152
  tollgate quota set --default-user --client-id etl request_percentage=50
  tollgate quota set --client-id loader controller_mutation_rate=10
  tollgate quota delete --user alice producer_byte_rate            # one key
  tollgate quota delete --user alice                               # every key of the entity

The entity is --user NAME or --default-user, and/or --client-id ID or
--default-client-id (Kafka's KIP-55 entities; the most specific one that
has a key applies). Keys: producer_byte_rate, consumer_byte_rate,
request_percentage, controller_mutation_rate. Works against any Kafka
(DescribeClientQuotas, AlterClientQuotas), and a tollgate gateway with
policy.quotas: enforce.
Exit codes: 0 done, 1 the cluster refused (invalid key or value, denied, ...), 2 usage, 3 unreachable.`

type quotaFlags struct {
	user, clientID               string
	defaultUser, defaultClientID bool
}

// Quota is `tollgate quota`.
func Quota(ctx context.Context, args []string, std IO) int {
	return runSubcommand(ctx, "quota", quotaUsage, args, std, []subcommand[quotaFlags]{
		{"list", quotaList}, {"set", quotaSet}, {"delete", quotaDelete},
	}, func(fs *flag.FlagSet, _ string) (*quotaFlags, func() error) {
		var f quotaFlags
		fs.StringVar(&f.user, "user", "", "user entity (the SASL or mapped principal name)")
		fs.StringVar(&f.clientID, "client-id", "", "client-id entity")
		fs.BoolVar(&f.defaultUser, "default-user", false, "the default user entity (every user without its own quota)")
		fs.BoolVar(&f.defaultClientID, "default-client-id", false, "the default client-id entity")
		return &f, f.check
	})
}

func (f *quotaFlags) check() error {
	switch {
	case f.user != "" && f.defaultUser:
		return usagef("--user and --default-user exclude each other")
	case f.clientID != "" && f.defaultClientID:
		return usagef("--client-id and --default-client-id exclude each other")
	}
	return nil
}

func (f *quotaFlags) empty() bool {
	return f.user == "" && !f.defaultUser && f.clientID == "" && !f.defaultClientID
}

// entity is the flags' quota entity.
func (f *quotaFlags) entity() kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	switch {
	case f.user != "":
		e = append(e, kadm.ClientQuotaEntityComponent{Type: "user", Name: &f.user})
	case f.defaultUser:
		e = append(e, kadm.ClientQuotaEntityComponent{Type: "user"})
	}
	switch {
	case f.clientID != "":
		e = append(e, kadm.ClientQuotaEntityComponent{Type: "client-id", Name: &f.clientID})
	case f.defaultClientID:
		e = append(e, kadm.ClientQuotaEntityComponent{Type: "client-id"})
	}
	return e
}

// filter is the flags as a describe filter: EXACT or DEFAULT per given
// part.
func (f *quotaFlags) filter() []kadm.DescribeClientQuotaComponent {
	var out []kadm.DescribeClientQuotaComponent
	for _, p := range f.entity() {
		c := kadm.DescribeClientQuotaComponent{Type: p.Type, MatchName: p.Name, MatchType: 0}
		if p.Name == nil {
			c.MatchType = 1
		}
		out = append(out, c)
	}
	return out
}

// quotaRow is one entity's quotas as list prints them.
type quotaRow struct {
	User     *string            `json:"user,omitempty"`
	ClientID *string            `json:"client_id,omitempty"`
	Values   map[string]float64 `json:"values"`
}

func entityCell(set bool, name *string) string {
	switch {
	case !set:
		return "-"
	case name == nil:
		return "<default>"
	}
	return *name
}

func quotaList(ctx context.Context, c *common, f *quotaFlags, pos []string, std IO) error {
	if len(pos) > 0 {
		return usagef("list takes no arguments, got %q", pos)
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	qs, err := adm.DescribeClientQuotas(ctx, false, f.filter())
	if err != nil {
		return fmt.Errorf("describe client quotas: %w", err)
	}
	rows := []quotaRow{}
	for _, q := range qs {
		r := quotaRow{Values: map[string]float64{}}
		for _, e := range q.Entity {
			name := e.Name
			def := "<default>"
			if name == nil {
				name = &def
			}
			switch e.Type {
			case "user":
				r.User = name
			case "client-id":
				r.ClientID = name
			}
		}
		for _, v := range q.Values {
			r.Values[v.Key] = v.Value
		}
		rows = append(rows, r)
	}
	return c.emit(std.Out, rows, func(w io.Writer) error {
		t := newTable("USER", "CLIENT-ID", "QUOTAS")
		for _, r := range rows {
			keys := make([]string, 0, len(r.Values))
			for k := range r.Values {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			var vals []string
			for _, k := range keys {
				vals = append(vals, k+"="+strconv.FormatFloat(r.Values[k], 'f', -1, 64))
			}
			t.row(entityCell(r.User != nil, r.User), entityCell(r.ClientID != nil, r.ClientID), strings.Join(vals, " "))
		}
		return t.write(w)
	})
}

func quotaSet(ctx context.Context, c *common, f *quotaFlags, pos []string, std IO) error {
	if f.empty() {
		return usagef("set needs an entity: --user, --default-user, --client-id or --default-client-id")
	}
	if len(pos) == 0 {
		return usagef("set needs KEY=VALUE arguments, e.g. producer_byte_rate=1048576")
	}
	var ops []kadm.AlterClientQuotaOp
	for _, a := range pos {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return usagef("%q: want KEY=VALUE", a)
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return usagef("%q: %s is not a number", a, v)
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: x})
	}
	return quotaAlter(ctx, c, f, ops, "set", std)
}

func quotaDelete(ctx context.Context, c *common, f *quotaFlags, pos []string, std IO) error {
	if f.empty() {
		return usagef("delete needs an entity: --user, --default-user, --client-id or --default-client-id")
	}
	keys := pos
	if len(keys) == 0 {
		// Every key the entity has now.
		adm, err := c.admin(ctx)
		if err != nil {
			return err
		}
		qs, err := adm.DescribeClientQuotas(ctx, true, f.filter())
		adm.Close()
		if err != nil {
			return fmt.Errorf("describe client quotas: %w", err)
		}
		for _, q := range qs {
			for _, v := range q.Values {
				keys = append(keys, v.Key)
			}
		}
		if len(keys) == 0 {
			return fmt.Errorf("no quotas for %s", entityString(f.entity()))
		}
	}
	var ops []kadm.AlterClientQuotaOp
	for _, k := range keys {
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
	}
	return quotaAlter(ctx, c, f, ops, "deleted", std)
}

func entityString(e kadm.ClientQuotaEntity) string {
	var parts []string
	for _, p := range e {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ",")
}

func quotaAlter(ctx context.Context, c *common, f *quotaFlags, ops []kadm.AlterClientQuotaOp, verb string, std IO) error {
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	ent := f.entity()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: ent, Ops: ops}})
	if err != nil {
		return fmt.Errorf("alter client quotas: %w", err)
	}
	for _, r := range res {
		if r.Err != nil {
			msg := r.Err.Error()
			if r.ErrMessage != "" {
				msg += ": " + r.ErrMessage
			}
			return errors.New(msg)
		}
	}
	var keys []string
	for _, o := range ops {
		if o.Remove {
			keys = append(keys, o.Key)
		} else {
			keys = append(keys, o.Key+"="+strconv.FormatFloat(o.Value, 'f', -1, 64))
		}
	}
	type out struct {
		Entity string   `json:"entity"`
		Action string   `json:"action"`
		Keys   []string `json:"keys"`
	}
	o := out{Entity: entityString(ent), Action: verb, Keys: keys}
	return c.emit(std.Out, o, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s %s for %s\n", verb, strings.Join(keys, " "), o.Entity)
		return err
	})
}
