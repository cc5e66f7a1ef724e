// Package bench measures what the gateway costs. In one invocation, against
// one kfake upstream, it runs each workload in turn over three paths —
// direct to kfake, through a protocol-blind splice relay, and through
// tollgate — alternating the paths round after round, and reports
// throughput, latency at a fixed rate, and the CPU seconds per MB and the RSS
// of the process in the middle.
//
// The yardstick is the relay, not direct: on a small machine the client,
// the upstream and whatever sits between them share the CPU, so any extra
// hop costs throughput, and a gateway can do no better than a hop that
// only splices bytes.
//
// That is Run, the gateway suite. RunSuite runs the overhead suites, which
// compare tollgate with itself under policy rules or audit levels (see
// suite.go), and RunBroker the built-in broker against kfake (see
// broker_bench.go).
//
// # Fairness
//
//   - One kfake cluster serves all paths. kfake runs every request of every
//     broker on one goroutine, so more brokers add connections and ports,
//     not upstream parallelism; the default is one broker so that each path
//     has the same topology (one seed connection, one broker connection per
//     client).
//   - The relay cannot rewrite metadata, and kfake advertises its own
//     address. Instead of making kfake lie about its address (which would
//     send the gateway through the relay too), the relay path's client dials
//     through a map "kfake address -> relay port": the in-process equivalent
//     of a hosts entry. Every path's client dials through a dialer that
//     enforces its route: direct may reach only kfake, relay only relay
//     ports, tollgate anything but kfake. A dial off the route fails, so
//     records that flow on a path flowed through its middle.
//   - The relay and the gateway run in child processes (the same binary,
//     ChildFlag), so their CPU time (utime+stime) and RSS are read from
//     /proc apart from the client's and kfake's.
//   - Each run gets a fresh topic (deleted afterwards, so kfake's memory
//     does not grow across runs), a fresh client, a warm-up that is not
//     measured, and the same measured window. Medians across rounds are
//     reported; ratios are medians of per-round ratios, because the runs of
//     one round are adjacent in time.
package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Path is how the client reaches kfake.
type Path string

const (
	Direct  Path = "direct"
	Relay   Path = "relay"
	Gateway Path = "tollgate"
)

// Paths is the order in which every round visits the paths.
var Paths = []Path{Direct, Relay, Gateway}

// Options configures a benchmark. Zero values take the defaults noted.
type Options struct {
	Duration   time.Duration // measured window of one run (5s)
	Warmup     time.Duration // unmeasured lead-in of each run (1s)
	Rounds     int           // alternations direct, relay, tollgate (3)
	Workloads  []string      // names from WorkloadNames (all)
	Brokers    int           // kfake brokers (1)
	Partitions int           // partitions of the throughput topics (3)
	Rate       int           // records/s of the latency workload (1000)
	// ConsumeBytes is the size of the topic the consume workload reads
	// from offset 0 over and over (32 MiB).
	ConsumeBytes int64

	// Command returns the command that runs this program's child side
	// (ServeChild) with args; the bench sets its stdio. Nil runs the relay
	// and the gateway inside this process, and then their CPU and RSS are
	// not measured.
	Command func(args []string) *exec.Cmd
	// CPUProfile, if set, is where the gateway child writes a CPU profile
	// covering its whole life (idle time between its runs adds no samples).
	CPUProfile string
	// Syscalls counts the middle process's system calls in each measured
	// window with `perf stat` (Linux, perf installed, tracepoints
	// readable); RunResult.Syscalls has the counts.
	Syscalls bool
	// TCPCongestion, if set, is the gateways' limits.tcp_congestion_control
	// in the suites that write a configuration file per variant (policy,
	// audit, tls, single-port, vc): their own client and upstream sockets;
	// the clients, kfake and haproxy keep the host's. The gateway suite
	// sets it on the relay's sockets too, so that the two are compared
	// under one algorithm.
	TCPCongestion string
	// WorkDir is where the overhead suites write each variant's
	// configuration file and audit sink, and leave them; "": a temporary
	// directory, removed afterwards.
	WorkDir string
	// Progress gets one line per run; nil: none. ChildStderr gets the
	// children's logs (warnings and errors), one write at a time; nil:
	// discarded.
	Progress    io.Writer
	ChildStderr io.Writer
}

