package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const consumeUsage = `
usage: tollgate consume TOPIC... [flags]

  tollgate consume orders -e                        # everything there is now, then exit
  tollgate consume orders -o -10 -e                 # the last 10 records of each partition
  tollgate consume orders -o @2026-12-01T09:00:00Z -n 100 -f json
  tollgate consume orders -e --format yaml          # one YAML document per record (-f json's fields)
  tollgate consume orders -p 0,2 -o 1500            # from offset 1500 of partitions 0 and 2
  tollgate consume orders -g billing -n 50          # as group billing; commits what it printed
  tollgate consume orders -f '%p:%o %k=%v\n'        # %t topic %p partition %o offset %k key %v value
                                                    # %T timestamp (ms) %h headers %% percent

Offsets (-o): start, end, N, +N (N after the start), -N (N before the end),
@timestamp (ms since the epoch or RFC 3339). With -g, a committed offset
wins and -o applies where there is none. Without -n or -e it runs until
interrupted.
Exit codes: 0 done, 1 the cluster refused (unknown topic, denied, ...), 2 usage, 3 unreachable.`

// consumeFlags are `tollgate consume`'s own flags.
type consumeFlags struct {
	offset        string
	partitions    string
	count         int
	exitAtEnd     bool
	group         string
	readCommitted bool
	format        string
}

// Consume is `tollgate consume`.
func Consume(ctx context.Context, args []string, std IO) int {
	var c common
	var f consumeFlags
	fs := newFlagSet("consume", consumeUsage, std.Err)
	c.register(fs)
	fs.StringVar(&f.offset, "o", "start", "where to start: start, end, N, +N, -N, @timestamp")
	fs.StringVar(&f.offset, "offset", "start", "where to start")
	fs.StringVar(&f.partitions, "p", "", "only these partitions (comma-separated; not with -g)")
	fs.IntVar(&f.count, "n", 0, "exit after this many records (0: no limit)")
	fs.BoolVar(&f.exitAtEnd, "e", false, "exit at the end of the partitions (their end when the command started)")
	fs.StringVar(&f.group, "g", "", "consume as this consumer group, committing what was printed")
	fs.StringVar(&f.group, "group", "", "consumer group")
	fs.BoolVar(&f.readCommitted, "read-committed", false, "skip records of aborted and open transactions")
	fs.StringVar(&f.format, "f", "", "record format: json, yaml, or a format string (default: the value and a newline)")
	pos, err := parseArgs(fs, args)
	if err == nil {
		err = c.check(std)
	}
	if err == nil {
		err = runConsume(ctx, &c, &f, pos, std)
	}
	return finish(std.Err, "consume", err)
}

// consumer is one running `tollgate consume`.
type consumer struct {
	f       *consumeFlags
	out     *bufio.Writer
	printer func(*bufio.Writer, *kgo.Record)
	cl      *kgo.Client
	ends    map[string]map[int32]int64 // -e: partition ends; deleted once reached
	printed map[string]map[int32]*kgo.Record
	n       int
}

