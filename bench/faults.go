//go:build linux

package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The fault suite (issue 23, first slice): the real tollgate binary as the
// gateway, in its own process group, in front of a three-broker kfake (in
// this process) or a built-in-broker tollgate (a child process, for the
// SIGSTOP fault: kfake runs all its brokers in one process, so stopping it
// would stop the whole cluster and the benchmark's own controls with it).
// Through the gateway run idempotent acks=all producers and a committing
// consumer group; a fault is applied while they run; then the checker
// reads the whole topic from the start with a fresh consumer and compares
// it with what the producers were told was acknowledged.
//
// What the checker asserts (faultCheck):
//   - lost: an acknowledged record absent from the final read;
//   - duplicated: a record (producer, sequence) in the final read more
//     than once (idempotence keeps retries out of the log);
//   - reordered: a record of a producer in a partition whose sequence is
//     below one of the same producer read earlier in that partition;
//   - client errors: records the producer client failed (kgo retries
//     every retriable error without bound here, so a failure is an error
//     the client could not retry) and consumer poll errors kgo does not
//     retry (not a group-session error, which kgo follows by rejoining,
//     and neither kgo.IsRetryableBrokerErr nor kerr.IsRetriable).
//   - unconsumed: an acknowledged record the group never read.
//
// Reported but not failed on: retriable errors a consumer's poll returned
// (a refused dial while the gateway restarts: kgo retries it); kgo's
// ErrDataLoss notices (kfake's OffsetForLeaderEpoch answers after a leader
// move cause them with no gateway in between; the final read decides
// loss); group redeliveries (a committing consumer re-reads what it
// processed but had not committed when a member lost its session or the
// group rebalanced: Kafka's at-least-once); failed commits
// (REBALANCE_IN_PROGRESS and the like during a fault); records in the log
// that were never acknowledged (0 unless a record failed: the producers'
// contexts outlive the final flush, so every record gets an answer).

// SuiteFaults: the gateway under faults (RunFaults).
const SuiteFaults Suite = "faults"

// Fault names.
const (
	FaultRestart = "restart" // the gateway SIGTERMed, a new process on the same ports
	FaultKill    = "kill"    // the gateway SIGKILLed, a new process on the same ports
	FaultStop    = "stop"    // the upstream SIGSTOPped past the request timeout, SIGCONTed
	FaultMoves   = "moves"   // partition leaders and coordinators moved every MoveEvery
)

// Listener modes.
const (
	ModePortPerBroker = "port-per-broker"
	ModeSNI           = "sni"
	ModeSinglePort    = "single-port"
	// ModeDirect: the clients straight to the upstream, no gateway (a
	// baseline that tells the gateway's faults from the upstream's; not
	// in FaultModes, and no gateway fault applies to it).
	ModeDirect = "direct"
)

// FaultNames and FaultModes are every fault and mode, in run order.
var (
	FaultNames = []string{FaultRestart, FaultKill, FaultStop, FaultMoves}
	FaultModes = []string{ModePortPerBroker, ModeSNI, ModeSinglePort}
)

// FaultsConfig sizes a fault run. Zero fields take the CI-sized defaults.
type FaultsConfig struct {
	Tollgate string   // the tollgate binary (gateway and built-in upstream)
	Dir      string   // work directory (configs, certificates, data); default a temporary one
	Faults   []string // default FaultNames
	Modes    []string // default FaultModes

	Cycles     int           // faults applied per run (default 1)
	Hold       time.Duration // traffic before the first and after each fault (default 1s)
	StopFor    time.Duration // how long the upstream stays SIGSTOPped (default 6s: past the 3s+2s request timeout)
	MoveEvery  time.Duration // leader-move interval (default 2s)
	Moves      int           // moves per cycle (default 3)
	Producers  int           // default 2
	Consumers  int           // group members, default 2
	Partitions int32         // default 4

	NetFor       time.Duration // network faults: how long delay, loss or reordering lasts (default 5s; faults_net.go)
	BlackholeFor time.Duration // network faults: how long the blackhole lasts (default 10s)

	Log io.Writer // progress and, on failure, the gateway's last log lines
}