func (o *Options) setDefaults() {
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	} else if o.Warmup == 0 {
		o.Warmup = time.Second
	}
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	if len(o.Workloads) == 0 {
		o.Workloads = WorkloadNames()
	}
	if o.Brokers <= 0 {
		o.Brokers = 1
	}
	if o.Partitions <= 0 {
		o.Partitions = 3
	}
	if o.Rate <= 0 {
		o.Rate = 1000
	}
	if o.ConsumeBytes <= 0 {
		o.ConsumeBytes = 32 << 20
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.ChildStderr == nil {
		o.ChildStderr = io.Discard
	}
	// Each child's stderr is copied by its own goroutine, and the bench
	// writes there too: serialize the writes.
	o.ChildStderr = &lockedWriter{w: o.ChildStderr}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// ErrUnknownWorkload is returned for a workload name not in WorkloadNames.
var ErrUnknownWorkload = errors.New("unknown workload")

// Run runs the benchmark and returns every run and their summary.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts.setDefaults()
	var ws []workload
	for _, name := range opts.Workloads {
		w, ok := findWorkload(name)
		if !ok {
			return nil, fmt.Errorf("%w %q (have %s)", ErrUnknownWorkload, name, strings.Join(WorkloadNames(), ", "))
		}
		ws = append(ws, w)
	}
	if opts.CPUProfile != "" && opts.Command == nil {
		return nil, errors.New("a CPU profile of the gateway needs the gateway in a child process (Options.Command)")
	}

	cluster, err := newUpstream(opts.Brokers)
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	defer cluster.Close()
	b := &bencher{opts: opts, upstreams: cluster.ListenAddrs(), cluster: cluster}
	if err := b.startPaths(); err != nil {
		b.stopPaths()
		return nil, err
	}
	defer b.stopPaths()
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.upstreams...))
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	defer admin.Close()
	b.admin = kadm.NewClient(admin)

	rep := &Report{
		Brokers: opts.Brokers, Partitions: opts.Partitions, Rounds: opts.Rounds,
		DurationSec: opts.Duration.Seconds(), WarmupSec: opts.Warmup.Seconds(), Rate: opts.Rate,
		ChildProcesses: opts.Command != nil, TCP: tcpSetting("the relay's and the gateway's", opts.TCPCongestion),
	}
	for _, w := range ws {
		rep.Workloads = append(rep.Workloads, WorkloadInfo{Name: w.name, Desc: w.describe(opts)})
		if w.kind == kindConsume && b.consumeEnd == nil {
			if err := b.preloadConsume(ctx); err != nil {
				return nil, err
			}
		}
	}
	for round := 1; round <= opts.Rounds; round++ {
		for _, w := range ws {
			for _, e := range b.paths {
				r, err := b.runOne(ctx, w, e, round)
				if err != nil {
					return nil, fmt.Errorf("round %d %s via %s: %w", round, w.name, e.path, err)
				}
				fmt.Fprintf(opts.Progress, "round %d/%d %-18s %-8s %s\n", round, opts.Rounds, w.name, e.path, r.brief())
				rep.Runs = append(rep.Runs, r)
			}
		}
	}
	for _, e := range b.paths {
		if e.child == nil {
			continue
		}
		if u, err := e.child.usage(); err == nil {
			rep.PeakRSS = append(rep.PeakRSS, PeakRSS{Path: e.path, HWMBytes: u.hwmBytes})
		}
	}
	rep.summarize()
	return rep, nil
}

// bencher holds what the runs share.
type bencher struct {
	opts      Options
	upstreams []string // kfake's listen (and advertised) addresses
	// cluster is kfake, when in this process: createTopic places the
	// partitions' leaders on its brokers in turn.
	cluster *kfake.Cluster
	paths   []*pathEnv
	admin   *kadm.Client

	consumeEnd map[int32]int64 // end offsets of the consume topic
	// consumePrefixes: the consume topic is written under each of these
	// upstream ("" the plain one; the vc suite adds its prefix).
	consumePrefixes []string
	topicSeq        atomic.Int64
}

