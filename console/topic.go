package console

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const topicUsage = `
usage: tollgate topic list|describe|create|delete|alter-config|add-partitions|trim [flags] ...

  tollgate topic list
  tollgate topic describe orders                      # partitions, offsets, non-default configs
  tollgate topic create orders -p 6 [-r 3] [-c retention.ms=86400000]...
  tollgate topic delete orders old-orders
  tollgate topic alter-config orders --set retention.ms=3600000 --delete cleanup.policy
  tollgate topic add-partitions orders 2              # two more partitions
  tollgate topic trim orders --to -1000 [-p 0,1]      # DeleteRecords: keep the last 1000 per partition
  tollgate topic trim orders --to 500                 # delete everything before offset 500

Exit codes: 0 done, 1 the cluster refused (unknown topic, denied, ...), 2 usage, 3 unreachable.`

// Topic is `tollgate topic`.
func Topic(ctx context.Context, args []string, std IO) int {
	return runSubcommand(ctx, "topic", topicUsage, args, std, []subcommand[topicFlags]{
		{"list", topicList}, {"describe", topicDescribe}, {"create", topicCreate}, {"delete", topicDelete},
		{"alter-config", topicAlterConfig}, {"add-partitions", topicAddPartitions}, {"trim", topicTrim},
	}, func(fs *flag.FlagSet, sub string) (*topicFlags, func() error) {
		return subFlags(sub, fs), nil
	})
}

// topicFlags are the flags of the topic subcommands that take any.
type topicFlags struct {
	partitions int
	replicas   int
	configs    stringList
	set, del   stringList
	to         string
	parts      string
}

// subFlags registers the subcommand's own flags.
func subFlags(sub string, fs *flag.FlagSet) *topicFlags {
	f := &topicFlags{}
	switch sub {
	case "create":
		fs.IntVar(&f.partitions, "p", -1, "partitions (default: the broker's num.partitions)")
		fs.IntVar(&f.partitions, "partitions", -1, "partitions")
		fs.IntVar(&f.replicas, "r", -1, "replication factor (default: the broker's)")
		fs.IntVar(&f.replicas, "replication-factor", -1, "replication factor")
		fs.Var(&f.configs, "c", "topic config key=value (repeatable)")
		fs.Var(&f.configs, "config", "topic config key=value (repeatable)")
	case "alter-config":
		fs.Var(&f.set, "set", "config key=value to set (repeatable)")
		fs.Var(&f.del, "delete", "config key to return to its default (repeatable)")
	case "trim":
		fs.StringVar(&f.to, "to", "", "delete records before this offset: N, end, or -N (keep the last N)")
		fs.StringVar(&f.parts, "p", "", "only these partitions (comma-separated; default all)")
	}
	return f
}