func runConsume(ctx context.Context, c *common, f *consumeFlags, topics []string, std IO) error {
	if len(topics) == 0 {
		return usagef("consume needs at least one topic")
	}
	spec, err := parseOffset(f.offset)
	if err != nil {
		return err
	}
	only, err := parsePartitions(f.partitions)
	if err != nil {
		return err
	}
	if only != nil && f.group != "" {
		return usagef("-p and -g do not go together: a group's partitions are assigned by the group")
	}
	printer, err := recordPrinter(f.format, c.format)
	if err != nil {
		return err
	}
	setup, cancel := c.withTimeout(ctx)
	defer cancel()
	base, err := c.connect(setup)
	if err != nil {
		return err
	}
	adm := kadm.NewClient(base)
	defer adm.Close()
	if err := checkTopics(setup, base, topics, false); err != nil {
		return err
	}
	pl, err := planPositions(setup, adm, topics, only, spec, f)
	if err != nil {
		return err
	}
	cs := &consumer{f: f, out: bufio.NewWriter(std.Out), printer: printer, printed: map[string]map[int32]*kgo.Record{}}
	if f.exitAtEnd {
		cs.ends = pl.pending()
		if len(cs.ends) == 0 {
			return nil
		}
	}
	opts, err := c.clientOpts()
	if err != nil {
		return err
	}
	cs.cl, err = kgo.NewClient(append(opts, consumeOpts(topics, spec, pl, f)...)...)
	if err != nil {
		return usagef("%v", err)
	}
	defer cs.cl.Close()
	err = cs.loop(ctx)
	cs.out.Flush()
	if cerr := cs.commit(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return err
}

// consumeOpts assigns exact start offsets without a group, or joins the
// group with spec as its reset offset.
func consumeOpts(topics []string, spec OffsetSpec, pl *plan, f *consumeFlags) []kgo.Opt {
	opts := []kgo.Opt{kgo.KeepControlRecords()} // control records tell -e where a partition ends
	if f.readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if f.group != "" {
		return append(opts, kgo.ConsumerGroup(f.group), kgo.ConsumeTopics(topics...),
			kgo.ConsumeResetOffset(spec.kgoOffset()), kgo.DisableAutoCommit())
	}
	assign := map[string]map[int32]kgo.Offset{}
	for t, ps := range pl.start {
		assign[t] = map[int32]kgo.Offset{}
		for p, at := range ps {
			assign[t][p] = kgo.NewOffset().At(at)
		}
	}
	return append(opts, kgo.ConsumePartitions(assign))
}

// loop polls until -n, -e or ctx says stop.
func (cs *consumer) loop(ctx context.Context) error {
	for {
		fetches := cs.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil // interrupted: not a failure
		}
		if err := fatalFetchError(fetches); err != nil {
			return err
		}
		stop := false
		fetches.EachRecord(func(r *kgo.Record) {
			if !stop {
				stop = cs.record(r)
			}
		})
		cs.out.Flush()
		if stop {
			return nil
		}
	}
}

// record prints r (unless it is a control record) and reports whether
// the consumer is done.
func (cs *consumer) record(r *kgo.Record) bool {
	if !r.Attrs.IsControl() {
		cs.printer(cs.out, r)
		cs.n++
	}
	ps := cs.printed[r.Topic]
	if ps == nil {
		ps = map[int32]*kgo.Record{}
		cs.printed[r.Topic] = ps
	}
	ps[r.Partition] = r
	if cs.f.count > 0 && cs.n >= cs.f.count {
		return true
	}
	if cs.ends != nil {
		if end, ok := cs.ends[r.Topic][r.Partition]; ok && r.Offset+1 >= end {
			delete(cs.ends[r.Topic], r.Partition)
			if len(cs.ends[r.Topic]) == 0 {
				delete(cs.ends, r.Topic)
			}
		}
		return len(cs.ends) == 0
	}
	return false
}

// commit commits, for a group, the offsets after the last record printed
// on each partition.
func (cs *consumer) commit() error {
	if cs.f.group == "" || len(cs.printed) == 0 {
		return nil
	}
	var rs []*kgo.Record
	for _, ps := range cs.printed {
		for _, r := range ps {
			rs = append(rs, r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if err := cs.cl.CommitRecords(ctx, rs...); err != nil {
		return fmt.Errorf("commit group %s: %w", cs.f.group, err)
	}
	return nil
}

// fatalFetchError returns the first fetch error that retrying will not
// cure (authorization, unknown topic after start, ...).
func fatalFetchError(fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, kgo.ErrClientClosed) {
			continue
		}
		if kerr.IsRetriable(fe.Err) {
			continue
		}
		if fe.Topic == "" {
			return fmt.Errorf("fetch: %w", fe.Err)
		}
		return fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
	}
	return nil
}

// checkTopics asks for the topics' metadata once and fails with one line
// for a topic the cluster does not know (create: let the broker create
// it, if it auto-creates topics, as a producer would).
func checkTopics(ctx context.Context, cl *kgo.Client, topics []string, create bool) error {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = create
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	for _, t := range resp.Topics {
		err := kerr.ErrorForCode(t.ErrorCode)
		if err == nil || (create && errors.Is(err, kerr.LeaderNotAvailable)) {
			continue
		}
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		return topicErr(name, err)
	}
	return nil
}