// pathEnv is one path: where its clients start and how they may dial.
type pathEnv struct {
	path    Path
	variant string // overhead suites: the gateway configuration; "" otherwise
	seeds   []string
	route   func(addr string) (string, error) // where a dial of addr goes, or why it may not
	child   *child                            // the relay or gateway process; nil: nothing to measure
	stop    func()
	// tls, if set, is the client side of a TLS listener (TLS suite): every
	// dial completes a handshake with it or fails, and tlsConns counts
	// the handshakes.
	tls      *tls.Config
	tlsConns atomic.Int64
	// sni: the gateway advertises names (TLS suite, SNI variant); every
	// name is dialled at 127.0.0.1 with the name as the TLS server name.
	sni bool
	// topicPrefix: the path's clients are in a virtual cluster (vc
	// suite) whose topics are stored upstream under this prefix.
	topicPrefix string
}

var errOffRoute = errors.New("dial off the benchmark path")

func (b *bencher) startPaths() error {
	isUpstream := func(a string) bool { return slices.Contains(b.upstreams, a) }
	b.paths = append(b.paths, &pathEnv{
		path:  Direct,
		seeds: b.upstreams,
		route: func(a string) (string, error) {
			if !isUpstream(a) {
				return "", fmt.Errorf("%w: direct client dialing %s", errOffRoute, a)
			}
			return a, nil
		},
	})
	for _, p := range []Path{Relay, Gateway} {
		info, c, stop, err := b.startMiddle(p)
		if err != nil {
			return err
		}
		e := &pathEnv{path: p, child: c, stop: stop}
		if p == Relay {
			e.seeds = b.upstreams // routed to the relay by the dialer
			e.route = func(a string) (string, error) {
				if r, ok := info.Routes[a]; ok {
					return r, nil
				}
				return "", fmt.Errorf("%w: relay client dialing %s, which the relay does not serve", errOffRoute, a)
			}
		} else {
			e.seeds = []string{info.Bootstrap}
			e.route = func(a string) (string, error) {
				if isUpstream(a) {
					return "", fmt.Errorf("%w: tollgate client dialing the upstream %s directly", errOffRoute, a)
				}
				return a, nil
			}
		}
		b.paths = append(b.paths, e)
	}
	return nil
}

// startMiddle starts the relay or the gateway, as a child process when
// Options.Command is set.
func (b *bencher) startMiddle(p Path) (childInfo, *child, func(), error) {
	if b.opts.Command == nil {
		log := slog.New(slog.NewTextHandler(b.opts.ChildStderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		stop, info, err := startMiddle(p, b.upstreams, b.opts.TCPCongestion, log)
		return info, nil, stop, err
	}
	prof := ""
	if p == Gateway {
		prof = b.opts.CPUProfile
	}
	c, err := spawnChild(b.opts.Command, p, b.upstreams, b.opts.TCPCongestion, prof, b.opts.ChildStderr)
	if err != nil {
		return childInfo{}, nil, nil, err
	}
	stop := func() {
		if err := c.stop(); err != nil {
			fmt.Fprintf(b.opts.ChildStderr, "bench: %v\n", err)
		}
	}
	return c.info, c, stop, nil
}

func (b *bencher) stopPaths() {
	for _, e := range b.paths {
		if e.stop != nil {
			e.stop()
		}
	}
}

// meter counts what one run's clients move. It is a kgo hook: wire bytes
// are every request and response byte the client wrote or read, which is
// also what the middle process reads and writes on each of its sides.
type meter struct {
	records, payload, wire, errs, dials atomic.Int64
	requests                            atomic.Int64 // requests the clients wrote
}

var (
	_ kgo.HookBrokerWrite = (*meter)(nil)
	_ kgo.HookBrokerRead  = (*meter)(nil)
)

func (m *meter) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, n int, _, _ time.Duration, _ error) {
	m.wire.Add(int64(n))
	m.requests.Add(1)
}

func (m *meter) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, n int, _, _ time.Duration, _ error) {
	m.wire.Add(int64(n))
}

