package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

const produceUsage = `
usage: tollgate produce TOPIC [flags] < records

One record per line of stdin (the line without its newline is the value).

  echo hello | tollgate produce orders
  tollgate produce orders -k : < lines               # "key:value" lines
  tollgate produce orders -H source=import -H v=2 -p 3 --acks 1 --compression zstd
  tollgate produce orders --no-idempotent --acks 0
  tollgate produce orders -v < lines                 # print each record's partition and offset

Idempotent (acks=all) by default. A record the cluster refuses is printed
to stderr with its line number; the exit code is then 1.
Exit codes: 0 all produced, 1 some failed, 2 usage, 3 unreachable.`

// produceFlags are `tollgate produce`'s own flags.
type produceFlags struct {
	keySep       string
	headers      stringList
	partition    int
	acks         string
	compression  string
	noIdempotent bool
	maxLine      int
	verbose      bool
}

// maxLineDefault bounds one stdin line: Kafka's default
// max.message.bytes (1048588) plus room for a key.
const maxLineDefault = 1 << 21

// Produce is `tollgate produce`.
func Produce(ctx context.Context, args []string, std IO) int {
	var c common
	var f produceFlags
	fs := newFlagSet("produce", produceUsage, std.Err)
	c.register(fs)
	fs.StringVar(&f.keySep, "k", "", "key separator: each line is KEY<sep>VALUE (default: no key)")
	fs.StringVar(&f.keySep, "key-separator", "", "key separator")
	fs.Var(&f.headers, "H", "header key=value on every record (repeatable)")
	fs.Var(&f.headers, "header", "header key=value (repeatable)")
	fs.IntVar(&f.partition, "p", -1, "partition (default: by key, or sticky when there is none)")
	fs.IntVar(&f.partition, "partition", -1, "partition")
	fs.StringVar(&f.acks, "acks", "all", "all | 1 | 0 (acks other than all need --no-idempotent)")
	fs.StringVar(&f.compression, "compression", "none", "none | gzip | snappy | lz4 | zstd")
	fs.BoolVar(&f.noIdempotent, "no-idempotent", false, "disable the idempotent producer")
	fs.IntVar(&f.maxLine, "max-line-bytes", maxLineDefault, "longest accepted stdin line")
	fs.BoolVar(&f.verbose, "v", false, "print each produced record's line, partition and offset (in line order, once all are acknowledged)")
	pos, err := parseArgs(fs, args)
	if err == nil {
		err = c.check(std)
	}
	if err == nil {
		err = runProduce(ctx, &c, &f, pos, std)
	}
	return finish(std.Err, "produce", err)
}

func (f *produceFlags) opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	switch f.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	default:
		return nil, usagef("--acks %q: want all, 1 or 0", f.acks)
	}
	if f.acks != "all" && f.acks != "-1" && !f.noIdempotent {
		return nil, usagef("--acks %s needs --no-idempotent (an idempotent producer requires acks=all)", f.acks)
	}
	if f.noIdempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	codec, ok := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}[f.compression]
	if !ok {
		return nil, usagef("--compression %q: want none, gzip, snappy, lz4 or zstd", f.compression)
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	if f.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	return opts, nil
}

func (f *produceFlags) recordHeaders() ([]kgo.RecordHeader, error) {
	var hs []kgo.RecordHeader
	for _, h := range f.headers {
		k, v, err := keyValue(h)
		if err != nil {
			return nil, err
		}
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return hs, nil
}

func runProduce(ctx context.Context, c *common, f *produceFlags, pos []string, std IO) error {
	if len(pos) != 1 {
		return usagef("produce needs one topic")
	}
	opts, err := f.opts()
	if err != nil {
		return err
	}
	headers, err := f.recordHeaders()
	if err != nil {
		return err
	}
	topic := pos[0]
	if f.acks != "0" { // acks=0 produces get no response to read
		c.reasons = newProduceReasons()
	}
	cl, err := c.connect(ctx, append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := checkTopics(ctx, cl, []string{topic}, true); err != nil {
		return err
	}
	p := &producer{cl: cl, errOut: std.Err, topic: topic, reasons: c.reasons, verbose: f.verbose}
	sc := bufio.NewScanner(stdinOr(std.In))
	sc.Buffer(make([]byte, 64<<10), f.maxLine)
	line := 0
	for sc.Scan() {
		line++
		r := &kgo.Record{Topic: topic, Value: append([]byte(nil), sc.Bytes()...), Headers: headers}
		if f.keySep != "" {
			if k, v, ok := strings.Cut(sc.Text(), f.keySep); ok {
				r.Key, r.Value = []byte(k), []byte(v)
			}
		}
		if f.partition >= 0 {
			r.Partition = int32(f.partition)
		}
		p.produce(ctx, r, line)
	}
	scanErr := sc.Err()
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	p.wg.Wait()
	if scanErr != nil {
		return fmt.Errorf("read stdin after line %d: %w", line, scanErr)
	}
	return p.result(c, std.Out)
}

// producer counts outcomes; promises run on kgo's goroutines.
type producer struct {
	cl      *kgo.Client
	errOut  io.Writer
	topic   string
	reasons *produceReasons
	verbose bool

	wg           sync.WaitGroup
	mu           sync.Mutex
	ok, failed   int
	firstFailure error
	produced     []producedRecord // -v
}

// producedRecord is one acknowledged record, for -v.
type producedRecord struct {
	Line      int   `json:"line"`
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

func (p *producer) produce(ctx context.Context, r *kgo.Record, line int) {
	p.wg.Add(1)
	p.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
		defer p.wg.Done()
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			err = p.reasons.explain(r.Partition, err)
			p.failed++
			if p.firstFailure == nil {
				p.firstFailure = err
			}
			fmt.Fprintf(p.errOut, "line %d: %v\n", line, err)
			return
		}
		p.ok++
		if p.verbose {
			p.produced = append(p.produced, producedRecord{line, r.Partition, r.Offset})
		}
	})
}

func (p *producer) result(c *common, out io.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	sum := map[string]any{"topic": p.topic, "produced": p.ok, "failed": p.failed}
	slices.SortFunc(p.produced, func(a, b producedRecord) int { return a.Line - b.Line })
	if p.verbose {
		sum["records"] = append([]producedRecord{}, p.produced...)
	}
	// Text prints nothing on success (like kcat -P) but with -v; failures
	// went to stderr as they happened.
	if err := c.emit(out, sum, func(w io.Writer) error {
		for _, r := range p.produced {
			fmt.Fprintf(w, "line %d: %s[%d] offset %d\n", r.Line, p.topic, r.Partition, r.Offset)
		}
		return nil
	}); err != nil {
		return err
	}
	if p.failed > 0 {
		return fmt.Errorf("%d of %d records failed; first: %w", p.failed, p.ok+p.failed, p.firstFailure)
	}
	return nil
}
