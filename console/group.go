package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

const groupUsage = `
usage: tollgate group list|describe|seek|delete [flags] ...

  tollgate group list
  tollgate group describe billing                    # state, members, lag per partition
  tollgate group seek billing --to start             # dry run: what would be committed
  tollgate group seek billing --to -100 --execute    # 100 back from the committed offsets
  tollgate group seek billing --to @1764579600000 --topic orders --execute
  tollgate group delete billing

seek --to: start, end, N, +N / -N (shift the committed offset), @timestamp.
seek refuses a group that has active members (stop the consumers first).
Exit codes: 0 done, 1 the cluster refused (unknown group, active members, denied, ...), 2 usage, 3 unreachable.`

// groupFlags are the group subcommands' own flags.
type groupFlags struct {
	to      string
	topics  string
	execute bool
}

// Group is `tollgate group`.
func Group(ctx context.Context, args []string, std IO) int {
	return runSubcommand(ctx, "group", groupUsage, args, std, []subcommand[groupFlags]{
		{"list", groupList}, {"describe", groupDescribe}, {"seek", groupSeek}, {"delete", groupDelete},
	}, func(fs *flag.FlagSet, sub string) (*groupFlags, func() error) {
		var f groupFlags
		if sub == "seek" {
			registerSeek(fs, &f)
		}
		return &f, nil
	})
}

func registerSeek(fs *flag.FlagSet, f *groupFlags) {
	fs.StringVar(&f.to, "to", "", "start, end, N, +N, -N or @timestamp")
	fs.StringVar(&f.topics, "topic", "", "seek these topics (comma-separated; default: the topics the group has committed)")
	fs.BoolVar(&f.execute, "execute", false, "commit the new offsets (default: dry run)")
}

func groupList(ctx context.Context, c *common, _ *groupFlags, pos []string, std IO) error {
	if len(pos) != 0 {
		return usagef("list takes no arguments")
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	type row struct {
		Group string `json:"group"`
		Type  string `json:"type"`
		State string `json:"state"`
	}
	rows := []row{}
	for _, g := range gs.Sorted() {
		rows = append(rows, row{g.Group, groupType(g.GroupType), g.State})
	}
	return c.emit(std.Out, rows, func(w io.Writer) error {
		t := newTable("GROUP", "TYPE", "STATE")
		for _, r := range rows {
			t.row(r.Group, r.Type, r.State)
		}
		return t.write(w)
	})
}

// groupType names the group type as Kafka's tools do; brokers before
// KIP-848 do not report it, and their groups are classic.
func groupType(t string) string {
	if t == "" {
		return "classic"
	}
	return strings.ToLower(t)
}

// GroupDescription is `group describe`'s output for one group.
type GroupDescription struct {
	Group        string           `json:"group"`
	State        string           `json:"state"`
	ProtocolType string           `json:"protocol_type"`
	Protocol     string           `json:"protocol"`
	Coordinator  string           `json:"coordinator"`
	Members      []GroupMember    `json:"members"`
	TotalLag     int64            `json:"total_lag"`
	Partitions   []GroupPartition `json:"partitions"`
}

// GroupMember is one member of a described group.
type GroupMember struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id"`
	Host       string `json:"host"`
}

// GroupPartition is one row of `group describe`; CurrentOffset is nil
// when the group has committed nothing there, Lag -1 when it cannot be
// computed.
type GroupPartition struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	CurrentOffset  *int64 `json:"current_offset"`
	LogStartOffset int64  `json:"log_start_offset"`
	LogEndOffset   int64  `json:"log_end_offset"`
	Lag            int64  `json:"lag"`
	MemberID       string `json:"member_id"`
	ClientID       string `json:"client_id"`
	Host           string `json:"host"`
}

// DescribeGroup computes a group's state and per-partition lag with
// kadm (which handles truncated logs and uncommitted partitions).
func DescribeGroup(ctx context.Context, adm *kadm.Client, group string) (GroupDescription, error) {
	ds, errs, err := DescribeGroups(ctx, adm, group)
	if err != nil {
		return GroupDescription{}, err
	}
	if err := errs[group]; err != nil {
		return GroupDescription{}, err
	}
	return ds[group], nil
}