func topicList(ctx context.Context, c *common, _ *topicFlags, pos []string, std IO) error {
	if len(pos) != 0 {
		return usagef("list takes no arguments")
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	type row struct {
		Name       string `json:"name"`
		ID         string `json:"id"`
		Partitions int    `json:"partitions"`
		Replicas   int    `json:"replication_factor"`
	}
	rows := []row{}
	for _, td := range tds.Sorted() {
		rows = append(rows, row{td.Topic, topicID(td.ID), len(td.Partitions), replicationFactor(td)})
	}
	return c.emit(std.Out, rows, func(w io.Writer) error {
		t := newTable("NAME", "PARTITIONS", "REPLICAS")
		for _, r := range rows {
			t.row(r.Name, r.Partitions, r.Replicas)
		}
		return t.write(w)
	})
}

// topicID prints a topic id as every Kafka tool does: URL-safe base64
// without padding (Kafka's org.apache.kafka.common.Uuid.toString), not
// kadm's standard base64.
func topicID(id kadm.TopicID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func replicationFactor(td kadm.TopicDetail) int {
	rf := 0
	for _, p := range td.Partitions {
		rf = max(rf, len(p.Replicas))
	}
	return rf
}

// TopicDescription is `topic describe` output for one topic (also the
// web console's topic page).
type TopicDescription struct {
	Name       string           `json:"name"`
	ID         string           `json:"id"`
	Replicas   int              `json:"replication_factor"`
	Partitions []TopicPartition `json:"partitions"`
	Configs    []TopicConfig    `json:"configs"`
}

// TopicPartition is one partition of a TopicDescription.
type TopicPartition struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	Epoch          int32   `json:"leader_epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	LogStartOffset int64   `json:"log_start_offset"`
	HighWatermark  int64   `json:"high_watermark"`
	SizeBytes      *int64  `json:"size_bytes,omitempty"`
}

// TopicConfig is one config of a topic; Default is false when the topic
// sets it.
type TopicConfig struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Source  string `json:"source"`
	Default bool   `json:"default"`
}

func topicDescribe(ctx context.Context, c *common, _ *topicFlags, pos []string, std IO) error {
	if len(pos) == 0 {
		return usagef("describe needs a topic name")
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	out := make([]TopicDescription, 0, len(pos))
	for _, name := range pos {
		d, err := DescribeTopic(ctx, adm, name)
		if err != nil {
			return err
		}
		out = append(out, d)
	}
	return emitEach(c, std.Out, out, writeTopic)
}

// DescribeTopic is what `topic describe` shows: partitions with offsets
// and (where the cluster reports them) sizes, and every config with the
// non-defaults marked.
func DescribeTopic(ctx context.Context, adm *kadm.Client, name string) (TopicDescription, error) {
	tds, err := adm.ListTopics(ctx, name)
	if err != nil {
		return TopicDescription{}, fmt.Errorf("describe %s: %w", name, err)
	}
	td, ok := tds[name]
	if !ok || td.Err != nil {
		return TopicDescription{}, topicErr(name, td.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, name)
	if err != nil {
		return TopicDescription{}, fmt.Errorf("list start offsets of %s: %w", name, err)
	}
	ends, err := adm.ListEndOffsets(ctx, name)
	if err != nil {
		return TopicDescription{}, fmt.Errorf("list end offsets of %s: %w", name, err)
	}
	sizes := partitionSizes(ctx, adm, name, td.Partitions.Numbers())
	d := TopicDescription{Name: name, ID: topicID(td.ID), Replicas: replicationFactor(td), Partitions: []TopicPartition{}}
	for _, p := range td.Partitions.Sorted() {
		dp := TopicPartition{Partition: p.Partition, Leader: p.Leader, Epoch: p.LeaderEpoch,
			Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), LogStartOffset: -1, HighWatermark: -1}
		if o, ok := starts.Lookup(name, p.Partition); ok && o.Err == nil {
			dp.LogStartOffset = o.Offset
		}
		if o, ok := ends.Lookup(name, p.Partition); ok && o.Err == nil {
			dp.HighWatermark = o.Offset
		}
		if s, ok := sizes[p.Partition]; ok {
			dp.SizeBytes = &s
		}
		d.Partitions = append(d.Partitions, dp)
	}
	d.Configs, err = topicConfigs(ctx, adm, name)
	return d, err
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

// partitionSizes asks DescribeLogDirs for the partitions' sizes; a
// cluster that does not answer it (or denies it) just shows no sizes.
func partitionSizes(ctx context.Context, adm *kadm.Client, topic string, parts []int32) map[int32]int64 {
	set := kadm.TopicsSet{}
	set.Add(topic, parts...)
	dirs, err := adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		return nil
	}
	out := map[int32]int64{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			return
		}
		for p, dp := range d.Topics[topic] {
			if !dp.IsFuture {
				out[p] = max(out[p], dp.Size)
			}
		}
	})
	return out
}

func topicConfigs(ctx context.Context, adm *kadm.Client, name string) ([]TopicConfig, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("describe configs of %s: %w", name, err)
	}
	out := []TopicConfig{}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, fmt.Errorf("describe configs of %s: %w", name, rc.Err)
		}
		for _, cfg := range rc.Configs {
			src := cfg.Source.String()
			out = append(out, TopicConfig{Name: cfg.Key, Value: cfg.MaybeValue(), Source: src,
				Default: cfg.Source != kmsg.ConfigSourceDynamicTopicConfig})
		}
	}
	slices.SortFunc(out, func(a, b TopicConfig) int { return cmpString(a.Name, b.Name) })
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// writeTopic is the text form of `topic describe`.
func writeTopic(w io.Writer, d TopicDescription) error {
	fmt.Fprintf(w, "Topic: %s  ID: %s  Partitions: %d  ReplicationFactor: %d\n", d.Name, d.ID, len(d.Partitions), d.Replicas)
	var nd []string
	for _, cfg := range d.Configs {
		if !cfg.Default {
			nd = append(nd, cfg.Name+"="+cfg.Value)
		}
	}
	if len(nd) == 0 {
		fmt.Fprintln(w, "Configs (non-default): none")
	} else {
		fmt.Fprintln(w, "Configs (non-default):")
		for _, s := range nd {
			fmt.Fprintln(w, "  "+s)
		}
	}
	withSize := len(d.Partitions) > 0 && d.Partitions[0].SizeBytes != nil
	cols := []string{"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LOG-START-OFFSET", "HIGH-WATERMARK"}
	if withSize {
		cols = append(cols, "SIZE")
	}
	t := newTable(cols...)
	for _, p := range d.Partitions {
		cells := []any{p.Partition, p.Leader, p.Epoch, joinInts(p.Replicas), joinInts(p.ISR), p.LogStartOffset, p.HighWatermark}
		if withSize {
			size := int64(0)
			if p.SizeBytes != nil {
				size = *p.SizeBytes
			}
			cells = append(cells, size)
		}
		t.row(cells...)
	}
	return t.write(w)
}

func joinInts(s []int32) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += strconv.Itoa(int(v))
	}
	return out
}

// topicErr names a per-topic failure; kerr's message says which.
func topicErr(name string, err error) error {
	if err == nil {
		err = kerr.UnknownTopicOrPartition
	}
	return fmt.Errorf("topic %q: %w", name, err)
}

func topicCreate(ctx context.Context, c *common, f *topicFlags, pos []string, std IO) error {
	if len(pos) == 0 {
		return usagef("create needs a topic name")
	}
	cfgs := map[string]*string{}
	for _, kv := range f.configs {
		k, v, err := keyValue(kv)
		if err != nil {
			return err
		}
		cfgs[k] = &v
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	resps, err := adm.CreateTopics(ctx, int32(f.partitions), int16(f.replicas), cfgs, pos...)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	type row struct {
		Name       string `json:"name"`
		ID         string `json:"id"`
		Partitions int32  `json:"partitions"`
		Replicas   int16  `json:"replication_factor"`
	}
	var rows []row
	var errs []error
	for _, name := range pos {
		r := resps[name]
		if r.Err != nil {
			errs = append(errs, topicErr(name, withMessage(r.Err, r.ErrMessage)))
			continue
		}
		rows = append(rows, row{name, topicID(r.ID), r.NumPartitions, r.ReplicationFactor})
	}
	if err := c.emit(std.Out, rows, func(w io.Writer) error {
		for _, r := range rows {
			fmt.Fprintf(w, "created %s (%s, replication factor %d)\n", r.Name, plural(int(r.Partitions), "partition"), r.Replicas)
		}
		return nil
	}); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// withMessage adds a broker's error message when it says more.
func withMessage(err error, msg string) error {
	if msg == "" || msg == err.Error() {
		return err
	}
	return fmt.Errorf("%w (%s)", err, msg)
}

func topicDelete(ctx context.Context, c *common, _ *topicFlags, pos []string, std IO) error {
	if len(pos) == 0 {
		return usagef("delete needs a topic name")
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	resps, err := adm.DeleteTopics(ctx, pos...)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	var deleted []string
	var errs []error
	for _, name := range pos {
		if r := resps[name]; r.Err != nil {
			errs = append(errs, topicErr(name, withMessage(r.Err, r.ErrMessage)))
			continue
		}
		deleted = append(deleted, name)
	}
	if err := c.emit(std.Out, map[string]any{"deleted": nonNilStrings(deleted)}, func(w io.Writer) error {
		for _, n := range deleted {
			fmt.Fprintln(w, "deleted", n)
		}
		return nil
	}); err != nil {
		return err
	}
	return errors.Join(errs...)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func topicAlterConfig(ctx context.Context, c *common, f *topicFlags, pos []string, std IO) error {
	if len(pos) != 1 {
		return usagef("alter-config needs one topic name")
	}
	if len(f.set)+len(f.del) == 0 {
		return usagef("alter-config: nothing to change (--set key=value, --delete key)")
	}
	var alters []kadm.AlterConfig
	for _, kv := range f.set {
		k, v, err := keyValue(kv)
		if err != nil {
			return err
		}
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
	}
	for _, k := range f.del {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	resps, err := adm.AlterTopicConfigs(ctx, alters, pos[0])
	if err != nil {
		return fmt.Errorf("alter-config: %w", err)
	}
	for _, r := range resps {
		if r.Err != nil {
			return topicErr(r.Name, withMessage(r.Err, r.ErrMessage))
		}
	}
	return c.emit(std.Out, map[string]any{"altered": pos[0], "set": nonNilStrings(f.set), "deleted": nonNilStrings(f.del)}, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "altered %s: %d set, %d returned to default\n", pos[0], len(f.set), len(f.del))
		return err
	})
}

func topicAddPartitions(ctx context.Context, c *common, _ *topicFlags, pos []string, std IO) error {
	if len(pos) != 2 {
		return usagef("add-partitions needs a topic name and how many partitions to add")
	}
	n, err := strconv.Atoi(pos[1])
	if err != nil || n <= 0 {
		return usagef("add-partitions: %q is not a positive number of partitions", pos[1])
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	resps, err := adm.CreatePartitions(ctx, n, pos[0])
	if err != nil {
		return fmt.Errorf("add-partitions: %w", err)
	}
	if r := resps[pos[0]]; r.Err != nil {
		return topicErr(pos[0], withMessage(r.Err, r.ErrMessage))
	}
	return c.emit(std.Out, map[string]any{"topic": pos[0], "added": n}, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "added %s to %s\n", plural(n, "partition"), pos[0])
		return err
	})
}

// plural is "1 partition", "3 partitions".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