// newClient is a client of path e that reports to m.
func (e *pathEnv) newClient(m *meter, opts ...kgo.Opt) (*kgo.Client, error) {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, err := e.route(addr)
		if err != nil {
			return nil, err
		}
		m.dials.Add(1)
		if e.tls == nil {
			var d net.Dialer
			return d.DialContext(ctx, network, to)
		}
		if e.sni {
			return e.dialSNI(ctx, network, to)
		}
		// What kgo.DialTLSConfig does (kgo refuses it together with a
		// Dialer): a clone per dial, the server name from the address.
		return e.dialTLS(ctx, network, to)
	}
	base := []kgo.Opt{kgo.SeedBrokers(e.seeds...), kgo.Dialer(dial), kgo.WithHooks(m)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("%s client: %w", e.path, err)
	}
	return cl, nil
}

// snapshot is the counters and the middle process at one moment.
type snapshot struct {
	at                           time.Time
	records, payload, wire, errs int64
	requests                     int64
	proc                         procUsage
	procErr                      error
	self                         procUsage // this process's
	selfErr                      error
}

func (b *bencher) snap(m *meter, e *pathEnv) snapshot {
	s := snapshot{at: time.Now(), records: m.records.Load(), payload: m.payload.Load(), wire: m.wire.Load(), errs: m.errs.Load(), requests: m.requests.Load()}
	if e.child != nil {
		s.proc, s.procErr = e.child.usage()
	} else {
		s.procErr = errNotMeasured
	}
	s.self, s.selfErr = readProc(os.Getpid())
	return s
}

var errNotMeasured = errors.New("not measured")

// runOne runs workload w over path e: warm-up, measured window, teardown.
func (b *bencher) runOne(ctx context.Context, w workload, e *pathEnv, round int) (RunResult, error) {
	res := RunResult{Workload: w.name, Path: e.path, Variant: e.variant, Round: round}
	topic, err := b.topicFor(ctx, w, e)
	if err != nil {
		return res, err
	}
	if w.kind != kindConsume {
		defer b.deleteTopic(e.topicPrefix + topic)
	}
	m := &meter{}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	job, err := w.start(rctx, b, e, m, topic)
	if err != nil {
		return res, err
	}
	// The warm-up starts once records flow, so that client start-up
	// (metadata, producer id, connections) is never in the window.
	t0 := time.Now()
	if err := waitFlow(ctx, m, flowTimeout); err != nil {
		job.stop()
		return res, err
	}
	res.StartupSec = time.Since(t0).Seconds()
	if err := sleep(ctx, b.opts.Warmup); err != nil {
		job.stop()
		return res, err
	}
	var sys *syscallCounter
	if b.opts.Syscalls && e.child != nil {
		if sys, err = startSyscalls(e.child.cmd.Process.Pid); err != nil {
			job.stop()
			return res, err
		}
	}
	s0 := b.snap(m, e)
	job.window(s0.at, time.Time{})
	if err := sleep(ctx, b.opts.Duration); err != nil {
		job.stop()
		return res, err
	}
	s1 := b.closeWindow(ctx, m, e, s0)
	if sys != nil {
		if res.Syscalls, err = sys.stop(); err != nil {
			job.stop()
			return res, err
		}
	}
	job.window(s0.at, s1.at)
	res.Latency = job.stop()

	secs := s1.at.Sub(s0.at).Seconds()
	res.Seconds = secs
	res.Records = s1.records - s0.records
	res.PayloadBytes = s1.payload - s0.payload
	res.WireBytes = s1.wire - s0.wire
	res.Errors = s1.errs - s0.errs
	res.Requests = s1.requests - s0.requests
	res.Dials = m.dials.Load()
	res.RecordsPerSec = float64(res.Records) / secs
	res.MBPerSec = float64(res.PayloadBytes) / 1e6 / secs
	res.WireMBPerSec = float64(res.WireBytes) / 1e6 / secs
	if s0.procErr == nil && s1.procErr == nil {
		cpu := s1.proc.cpuSeconds - s0.proc.cpuSeconds
		res.CPUSeconds = &cpu
		if res.WireBytes > 0 {
			v := cpu * 1e3 / (float64(res.WireBytes) / 1e6)
			res.CPUMsPerMB = &v
		}
		rss := s1.proc.rssBytes
		res.RSSBytes = &rss
	}
	if s0.selfErr == nil && s1.selfErr == nil && res.WireBytes > 0 {
		v := (s1.self.cpuSeconds - s0.self.cpuSeconds) * 1e3 / (float64(res.WireBytes) / 1e6)
		res.BenchCPUMsPerMB = &v
	}
	if res.Records == 0 {
		return res, fmt.Errorf("no records moved in %.1fs (%d errors, %d dials)", secs, res.Errors, res.Dials)
	}
	return res, nil
}