// DescribeGroups is DescribeGroup for many groups in one kadm.Lag call;
// a group that cannot be described has its error in errs.
func DescribeGroups(ctx context.Context, adm *kadm.Client, groups ...string) (map[string]GroupDescription, map[string]error, error) {
	lags, err := adm.Lag(ctx, groups...)
	if err != nil {
		return nil, nil, fmt.Errorf("describe groups: %w", err)
	}
	ds, errs := map[string]GroupDescription{}, map[string]error{}
	for _, g := range groups {
		l, ok := lags[g]
		if !ok {
			errs[g] = fmt.Errorf("group %q: not described", g)
			continue
		}
		d, derr := describeFromLag(g, l)
		if derr != nil {
			errs[g] = derr
			continue
		}
		ds[g] = d
	}
	return ds, errs, nil
}

func describeFromLag(group string, l kadm.DescribedGroupLag) (GroupDescription, error) {
	if err := l.Error(); err != nil {
		return GroupDescription{}, fmt.Errorf("group %q: %w", group, err)
	}
	if l.State == "Dead" && len(l.Lag) == 0 {
		return GroupDescription{}, fmt.Errorf("group %q: %w", group, kerr.GroupIDNotFound)
	}
	d := GroupDescription{Group: group, State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol,
		Coordinator: coordinatorName(l.Coordinator), Members: []GroupMember{}, TotalLag: l.Lag.Total(), Partitions: []GroupPartition{}}
	for _, m := range l.Members {
		gm := GroupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		d.Members = append(d.Members, gm)
	}
	for _, ml := range l.Lag.Sorted() {
		gp := GroupPartition{Topic: ml.Topic, Partition: ml.Partition, LogStartOffset: ml.Start.Offset,
			LogEndOffset: ml.End.Offset, Lag: ml.Lag}
		if ml.Commit.At >= 0 {
			at := ml.Commit.At
			gp.CurrentOffset = &at
		}
		if ml.Member != nil {
			gp.MemberID, gp.ClientID, gp.Host = ml.Member.MemberID, ml.Member.ClientID, ml.Member.ClientHost
		}
		d.Partitions = append(d.Partitions, gp)
	}
	return d, nil
}

