package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The broker benchmark: tollgate's built-in broker against franz-go's
// kfake, side by side in one run, with the workload: 1 KiB
// records, 4 partitions, acks=all, linger 5 ms, the client in this process
// and each broker in a child process of its own (tollgate: the binary;
// kfake: this executable re-executed, see broker_child.go), so broker CPU
// seconds and RSS come from /proc/<pid>. Targets:
//
//   - durable produce (tollgate fsync=always) >= 0.6 x the disk's own
//     bandwidth for 1 MiB appends each followed by fdatasync (measured
//     here first), and >= kfake with DataDir and SyncWrites;
//   - produce with fsync=never and fetch >= kfake in memory;
//   - broker CPU <= 1.0 s per GB produced and <= 0.5 s per GB fetched;
//   - p50/p99 produce->ack latency at 10k records/s, both fsync modes;
//   - resident memory after producing MemoryBytes: no growth with the
//     data retained.

// BrokerConfig sizes the broker benchmark. Zero fields take the defaults
// noted; the defaults are the full run, a smoke test shrinks them.
type BrokerConfig struct {
	Tollgate        string        // the tollgate binary to measure; required
	Dir             string        // data directories and the disk probe; default os.TempDir()
	ProduceBytes    int64         // per produce run; default 1 GiB
	RecordSize      int           // default 1024
	Partitions      int           // default 4
	Linger          time.Duration // default 5 ms
	LatencyRate     int           // records/s of the latency runs; default 10000
	LatencyDuration time.Duration // default 5 s
	// MemoryBytes is how much tollgate (fsync=never) is given in total
	// while its RSS is sampled after every MemoryStep; default 4 GiB,
	// negative skips.
	MemoryBytes int64
	MemoryStep  int64 // default 1 GiB
	ProbeBytes  int64 // disk probe total; default 256 MiB
	Log         io.Writer
}