// topicFor returns the topic a run of w over e uses, as e's clients name
// it; it is created upstream under e's virtual cluster prefix.
func (b *bencher) topicFor(ctx context.Context, w workload, e *pathEnv) (string, error) {
	if w.kind == kindConsume {
		return consumeTopic, nil
	}
	parts := b.opts.Partitions
	if w.kind == kindLatency {
		parts = 1 // one partition: every record takes the same route
	}
	topic := fmt.Sprintf("bench-%s-%d", w.name, b.topicSeq.Add(1))
	retention := strconv.Itoa(produceRetentionBytes)
	if err := b.createTopic(ctx, e.topicPrefix+topic, parts, map[string]*string{"retention.bytes": &retention}); err != nil {
		return "", err
	}
	return topic, nil
}

// createTopic creates topic with parts partitions and the topic configs
// (nil: the upstream's defaults).
func (b *bencher) createTopic(ctx context.Context, topic string, parts int, configs map[string]*string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := b.admin.CreateTopic(ctx, int32(parts), 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	// kfake puts each partition's leader on a broker at random: with one
	// partition per broker in some runs and two on one broker in others,
	// runs of the same code differed by how the work was spread. Leaders
	// go round the brokers instead (partition p on node p mod brokers).
	if b.cluster != nil && b.opts.Brokers > 1 {
		for p := range int32(parts) {
			if err := b.cluster.MoveTopicPartition(topic, p, p%int32(b.opts.Brokers)); err != nil {
				return fmt.Errorf("place %s[%d]: %w", topic, p, err)
			}
		}
	}
	return nil
}

func (b *bencher) deleteTopic(topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.admin.DeleteTopic(ctx, topic); err != nil {
		fmt.Fprintf(b.opts.ChildStderr, "bench: delete topic %s: %v\n", topic, err)
	}
}

// flowTimeout bounds the wait for a run's first record.
const flowTimeout = 30 * time.Second

// waitFlow polls until m has counted a record or an error.
func waitFlow(ctx context.Context, m *meter, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for m.records.Load() == 0 {
		if n := m.errs.Load(); n > 0 {
			return fmt.Errorf("%d errors before the first record", n)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no record within %v (%d dials)", timeout, m.dials.Load())
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeWindow takes the window's closing snapshot. A window in which no
// record has moved yet (a machine stalled by other work, the short windows
// of the smoke tests) stays open until one has, for at most flowTimeout:
// the rates are per second of the window as it was, so this changes no
// figure, and an empty window still fails the run.
func (b *bencher) closeWindow(ctx context.Context, m *meter, e *pathEnv, s0 snapshot) snapshot {
	s1 := b.snap(m, e)
	for s1.records == s0.records && time.Since(s0.at) < flowTimeout && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		s1 = b.snap(m, e)
	}
	return s1
}

// The benchmark's kfake upstream keeps what it is sent in memory: every
// batch, and a copy in its in-memory segment files, each a byte slice that
// doubles as it fills, copied whole under one lock for the whole cluster.
// A produce run at ~1 GB/s grew the benchmark process's heap to 12-16 GB;
// on a shared machine the kernel's page allocation then stalled whole
// rounds of any path (114-350 MB/s against ~1000, the benchmark process at
// 5-12 ms of CPU per MB, nearly all of it faulting pages in). So the
// produce topics keep their last produceRetentionBytes a partition
// (retention.bytes, applied every 250 ms: log.cleaner.backoff.ms) in
// segments of upstreamSegmentBytes.
const (
	upstreamSegmentBytes  = 8 << 20
	produceRetentionBytes = 64 << 20
)

// newUpstream starts the kfake cluster the relay and the gateways front.
func newUpstream(brokers int) (*kfake.Cluster, error) {
	return kfake.NewCluster(kfake.NumBrokers(brokers), kfake.BrokerConfigs(map[string]string{
		"log.segment.bytes":      strconv.Itoa(upstreamSegmentBytes),
		"log.cleaner.backoff.ms": "250",
	}))
}