func (c *FaultsConfig) defaults() {
	if len(c.Faults) == 0 {
		c.Faults = FaultNames
	}
	if len(c.Modes) == 0 {
		c.Modes = FaultModes
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Cycles, 1)
	def(&c.Moves, 3)
	def(&c.Producers, 2)
	def(&c.Consumers, 2)
	if c.Partitions <= 0 {
		c.Partitions = 4
	}
	defD(&c.Hold, time.Second)
	defD(&c.StopFor, 6*time.Second)
	defD(&c.MoveEvery, 2*time.Second)
}

// Client timeouts of the fault workload: a produce request times out after
// faultProduceTimeout plus faultTimeoutOverhead, which StopFor exceeds.
const (
	faultProduceTimeout  = 3 * time.Second
	faultTimeoutOverhead = 2 * time.Second
	// faultRunBound bounds one fault × mode run, and its recovery waits.
	faultRunBound = 3 * time.Minute
)

// FaultResult is one fault in one listener mode.
type FaultResult struct {
	Fault        string        `json:"fault"`
	Mode         string        `json:"mode"`
	Cycles       int           `json:"cycles"`
	Acknowledged int64         `json:"acknowledged"`
	Lost         int64         `json:"lost"`
	Duplicated   int64         `json:"duplicated"`
	Reordered    int64         `json:"reordered"`
	ClientErrors int64         `json:"client_errors"`
	Unacked      int64         `json:"unacked_in_log"`   // in the log, never acknowledged
	Unconsumed   int64         `json:"group_unconsumed"` // acknowledged, never read by the group
	Redelivered  int64         `json:"group_redelivered"`
	Retried      int64         `json:"consumer_retried_errors"`    // retriable errors a poll returned (kgo retries them)
	DataLoss     int64         `json:"consumer_data_loss_notices"` // kgo.ErrDataLoss from a poll (position reset after OffsetForLeaderEpoch)
	CommitErrors int64         `json:"commit_errors"`
	Recovery     time.Duration `json:"recovery_ns"` // fault's end to the first produce and consume after it; the longest over the cycles
	Outage       time.Duration `json:"outage_ns"`   // fault's start to the same point; the longest over the cycles
	Errors       []string      `json:"errors,omitempty"`

	Impairment string `json:"impairment,omitempty"` // network faults: how the link was impaired, and what that measured
}

// OK reports whether the run lost, duplicated and reordered nothing, no
// client call failed, and the group consumed everything.
func (r FaultResult) OK() bool {
	return r.Acknowledged > 0 && r.Lost == 0 && r.Duplicated == 0 && r.Reordered == 0 &&
		r.ClientErrors == 0 && r.Unconsumed == 0 && len(r.Errors) == 0
}

// FaultsReport is RunFaults' outcome.
type FaultsReport struct {
	Config  FaultsConfig  `json:"-"`
	Results []FaultResult `json:"results"`
}

// Met reports whether every run was OK.
func (r *FaultsReport) Met() bool {
	for _, x := range r.Results {
		if !x.OK() {
			return false
		}
	}
	return len(r.Results) > 0
}