func coordinatorName(b kadm.BrokerDetail) string {
	return fmt.Sprintf("%d (%s)", b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
}

func groupDescribe(ctx context.Context, c *common, _ *groupFlags, pos []string, std IO) error {
	if len(pos) == 0 {
		return usagef("describe needs a group name")
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	var out []GroupDescription
	for _, g := range pos {
		d, err := DescribeGroup(ctx, adm, g)
		if err != nil {
			return err
		}
		out = append(out, d)
	}
	return emitEach(c, std.Out, out, writeGroup)
}

func writeGroup(w io.Writer, d GroupDescription) error {
	fmt.Fprintf(w, "Group: %s  State: %s  Members: %d  Coordinator: %s  Total lag: %d\n",
		d.Group, d.State, len(d.Members), d.Coordinator, d.TotalLag)
	t := newTable("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID", "CLIENT-ID", "HOST")
	for _, p := range d.Partitions {
		cur, lag := "-", "-"
		if p.CurrentOffset != nil {
			cur = strconv.FormatInt(*p.CurrentOffset, 10)
		}
		if p.Lag >= 0 {
			lag = strconv.FormatInt(p.Lag, 10)
		}
		t.row(p.Topic, p.Partition, cur, p.LogStartOffset, p.LogEndOffset, lag, dash(p.MemberID), dash(p.ClientID), dash(p.Host))
	}
	return t.write(w)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func groupDelete(ctx context.Context, c *common, _ *groupFlags, pos []string, std IO) error {
	if len(pos) == 0 {
		return usagef("delete needs a group name")
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	resps, err := adm.DeleteGroups(ctx, pos...)
	if err != nil && len(resps) == 0 {
		return fmt.Errorf("delete groups: %w", err)
	}
	var deleted []string
	var errs []error
	for _, g := range pos {
		if r, ok := resps[g]; !ok || r.Err != nil {
			e := err
			if ok {
				e = withMessage(r.Err, r.ErrMessage)
			}
			errs = append(errs, fmt.Errorf("group %q: %w", g, e))
			continue
		}
		deleted = append(deleted, g)
	}
	if err := c.emit(std.Out, map[string]any{"deleted": nonNilStrings(deleted)}, func(w io.Writer) error {
		for _, g := range deleted {
			fmt.Fprintln(w, "deleted", g)
		}
		return nil
	}); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// SeekRow is one partition of `group seek`: CurrentOffset is nil where
// the group has no commit.
type SeekRow struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset *int64 `json:"current_offset"`
	NewOffset     int64  `json:"new_offset"`
}

func groupSeek(ctx context.Context, c *common, f *groupFlags, pos []string, std IO) error {
	if len(pos) != 1 {
		return usagef("seek needs one group name")
	}
	if f.to == "" {
		return usagef("seek needs --to start|end|N|+N|-N|@timestamp")
	}
	spec, err := parseOffset(f.to)
	if err != nil {
		return err
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	group := pos[0]
	rows, err := SeekGroup(ctx, adm, group, spec, splitList(f.topics), f.execute)
	if err != nil {
		return err
	}
	return c.emit(std.Out, map[string]any{"group": group, "executed": f.execute, "partitions": rows}, func(w io.Writer) error {
		t := newTable("TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")
		for _, r := range rows {
			cur := "-"
			if r.CurrentOffset != nil {
				cur = strconv.FormatInt(*r.CurrentOffset, 10)
			}
			t.row(r.Topic, r.Partition, cur, r.NewOffset)
		}
		if err := t.write(w); err != nil {
			return err
		}
		if !f.execute {
			_, err := fmt.Fprintln(w, "dry run: nothing committed (add --execute)")
			return err
		}
		return nil
	})
}

// SeekGroup plans (and, with execute, commits) new offsets for group,
// which must have no active members.
func SeekGroup(ctx context.Context, adm *kadm.Client, group string, spec OffsetSpec, topics []string, execute bool) ([]SeekRow, error) {
	if err := refuseActive(ctx, adm, group); err != nil {
		return nil, err
	}
	rows, err := planSeek(ctx, adm, group, spec, topics)
	if err != nil || !execute {
		return rows, err
	}
	offs := kadm.Offsets{}
	for _, r := range rows {
		offs.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.NewOffset, LeaderEpoch: -1})
	}
	if err := adm.CommitAllOffsets(ctx, group, offs); err != nil {
		return nil, fmt.Errorf("commit offsets of group %s: %w", group, err)
	}
	return rows, nil
}

// ParseOffset parses the offset syntax of `consume -o` and `group seek
// --to` (start, end, N, +N, -N, @timestamp), for SeekGroup and Position.
func ParseOffset(s string) (OffsetSpec, error) { return parseOffset(s) }

// refuseActive fails for a group with members: their commits would
// overwrite the seek, as Kafka's reset-offsets also refuses.
func refuseActive(ctx context.Context, adm *kadm.Client, group string) error {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("describe group %s: %w", group, err)
	}
	d := ds[group]
	if d.Err != nil {
		return fmt.Errorf("group %q: %w", group, d.Err)
	}
	if len(d.Members) > 0 || (d.State != "Empty" && d.State != "Dead") {
		return fmt.Errorf("group %q has %d active members (state %s): stop its consumers first", group, len(d.Members), d.State)
	}
	return nil
}

// planSeek computes the new offset of every partition: of topics if
// given, else of the topics the group has committed.
func planSeek(ctx context.Context, adm *kadm.Client, group string, spec OffsetSpec, topics []string) ([]SeekRow, error) {
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	if len(topics) == 0 {
		for t := range committed {
			topics = append(topics, t)
		}
		slices.Sort(topics)
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("group %q has no committed offsets: name the topics with --topic", group)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	var atTime kadm.ListedOffsets
	if spec.kind == offTime {
		if atTime, err = adm.ListOffsetsAfterMilli(ctx, spec.milli, topics...); err != nil {
			return nil, fmt.Errorf("list offsets after %d: %w", spec.milli, err)
		}
	}
	rows := []SeekRow{}
	for _, t := range topics {
		for _, p := range sortedPartitions(ends[t]) {
			e, s := ends[t][p], starts[t][p]
			row := SeekRow{Topic: t, Partition: p}
			base := s.Offset
			if c, ok := committed.Lookup(t, p); ok && c.Err == nil && c.At >= 0 {
				at := c.At
				row.CurrentOffset, base = &at, at
			}
			ts := int64(-1)
			if o, ok := atTime.Lookup(t, p); ok && o.Err == nil {
				ts = o.Offset
			}
			row.NewOffset = spec.resolve(base, s.Offset, e.Offset, ts)
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