func (c *BrokerConfig) setDefaults() error {
	if c.Tollgate == "" {
		return errors.New("broker bench: the tollgate binary is not set (BrokerConfig.Tollgate)")
	}
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	def64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def64(&c.ProduceBytes, 1<<30)
	def64(&c.MemoryBytes, 4<<30)
	def64(&c.MemoryStep, 1<<30)
	def64(&c.ProbeBytes, 256<<20)
	if c.RecordSize <= 0 {
		c.RecordSize = 1024
	}
	if c.Partitions <= 0 {
		c.Partitions = 4
	}
	if c.Linger <= 0 {
		c.Linger = 5 * time.Millisecond
	}
	if c.LatencyRate <= 0 {
		c.LatencyRate = 10000
	}
	if c.LatencyDuration <= 0 {
		c.LatencyDuration = 5 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

// BrokerResult is one broker setup's figures. MB is 10^6 bytes, GB 10^9.
type BrokerResult struct {
	Name            string
	ProduceMBps     float64
	ProduceCPUPerGB float64 // broker CPU seconds per GB produced
	FetchMBps       float64 // 0: not measured
	FetchCPUPerGB   float64
	LatencyP50      time.Duration // 0: not measured
	LatencyP99      time.Duration
	RSSBytes        int64 // after the produce and fetch runs
}

// BrokerReport is the whole run.
type BrokerReport struct {
	DiskMBps float64 // 1 MiB appends, each followed by fdatasync
	Results  []BrokerResult
	// MemorySteps is tollgate's (fsync=never) RSS after each MemoryStep
	// produced, in order.
	MemorySteps []MemoryStep
}

// MemoryStep is one RSS sample of the memory run.
type MemoryStep struct {
	Produced int64
	RSSBytes int64
}

// brokerProc is a broker child process.
type brokerProc struct {
	cmd  *exec.Cmd
	addr string
	in   io.WriteCloser // kfake: closing it stops the child
	done chan struct{}
}

func (p *brokerProc) usage() (procUsage, error) { return readProc(p.cmd.Process.Pid) }

func (p *brokerProc) stop() {
	if p.in != nil {
		p.in.Close()
	} else {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// startProc starts cmd and waits for a line with addr= on the given pipe
// (tollgate: its "listening" log line on stderr; kfake: stdout).
func startProc(cmd *exec.Cmd, fromStderr bool, withStdin bool) (*brokerProc, error) {
	p := &brokerProc{cmd: cmd, done: make(chan struct{})}
	var r io.Reader
	var err error
	if fromStderr {
		r, err = cmd.StderrPipe()
	} else {
		r, err = cmd.StdoutPipe()
	}
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	if withStdin {
		if p.in, err = cmd.StdinPipe(); err != nil {
			return nil, fmt.Errorf("stdin pipe: %w", err)
		}
	}
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if a, ok := parseAddrLine(sc.Text()); ok {
				select {
				case addrCh <- a:
				default:
				}
			}
		}
		io.Copy(io.Discard, r)
		cmd.Wait()
		close(p.done)
	}()
	select {
	case p.addr = <-addrCh:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before listening", cmd.Path)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-p.done
		return nil, fmt.Errorf("%s did not listen within 30s", cmd.Path)
	}
}

func startTollgateBroker(bin, dataDir, fsync string) (*brokerProc, error) {
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--fsync", fsync, "--admin", "off", "--log-level", "info")
	return startProc(cmd, true, false)
}

func startKfakeBroker(cfg kfakeChildConfig) (*brokerProc, error) {
	cmd, err := kfakeCommand(cfg)
	if err != nil {
		return nil, err
	}
	return startProc(cmd, false, true)
}

// probeDisk measures the disk's bandwidth for 1 MiB appends each followed
// by fdatasync: what a durable log at best achieves.
func probeDisk(dir string, total int64) (float64, error) {
	f, err := os.CreateTemp(dir, "disk-probe-")
	if err != nil {
		return 0, fmt.Errorf("disk probe: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1<<20)
	if _, err := rand.Read(buf); err != nil {
		return 0, fmt.Errorf("disk probe: %w", err)
	}
	start := time.Now()
	var n int64
	for n < total {
		if _, err := f.Write(buf); err != nil {
			return 0, fmt.Errorf("disk probe write: %w", err)
		}
		if err := datasync(f); err != nil {
			return 0, fmt.Errorf("disk probe fdatasync: %w", err)
		}
		n += int64(len(buf))
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

// benchClient is a kgo client with the benchmark's settings (each broker
// negotiates its own versions).
func (c *BrokerConfig) benchClient(addr string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(c.Linger),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.MaxBufferedRecords(64 << 10),
		kgo.RetryTimeout(time.Minute),
	}, opts...)...)
}

func (c *BrokerConfig) createTopic(ctx context.Context, addr, topic string) error {
	cl, err := c.benchClient(addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(c.Partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// produce sends n bytes of records to topic as fast as acks come back.
func (c *BrokerConfig) produce(ctx context.Context, addr, topic string, n int64) (time.Duration, error) {
	cl, err := c.benchClient(addr)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	value := make([]byte, c.RecordSize)
	if _, err := rand.Read(value); err != nil {
		return 0, err
	}
	var firstErr atomic.Pointer[error]
	start := time.Now()
	for sent := int64(0); sent < n; sent += int64(len(value)) {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, fmt.Errorf("flush: %w", err)
	}
	if e := firstErr.Load(); e != nil {
		return 0, fmt.Errorf("produce: %w", *e)
	}
	return time.Since(start), nil
}

// fetch reads n bytes of record values from the start of topic.
func (c *BrokerConfig) fetch(ctx context.Context, addr, topic string, n int64) (time.Duration, error) {
	offs := map[int32]kgo.Offset{}
	for p := range c.Partitions {
		offs[int32(p)] = kgo.NewOffset().At(0)
	}
	cl, err := c.benchClient(addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	start := time.Now()
	var got int64
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err) })
		if ferr != nil {
			return 0, ferr
		}
		fs.EachRecord(func(r *kgo.Record) { got += int64(len(r.Value)) })
	}
	return time.Since(start), nil
}

// latency produces at LatencyRate for LatencyDuration and returns the
// p50 and p99 produce->ack times.
func (c *BrokerConfig) latency(ctx context.Context, addr, topic string) (time.Duration, time.Duration, error) {
	cl, err := c.benchClient(addr)
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	value := make([]byte, c.RecordSize)
	var mu sync.Mutex
	var lats []time.Duration
	var firstErr error
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	start := time.Now()
	sentN := 0
	for time.Since(start) < c.LatencyDuration {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-t.C:
		}
		// Send what the rate owes by now, so dropped ticks do not lower it.
		for due := int(float64(c.LatencyRate) * time.Since(start).Seconds()); sentN < due; sentN++ {
			sent := time.Now()
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				lats = append(lats, time.Since(sent))
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, 0, fmt.Errorf("flush: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return 0, 0, fmt.Errorf("latency produce: %w", firstErr)
	}
	if len(lats) == 0 {
		return 0, 0, errors.New("latency run produced nothing")
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	q := func(f float64) time.Duration { return lats[min(len(lats)-1, int(f*float64(len(lats))))] }
	return q(0.50), q(0.99), nil
}

// setup is one broker configuration of the run.
type setup struct {
	name    string
	start   func(dir string) (*brokerProc, error)
	fetch   bool
	latency bool
}

// RunBroker runs the broker benchmark and writes its table to out.
func RunBroker(ctx context.Context, cfg BrokerConfig, out io.Writer) (*BrokerReport, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(cfg.Dir, "tollgate-broker-bench-")
	if err != nil {
		return nil, fmt.Errorf("broker bench: %w", err)
	}
	defer os.RemoveAll(work)
	rep := &BrokerReport{}
	fmt.Fprintf(cfg.Log, "probing the disk: %d MiB of 1 MiB appends + fdatasync\n", cfg.ProbeBytes>>20)
	if rep.DiskMBps, err = probeDisk(work, cfg.ProbeBytes); err != nil {
		return nil, err
	}
	setups := []setup{
		{name: "tollgate fsync=always", fetch: false, latency: true, start: func(d string) (*brokerProc, error) { return startTollgateBroker(cfg.Tollgate, d, "always") }},
		{name: "tollgate fsync=never", fetch: true, latency: true, start: func(d string) (*brokerProc, error) { return startTollgateBroker(cfg.Tollgate, d, "never") }},
		{name: "kfake in memory", fetch: true, latency: true, start: func(string) (*brokerProc, error) { return startKfakeBroker(kfakeChildConfig{}) }},
		{name: "kfake DataDir+SyncWrites", fetch: false, latency: false, start: func(d string) (*brokerProc, error) {
			return startKfakeBroker(kfakeChildConfig{DataDir: d, SyncWrites: true})
		}},
	}
	for i, s := range setups {
		fmt.Fprintf(cfg.Log, "%s: produce %d MiB\n", s.name, cfg.ProduceBytes>>20)
		r, err := cfg.runSetup(ctx, s, filepath.Join(work, strconv.Itoa(i)), rep)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		rep.Results = append(rep.Results, r)
	}
	if out != nil {
		if err := rep.WriteTable(out, cfg); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func (c *BrokerConfig) runSetup(ctx context.Context, s setup, dir string, rep *BrokerReport) (BrokerResult, error) {
	r := BrokerResult{Name: s.name}
	p, err := s.start(dir)
	if err != nil {
		return r, err
	}
	defer p.stop()
	if err := c.createTopic(ctx, p.addr, "bench"); err != nil {
		return r, err
	}
	u0, err := p.usage()
	if err != nil {
		return r, err
	}
	d, err := c.produce(ctx, p.addr, "bench", c.ProduceBytes)
	if err != nil {
		return r, err
	}
	u1, err := p.usage()
	if err != nil {
		return r, err
	}
	gb := float64(c.ProduceBytes) / 1e9
	r.ProduceMBps = float64(c.ProduceBytes) / 1e6 / d.Seconds()
	r.ProduceCPUPerGB = (u1.cpuSeconds - u0.cpuSeconds) / gb
	if s.fetch {
		fmt.Fprintf(c.Log, "%s: fetch %d MiB\n", s.name, c.ProduceBytes>>20)
		d, err := c.fetch(ctx, p.addr, "bench", c.ProduceBytes)
		if err != nil {
			return r, err
		}
		u2, err := p.usage()
		if err != nil {
			return r, err
		}
		r.FetchMBps = float64(c.ProduceBytes) / 1e6 / d.Seconds()
		r.FetchCPUPerGB = (u2.cpuSeconds - u1.cpuSeconds) / gb
	}
	if s.latency {
		fmt.Fprintf(c.Log, "%s: latency at %d records/s for %v\n", s.name, c.LatencyRate, c.LatencyDuration)
		if err := c.createTopic(ctx, p.addr, "latency"); err != nil {
			return r, err
		}
		if r.LatencyP50, r.LatencyP99, err = c.latency(ctx, p.addr, "latency"); err != nil {
			return r, err
		}
	}
	if u, err := p.usage(); err == nil {
		r.RSSBytes = u.rssBytes
	}
	if s.name == "tollgate fsync=never" && c.MemoryBytes > 0 {
		produced := c.ProduceBytes
		for produced < c.MemoryBytes {
			step := min(c.MemoryStep, c.MemoryBytes-produced)
			fmt.Fprintf(c.Log, "%s: memory run, %d of %d MiB\n", s.name, (produced+step)>>20, c.MemoryBytes>>20)
			if _, err := c.produce(ctx, p.addr, "bench", step); err != nil {
				return r, err
			}
			produced += step
			u, err := p.usage()
			if err != nil {
				return r, err
			}
			rep.MemorySteps = append(rep.MemorySteps, MemoryStep{Produced: produced, RSSBytes: u.rssBytes})
		}
	}
	return r, nil
}

// WriteTable prints the report with the targets.
func (rep *BrokerReport) WriteTable(w io.Writer, cfg BrokerConfig) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "broker benchmark: %d B records, %d partitions, acks=all, linger %v, %d MiB per run\n",
		cfg.RecordSize, cfg.Partitions, cfg.Linger, cfg.ProduceBytes>>20)
	fmt.Fprintf(tw, "disk: 1 MiB appends + fdatasync\t%.1f MB/s\n\n", rep.DiskMBps)
	fmt.Fprintln(tw, "broker\tproduce MB/s\tCPU s/GB produced\tfetch MB/s\tCPU s/GB fetched\tp50 ack\tp99 ack\tRSS MiB")
	opt := func(v float64, f string) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf(f, v)
	}
	dur := func(d time.Duration) string {
		if d == 0 {
			return "-"
		}
		return d.Round(10 * time.Microsecond).String()
	}
	byName := map[string]BrokerResult{}
	for _, r := range rep.Results {
		byName[r.Name] = r
		fmt.Fprintf(tw, "%s\t%.1f\t%.2f\t%s\t%s\t%s\t%s\t%.0f\n", r.Name, r.ProduceMBps, r.ProduceCPUPerGB,
			opt(r.FetchMBps, "%.1f"), opt(r.FetchCPUPerGB, "%.2f"), dur(r.LatencyP50), dur(r.LatencyP99), float64(r.RSSBytes)/(1<<20))
	}
	for _, m := range rep.MemorySteps {
		fmt.Fprintf(tw, "tollgate fsync=never RSS after %d MiB produced\t%.0f MiB\n", m.Produced>>20, float64(m.RSSBytes)/(1<<20))
	}
	fmt.Fprintln(tw)
	al, nv := byName["tollgate fsync=always"], byName["tollgate fsync=never"]
	km, kd := byName["kfake in memory"], byName["kfake DataDir+SyncWrites"]
	check := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	if rep.DiskMBps > 0 {
		f := al.ProduceMBps / rep.DiskMBps
		fmt.Fprintf(tw, "durable produce / disk bandwidth\t%.2f\t(target >= 0.6)\t%s\n", f, check(f >= 0.6))
	}
	fmt.Fprintf(tw, "durable produce vs kfake DataDir+SyncWrites\t%.1f vs %.1f MB/s\t\t%s\n", al.ProduceMBps, kd.ProduceMBps, check(al.ProduceMBps >= kd.ProduceMBps))
	fmt.Fprintf(tw, "fsync=never produce vs kfake in memory\t%.1f vs %.1f MB/s\t\t%s\n", nv.ProduceMBps, km.ProduceMBps, check(nv.ProduceMBps >= km.ProduceMBps))
	fmt.Fprintf(tw, "fetch vs kfake in memory\t%.1f vs %.1f MB/s\t\t%s\n", nv.FetchMBps, km.FetchMBps, check(nv.FetchMBps >= km.FetchMBps))
	fmt.Fprintf(tw, "CPU per GB produced (fsync=never)\t%.2f s\t(target <= 1.0; kfake %.2f)\t%s\n", nv.ProduceCPUPerGB, km.ProduceCPUPerGB, check(nv.ProduceCPUPerGB <= 1.0))
	fmt.Fprintf(tw, "CPU per GB fetched\t%.2f s\t(target <= 0.5; kfake %.2f)\t%s\n", nv.FetchCPUPerGB, km.FetchCPUPerGB, check(nv.FetchCPUPerGB <= 0.5))
	if n := len(rep.MemorySteps); n > 1 {
		first, last := rep.MemorySteps[0].RSSBytes, rep.MemorySteps[n-1].RSSBytes
		grew := float64(last-first) / (1 << 20)
		fmt.Fprintf(tw, "RSS growth from %d to %d MiB produced\t%.0f MiB\t(target: no growth)\t%s\n",
			rep.MemorySteps[0].Produced>>20, rep.MemorySteps[n-1].Produced>>20, grew, check(grew < 64))
	}
	return tw.Flush()
}