// RunFaults runs every fault in every mode, one after the other.
func RunFaults(ctx context.Context, cfg FaultsConfig) (*FaultsReport, error) {
	cfg.defaults()
	if cfg.Tollgate == "" {
		return nil, errors.New("faults: no tollgate binary")
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "tollgate-faults-")
		if err != nil {
			return nil, fmt.Errorf("faults work directory: %w", err)
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	rep := &FaultsReport{Config: cfg}
	for _, f := range cfg.Faults {
		for _, m := range cfg.Modes {
			if cfg.Log != nil {
				fmt.Fprintf(cfg.Log, "faults: %s / %s ...\n", f, m)
			}
			r, err := RunFault(ctx, cfg, f, m)
			if err != nil {
				return rep, err
			}
			if cfg.Log != nil {
				fmt.Fprintf(cfg.Log, "faults: %s / %s: acked %d lost %d dup %d reord %d errors %d recovery %v\n",
					f, m, r.Acknowledged, r.Lost, r.Duplicated, r.Reordered, r.ClientErrors, r.Recovery.Round(time.Millisecond))
			}
			rep.Results = append(rep.Results, r)
		}
	}
	return rep, nil
}

// RunFault runs one fault in one mode. An error is a failure to set the run
// up (or a bad name); what the fault did to the records is in the result.
func RunFault(ctx context.Context, cfg FaultsConfig, fault, mode string) (FaultResult, error) {
	cfg.defaults()
	if isNetFault(fault) {
		return runNetFault(ctx, cfg, fault, mode) // faults_net.go
	}
	if isAuthFault(fault) {
		return runAuthFault(ctx, cfg, fault, mode) // faults_auth.go
	}
	res := FaultResult{Fault: fault, Mode: mode, Cycles: cfg.Cycles}
	ctx, cancel := context.WithTimeout(ctx, faultRunBound)
	defer cancel()
	dir, err := os.MkdirTemp(cfg.Dir, fault+"-"+mode+"-")
	if err != nil {
		return res, fmt.Errorf("faults: %w", err)
	}
	env := &faultEnv{cfg: cfg, mode: mode, dir: dir, topic: "faults"}
	defer env.close()

	// The upstream.
	var upstreams []string
	switch fault {
	case FaultRestart, FaultKill, FaultMoves:
		c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(cfg.Partitions, env.topic))
		if err != nil {
			return res, fmt.Errorf("faults: kfake: %w", err)
		}
		env.kfake = c
		upstreams = c.ListenAddrs()
	case FaultStop:
		p, err := startFaultProc(ctx, cfg.Tollgate, []string{"--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "upstream"), "--admin", "off", "--fsync", "never"})
		if err != nil {
			return res, fmt.Errorf("faults: built-in upstream: %w", err)
		}
		env.upstream = p
		upstreams = []string{p.addr}
	default:
		return res, fmt.Errorf("faults: unknown fault %q (want one of %s)", fault, strings.Join(FaultNames, ", "))
	}
	if mode == ModeDirect {
		if fault == FaultRestart || fault == FaultKill {
			return res, fmt.Errorf("faults: fault %s needs a gateway, mode %s has none", fault, mode)
		}
		env.seed = strings.Join(upstreams, ",")
	} else if err := env.startGateway(ctx, upstreams); err != nil {
		return res, err
	}
	if env.upstream != nil {
		if err := env.createTopic(ctx, cfg.Partitions); err != nil {
			return res, err
		}
	}
	w, err := env.startWork(ctx)
	if err != nil {
		return res, err
	}
	fail := func(format string, a ...any) {
		res.Errors = append(res.Errors, fmt.Sprintf(format, a...))
	}
	hold := func() bool {
		// Traffic flows for Hold, and at least some records are acked.
		start := w.acks.Load()
		t := time.NewTimer(cfg.Hold)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		}
		for w.acks.Load() < start+50 {
			if ctx.Err() != nil {
				return false
			}
			time.Sleep(10 * time.Millisecond)
		}
		return true
	}
	recovered := func(start, end time.Time) {
		d, ok := w.recovery(ctx, end)
		if !ok {
			fail("no produce and consume succeeded after the fault within %v", faultRunBound)
			return
		}
		res.Recovery = max(res.Recovery, d)
		res.Outage = max(res.Outage, end.Sub(start)+d)
	}
	if !hold() {
		fail("no records acknowledged before the fault")
	}
	for cycle := 0; cycle < cfg.Cycles && len(res.Errors) == 0; cycle++ {
		switch fault {
		case FaultRestart, FaultKill:
			sig := syscall.SIGTERM
			if fault == FaultKill {
				sig = syscall.SIGKILL
			}
			start := time.Now()
			if err := env.gw.signalWait(sig, 30*time.Second); err != nil {
				fail("gateway %v: %v", sig, err)
				break
			}
			if err := env.restartGateway(ctx); err != nil {
				fail("gateway restart: %v", err)
				break
			}
			recovered(start, time.Now())
		case FaultStop:
			start := time.Now()
			if err := syscall.Kill(env.upstream.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
				fail("SIGSTOP upstream: %v", err)
				break
			}
			time.Sleep(cfg.StopFor) // the fault itself: the upstream stays stopped this long
			if err := syscall.Kill(env.upstream.cmd.Process.Pid, syscall.SIGCONT); err != nil {
				fail("SIGCONT upstream: %v", err)
				break
			}
			recovered(start, time.Now())
		case FaultMoves:
			for range cfg.Moves {
				next := time.Now().Add(cfg.MoveEvery)
				if err := env.moveAll(); err != nil {
					fail("move: %v", err)
					break
				}
				now := time.Now()
				recovered(now, now)
				time.Sleep(time.Until(next))
			}
		}
		if len(res.Errors) == 0 && !hold() {
			fail("traffic did not resume after fault %d", cycle+1)
		}
	}
	w.finish(ctx, &res)
	if !res.OK() && cfg.Log != nil {
		fmt.Fprintf(cfg.Log, "faults: %s / %s failed: %+v\ngateway log (last lines):\n%s\n", fault, mode, res, env.gwLogs())
	}
	return res, nil
}

// faultEnv is one run's processes.
type faultEnv struct {
	cfg      FaultsConfig
	mode     string
	dir      string
	topic    string
	kfake    *kfake.Cluster
	upstream *faultProc // the built-in broker (FaultStop)
	gw       *faultProc
	gwArgs   []string
	seed     string      // the clients' bootstrap address
	tls      *tls.Config // SNI mode: the clients' TLS
	pkiCert  string      // SNI mode: the gateway's certificate and key files
	pkiKey   string
	oldLogs  []string // the last lines of gateways that exited
	work     *faultWork
}

func (e *faultEnv) close() {
	if e.work != nil {
		e.work.closeClients()
	}
	if e.gw != nil {
		e.gw.kill()
	}
	if e.upstream != nil {
		syscall.Kill(e.upstream.cmd.Process.Pid, syscall.SIGCONT)
		e.upstream.kill()
	}
	if e.kfake != nil {
		e.kfake.Close()
	}
}

func (e *faultEnv) gwLogs() string {
	out := strings.Join(e.oldLogs, "\n")
	if e.gw != nil {
		out += "\n--- current gateway ---\n" + e.gw.tail()
	}
	return out
}

// freeBase returns a bootstrap port whose next n ports were free when
// probed (port-per-broker serves node N at bootstrap+1+N). It probes
// random ports below the kernel's ephemeral range first: connect(2) takes
// its local ports from that range, so on a loaded machine an outgoing
// connection can hold a neighbour of every port the kernel offers, or take
// one of the gateway's ports in the gap of a restart, which must bind the
// same ports again. Below the range only another listener can collide,
// and the probe sees it. When that finds nothing it asks the kernel (:0).
func freeBase(n int) (int, error) {
	probe := func(base int) bool {
		if base <= 0 || base+n > 65535 {
			return false
		}
		var held []net.Listener
		defer func() {
			for _, l := range held {
				l.Close()
			}
		}()
		for i := 0; i <= n; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
			if err != nil {
				return false
			}
			held = append(held, l)
		}
		return true
	}
	lo := ephemeralLow()
	for range 1000 {
		if lo <= 10000+n {
			break
		}
		if base := 10000 + mrand.IntN(lo-10000-n); probe(base) {
			return base, nil
		}
	}
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("probe port: %w", err)
		}
		base := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if probe(base) {
			return base, nil
		}
	}
	return 0, errors.New("no run of free ports found")
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}

// startGateway writes the mode's configuration on a fresh port and starts
// the gateway, retrying on a new port when one was taken meanwhile.
func (e *faultEnv) startGateway(ctx context.Context, upstreams []string) error {
	return e.startGatewayWith(ctx, 3, func(port int) (string, int, error) {
		y, err := e.configYAML(port, upstreams)
		return y, port, err
	})
}

// startGatewayWith starts the gateway with the configuration config
// builds from the first of ports free ports (it returns the YAML and the
// bootstrap port), retrying on new ports when one was taken meanwhile.
func (e *faultEnv) startGatewayWith(ctx context.Context, ports int, config func(first int) (yaml string, bootstrap int, err error)) error {
	var last error
	for range 10 {
		first, err := freeBase(ports)
		if err != nil {
			return fmt.Errorf("faults: %w", err)
		}
		y, port, err := config(first)
		if err != nil {
			return err
		}
		file := filepath.Join(e.dir, "gateway.yaml")
		if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
			return fmt.Errorf("faults: write config: %w", err)
		}
		e.gwArgs = []string{"--config", file}
		p, err := startFaultProc(ctx, e.cfg.Tollgate, e.gwArgs)
		if err == nil {
			e.gw = p
			e.seed = "127.0.0.1:" + strconv.Itoa(port)
			if e.mode == ModeSNI {
				e.seed = benchSNIApex + ":" + strconv.Itoa(port)
			}
			return nil
		}
		last = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return fmt.Errorf("faults: start gateway: %w", last)
}

// restartGateway starts a new gateway on the previous one's ports,
// retrying within a bound while a port is still busy.
func (e *faultEnv) restartGateway(ctx context.Context) error {
	e.oldLogs = append(e.oldLogs, "--- gateway (exited) ---", e.gw.tail())
	var last error
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		p, err := startFaultProc(ctx, e.cfg.Tollgate, e.gwArgs)
		if err == nil {
			e.gw = p
			return nil
		}
		last = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return last
}

func (e *faultEnv) configYAML(port int, upstreams []string) (string, error) {
	var b strings.Builder
	b.WriteString("listeners:\n")
	switch e.mode {
	case ModePortPerBroker:
		fmt.Fprintf(&b, "  - {name: faults, listen: 127.0.0.1:%d}\n", port)
	case ModeSinglePort:
		fmt.Fprintf(&b, "  - {name: faults, listen: 127.0.0.1:%d, brokers: single-port}\n", port)
	case ModeSNI:
		if e.tls == nil {
			p, err := writePKI(filepath.Join(e.dir, "tls"))
			if err != nil {
				return "", fmt.Errorf("faults: %w", err)
			}
			e.tls = &tls.Config{RootCAs: p.pool}
			e.pkiCert, e.pkiKey = p.certFile, p.keyFile
		}
		fmt.Fprintf(&b, "  - {name: faults, listen: 127.0.0.1:%d, brokers: sni, sni: {bootstrap_host: %s, broker_host: %q}, tls: {cert: %q, key: %q}}\n",
			port, benchSNIApex, benchSNIBrokers, e.pkiCert, e.pkiKey)
	default:
		return "", fmt.Errorf("faults: unknown mode %q (want one of %s)", e.mode, strings.Join(FaultModes, ", "))
	}
	fmt.Fprintf(&b, "upstream:\n  bootstrap: [%s]\n  dial_timeout: 2s\n  metadata_refresh: 1s\n", strings.Join(upstreams, ", "))
	b.WriteString("admin:\n  listen: \"off\"\nlog:\n  level: info\n")
	b.WriteString("limits:\n  max_connections_per_address: 0\n  connection_rate_per_address: 0\n  drain_timeout: 5s\n")
	return b.String(), nil
}

// moveAll moves every partition's leader to the next broker and rehashes
// the group coordinators.
func (e *faultEnv) moveAll() error {
	for p := range e.cfg.Partitions {
		l := e.kfake.LeaderFor(e.topic, p)
		if err := e.kfake.MoveTopicPartition(e.topic, p, (l+1)%3); err != nil {
			return fmt.Errorf("move %s/%d to %d: %w", e.topic, p, (l+1)%3, err)
		}
	}
	e.kfake.RehashCoordinators()
	return nil
}

func (e *faultEnv) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(e.seed, ",")...),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.RetryTimeout(faultRunBound),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RequestTimeoutOverhead(faultTimeoutOverhead),
		kgo.DialTimeout(2 * time.Second),
	}
	if e.tls != nil {
		cfg := e.tls
		opts = append(opts, kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("sni dial %s: %w", addr, err)
			}
			c := cfg.Clone()
			c.ServerName = host
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: c}
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		}))
	}
	return append(opts, extra...)
}

func (e *faultEnv) createTopic(ctx context.Context, partitions int32) error {
	cl, err := kgo.NewClient(e.clientOpts()...)
	if err != nil {
		return fmt.Errorf("faults: admin client: %w", err)
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Not retried: a gateway that has logged "listening" answers (a
	// single-port one used to close this first connection before its
	// first discovery, which kadm does not retry; proxy.discoverFirst).
	resp, err := kadm.NewClient(cl).CreateTopic(cctx, partitions, 1, nil, e.topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("faults: create topic %s: %w\n%s", e.topic, err, e.gwLogs())
	}
	return nil
}

// faultProc is a tollgate child process in its own process group.
type faultProc struct {
	cmd    *exec.Cmd
	addr   string // from its first "listening" log line
	exited chan struct{}

	mu    sync.Mutex
	lines []string // the last procTail lines of its log
}

const procTail = 200

func (p *faultProc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// startFaultProc starts bin and waits for its "listening" line.
func startFaultProc(ctx context.Context, bin string, args []string) (*faultProc, error) {
	p := &faultProc{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if len(p.lines) == procTail {
				p.lines = p.lines[1:]
			}
			p.lines = append(p.lines, line)
			p.mu.Unlock()
			if strings.Contains(line, "msg=listening") {
				for _, f := range strings.Fields(line) {
					if a, ok := strings.CutPrefix(f, "addr="); ok {
						select {
						case addrCh <- a:
						default:
						}
					}
				}
			}
		}
		io.Copy(io.Discard, stderr)
		p.cmd.Wait()
		close(p.exited)
	}()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case p.addr = <-addrCh:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before listening: %s", bin, p.tail())
	case <-t.C:
	case <-ctx.Done():
	}
	p.kill()
	return nil, fmt.Errorf("%s not listening after 30s: %s", bin, p.tail())
}

// signalWait sends sig to the process and waits for it to exit.
func (p *faultProc) signalWait(sig syscall.Signal, bound time.Duration) error {
	if err := syscall.Kill(p.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("signal %v: %w", sig, err)
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-p.exited:
		return nil
	case <-t.C:
		p.kill()
		return fmt.Errorf("did not exit within %v of %v; killed", bound, sig)
	}
}

// kill SIGKILLs the process group and waits for the process to exit.
func (p *faultProc) kill() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// faultKey names one produced record.
type faultKey struct {
	prod int
	seq  int64
}

// faultWork is the producers and the group of one run.
type faultWork struct {
	env   *faultEnv
	prods []*kgo.Client
	cons  []*kgo.Client

	stopProd chan struct{}
	stopCons chan struct{}
	prodWG   sync.WaitGroup
	consWG   sync.WaitGroup

	acks, consumed    atomic.Int64
	retried           atomic.Int64 // retriable errors the consumers' polls returned
	dataLoss          atomic.Int64 // kgo.ErrDataLoss notices the consumers' polls returned
	lastAck, lastCons atomic.Int64 // unix nanoseconds

	mu           sync.Mutex
	acked        map[faultKey]int32 // → the partition it was acknowledged in
	clientErrs   map[string]int64
	groupSeen    map[faultKey]int
	commitErrors int64
}

func (w *faultWork) closeClients() {
	for _, c := range append(append([]*kgo.Client{}, w.prods...), w.cons...) {
		c.Close()
	}
}

func (w *faultWork) clientErr(what string, err error) {
	w.mu.Lock()
	w.clientErrs[what+": "+err.Error()]++
	w.mu.Unlock()
}

// startWork starts the producers and the group members.
func (e *faultEnv) startWork(ctx context.Context) (*faultWork, error) {
	w := &faultWork{
		env: e, stopProd: make(chan struct{}), stopCons: make(chan struct{}),
		acked: map[faultKey]int32{}, clientErrs: map[string]int64{}, groupSeen: map[faultKey]int{},
	}
	e.work = w
	for i := range e.cfg.Producers {
		cl, err := kgo.NewClient(e.clientOpts(
			kgo.RequiredAcks(kgo.AllISRAcks()), // with idempotence, kgo's default
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.MaxBufferedRecords(100),
			kgo.ProducerLinger(0),
			kgo.ProduceRequestTimeout(faultProduceTimeout))...)
		if err != nil {
			return nil, fmt.Errorf("faults: producer: %w", err)
		}
		w.prods = append(w.prods, cl)
		w.prodWG.Add(1)
		go func() {
			defer w.prodWG.Done()
			for seq := int64(0); ; seq++ {
				select {
				case <-w.stopProd:
					return
				default:
				}
				k := faultKey{i, seq}
				r := &kgo.Record{Topic: e.topic, Value: []byte(fmt.Sprintf("%d:%d", i, seq))}
				cl.Produce(ctx, r, func(r *kgo.Record, err error) {
					if err != nil {
						w.clientErr("produce", err)
						return
					}
					w.mu.Lock()
					w.acked[k] = r.Partition
					w.mu.Unlock()
					w.acks.Add(1)
					w.lastAck.Store(time.Now().UnixNano())
				})
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	for range e.cfg.Consumers {
		cl, err := kgo.NewClient(e.clientOpts(
			kgo.ConsumerGroup("faults-group"), kgo.ConsumeTopics(e.topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
			kgo.FetchMaxWait(200*time.Millisecond))...)
		if err != nil {
			return nil, fmt.Errorf("faults: consumer: %w", err)
		}
		w.cons = append(w.cons, cl)
		w.consWG.Add(1)
		go func() {
			defer w.consWG.Done()
			for {
				select {
				case <-w.stopCons:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
				fs := cl.PollFetches(pctx)
				pcancel()
				fs.EachError(func(_ string, _ int32, err error) {
					if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
						return
					}
					// kgo hands group-session and fetch errors to the
					// poll and retries them itself: a member that could
					// not join (a refused dial while the gateway
					// restarts) keeps rejoining, and a retriable fetch
					// error is refetched. Those are counted apart from
					// client errors; the group must still consume every
					// acknowledged record (Unconsumed).
					// kgo's ErrDataLoss: an OffsetForLeaderEpoch answer
					// made it reset a partition's position. kfake gives
					// such answers after MoveTopicPartition with no
					// gateway in between (mode direct shows it), so it
					// is counted apart; the final read decides loss.
					if _, ok := errors.AsType[*kgo.ErrDataLoss](err); ok {
						w.dataLoss.Add(1)
						return
					}
					var gs *kgo.ErrGroupSession
					if errors.As(err, &gs) || kgo.IsRetryableBrokerErr(err) || kerr.IsRetriable(err) {
						w.retried.Add(1)
						return
					}
					w.clientErr("fetch", err)
				})
				n := 0
				w.mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					if k, ok := parseFaultValue(r.Value); ok {
						w.groupSeen[k]++
						n++
					}
				})
				w.mu.Unlock()
				if n > 0 {
					w.consumed.Add(int64(n))
					w.lastCons.Store(time.Now().UnixNano())
					cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
					if err := cl.CommitUncommittedOffsets(cctx); err != nil {
						w.mu.Lock()
						w.commitErrors++
						w.mu.Unlock()
					}
					ccancel()
				}
				cl.AllowRebalance()
			}
		}()
	}
	return w, nil
}

func parseFaultValue(v []byte) (faultKey, bool) {
	p, s, ok := strings.Cut(string(v), ":")
	if !ok {
		return faultKey{}, false
	}
	pi, err1 := strconv.Atoi(p)
	si, err2 := strconv.ParseInt(s, 10, 64)
	return faultKey{pi, si}, err1 == nil && err2 == nil
}

// recovery waits until a record is acknowledged and one consumed after
// since, and returns how long after since the later of the two was seen
// (polled every 5 ms).
func (w *faultWork) recovery(ctx context.Context, since time.Time) (time.Duration, bool) {
	s := since.UnixNano()
	for w.lastAck.Load() <= s || w.lastCons.Load() <= s {
		if ctx.Err() != nil {
			return 0, false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(since), true
}

// finish stops the producers, flushes, waits for the group to consume
// every acknowledged record, stops it, and checks the log.
func (w *faultWork) finish(ctx context.Context, res *FaultResult) {
	close(w.stopProd)
	w.prodWG.Wait()
	for _, p := range w.prods {
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		if err := p.Flush(fctx); err != nil {
			res.Errors = append(res.Errors, "flush: "+err.Error())
		}
		cancel()
	}
	w.mu.Lock()
	acked := make(map[faultKey]int32, len(w.acked))
	for k, p := range w.acked {
		acked[k] = p
	}
	w.mu.Unlock()
	unconsumed := func() int64 {
		w.mu.Lock()
		defer w.mu.Unlock()
		var n int64
		for k := range acked {
			if w.groupSeen[k] == 0 {
				n++
			}
		}
		return n
	}
	gctx, gcancel := context.WithTimeout(ctx, time.Minute)
	for unconsumed() > 0 && gctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	gcancel()
	res.Unconsumed = unconsumed()
	close(w.stopCons)
	w.consWG.Wait()
	w.mu.Lock()
	for _, n := range w.groupSeen {
		if n > 1 {
			res.Redelivered += int64(n - 1)
		}
	}
	for _, n := range w.clientErrs {
		res.ClientErrors += n
	}
	for e, n := range w.clientErrs {
		res.Errors = append(res.Errors, fmt.Sprintf("client error ×%d: %s", n, e))
	}
	res.CommitErrors = w.commitErrors
	res.Retried = w.retried.Load()
	res.DataLoss = w.dataLoss.Load()
	w.mu.Unlock()
	res.Acknowledged = int64(len(acked))

	log, err := w.env.readAll(ctx)
	if err != nil {
		res.Errors = append(res.Errors, "final read: "+err.Error())
		return
	}
	c := faultCheck(acked, log)
	res.Lost, res.Duplicated, res.Reordered, res.Unacked = c.lost, c.duplicated, c.reordered, c.unacked
}

type faultCounts struct{ lost, duplicated, reordered, unacked int64 }

// faultCheck compares the acknowledged records with the log, given per
// partition in offset order.
func faultCheck(acked map[faultKey]int32, log map[int32][]faultKey) faultCounts {
	var c faultCounts
	seen := map[faultKey]int{}
	for part, recs := range log {
		last := map[int]int64{} // producer → last sequence read in this partition
		for _, k := range recs {
			seen[k]++
			if seen[k] > 1 {
				c.duplicated++
				continue
			}
			if l, ok := last[k.prod]; ok && k.seq < l {
				c.reordered++
			} else {
				last[k.prod] = k.seq
			}
			if p, ok := acked[k]; !ok {
				c.unacked++
			} else if p != part {
				c.lost++ // acknowledged in another partition: not where the client was told
			}
		}
	}
	for k := range acked {
		if seen[k] == 0 {
			c.lost++
		}
	}
	return c
}

// readAll reads the whole topic from the start with a fresh consumer
// (no group) up to the end offsets.
func (e *faultEnv) readAll(ctx context.Context) (map[int32][]faultKey, error) {
	cl, err := kgo.NewClient(e.clientOpts(kgo.FetchMaxWait(200 * time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(rctx, e.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", err)
	}
	want := map[int32]int64{}
	offs := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			offs[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	out := map[int32][]faultKey{}
	if len(want) == 0 {
		return out, nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{e.topic: offs})
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return nil, fmt.Errorf("read to the end offsets %v: got to %v: %w", want, next, rctx.Err())
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, fmt.Errorf("fetch: %w", ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if r.Offset >= want[r.Partition] {
				return
			}
			k, ok := parseFaultValue(r.Value)
			if !ok {
				k = faultKey{-1, r.Offset}
			}
			out[r.Partition] = append(out[r.Partition], k)
		})
	}
	return out, nil
}
