// Command tollgate-bench is tollgate's throughput/latency benchmark, kept
// out of the product binary so that tollgate links neither kfake nor the
// benchmark clients (see README "Performance" and package bench).
//
//	go run ./cmd/tollgate-bench --rounds 3                  # gateway vs relay vs direct
//	go run ./cmd/tollgate-bench --suite policy|audit|tls|single-port|vc # tollgate against itself
//	go build -o /tmp/tollgate ./cmd/tollgate
//	go run ./cmd/tollgate-bench --suite broker --tollgate /tmp/tollgate
//	go run ./cmd/tollgate-bench --suite soak --duration 2m   # RSS and goroutines under churn
//	go run ./cmd/tollgate-bench --suite faults --tollgate /tmp/tollgate  # loss/duplication/order under faults
//	go run ./cmd/tollgate-bench --suite share --tollgate /tmp/tollgate   # ShareFetch vs classic Fetch on the built-in broker
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-kafka/tollgate/bench"
)

func main() {
	os.Exit(benchCmd(os.Args[1:], os.Stdout, os.Stderr))
}

// benchCmd is the whole command. The default suite, gateway, is the gateway
// against a direct connection and a blind splice relay, over one in-process
// kfake upstream; --suite policy and --suite audit run tollgate against
// itself with policy rules or audit levels (issues 5 and 6); --suite tls
// runs it with a TLS listener against a plaintext one and measures new
// connections with handshakes (issue 7); --suite broker is the built-in
// broker against kfake. See package bench for the method. With
// bench.ChildFlag first it is instead the child side that serves the relay
// or the gateway (hidden: the benchmark starts it by re-executing this
// binary).
func benchCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == bench.ChildFlag {
		if err := bench.ServeChild(args, os.Stdin, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "tollgate-bench child:", err)
			return 1
		}
		return 0
	}
	fs := flag.NewFlagSet("tollgate-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		duration   = fs.Duration("duration", 5*time.Second, "measured window of each run (soak: the whole run, default 2m)")
		warmup     = fs.Duration("warmup", time.Second, "unmeasured warm-up at the start of each run")
		rounds     = fs.Int("rounds", 3, "rounds; each runs every workload over every path (gateway suite) or variant (policy, audit, tls)")
		workloads  = fs.String("workloads", strings.Join(bench.WorkloadNames(), ","), "comma-separated workloads to run")
		brokers    = fs.Int("brokers", 1, "kfake brokers")
		partitions = fs.Int("partitions", 3, "partitions of the throughput topics")
		rate       = fs.Int("rate", 1000, "records/s of the latency workload (soak: produced in total)")
		consumeMiB = fs.Int64("consume-mib", 32, "size of the topic the consume workload loops over")
		jsonOut    = fs.Bool("json", false, "print the report as JSON instead of a table")
		cpuprofile = fs.String("cpuprofile", "", "write a CPU profile of the gateway process to this file (policy: the topic-100 gateway; audit: the full one; tls: the TLS one)")
		tcpCC      = fs.String("tcp-congestion", "", "gateway: the relay's and the gateway's TCP congestion control; policy, audit, tls, single-port, vc: the gateways' limits.tcp_congestion_control (e.g. cubic; default: the host's)")
		syscalls   = fs.Bool("syscalls", false, "count the relay's and the gateway's system calls in each window with perf stat (Linux; printed per MB with each run)")
		inProcess  = fs.Bool("in-process", false, "run relay and gateway in this process (no CPU or RSS figures)")
		check      = fs.Bool("check", false, "exit 3 if a target of the issue is missed")
		quiet      = fs.Bool("quiet", false, "no per-run progress on stderr")
		suite      = fs.String("suite", string(bench.SuiteGateway), "gateway | policy | audit | tls | single-port | vc | broker | soak | faults | share")
		workDir    = fs.String("work-dir", "", "policy/audit/tls: keep each variant's config file, audit sink and certificates here (default: a temporary directory, removed)")

		tollgateBin    = fs.String("tollgate", "", "broker: the tollgate binary to measure (default: tollgate beside this command, else on $PATH)")
		brokerDir      = fs.String("broker-dir", "", "broker: where data directories and the disk probe go (default: the system temp dir)")
		brokerMiB      = fs.Int64("broker-produce-mib", 1024, "broker: MiB produced (and fetched) per setup")
		brokerMemMiB   = fs.Int64("broker-memory-mib", 4096, "broker: MiB given to tollgate fsync=never while its RSS is sampled; negative skips")
		brokerStepMiB  = fs.Int64("broker-memory-step-mib", 1024, "broker: MiB between RSS samples of the memory run")
		brokerProbeMiB = fs.Int64("broker-probe-mib", 256, "broker: MiB of the disk bandwidth probe")
		brokerRate     = fs.Int("broker-rate", 10000, "broker: records/s of the latency runs")
		brokerLatDur   = fs.Duration("broker-latency-duration", 5*time.Second, "broker: length of each latency run")

		shareMiB        = fs.Int64("share-mib", 256, "share: MiB of records read per run")
		shareMaxRecords = fs.Int("share-max-records", 0, "share: the share consumer's MaxRecords per ShareFetch (0: kgo's default, 500)")

		faultList   = fs.String("faults", strings.Join(bench.FaultNames, ","), "faults: the faults to apply")
		faultModes  = fs.String("fault-modes", strings.Join(bench.FaultModes, ",")+",direct", "faults: listener modes (direct: no gateway, a baseline for the upstream faults stop and moves and the network faults)")
		faultCycles = fs.Int("fault-cycles", 3, "faults: faults applied per run")
		faultHold   = fs.Duration("fault-hold", 3*time.Second, "faults: traffic before the first fault and after each")
		faultNetFor = fs.Duration("fault-net-for", 20*time.Second, "faults: how long net-delay, net-loss and net-reorder impair the link each cycle")
		faultHole   = fs.Duration("fault-blackhole-for", 10*time.Second, "faults: how long net-blackhole drops every packet each cycle")
	)
	slow := addSlowFlags(fs) // slow_readers.go
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tollgate-bench [--suite gateway|policy|audit|tls|single-port|vc|broker|soak|faults|share] [flags]\n\nworkloads: "+strings.Join(bench.WorkloadNames(), ", ")+
			"\n(policy, audit and tls default to "+strings.Join(bench.SuiteWorkloads, ",")+")\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tollgate-bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch bench.Suite(*suite) {
	case bench.SuiteGateway, bench.SuitePolicy, bench.SuiteAudit, bench.SuiteTLS, bench.SuiteSinglePort, bench.SuiteVC:
	default:
		if set["tcp-congestion"] {
			fmt.Fprintf(stderr, "tollgate-bench: --tcp-congestion is for the gateway, policy, audit, tls, single-port and vc suites, not %s\n", *suite)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if bench.Suite(*suite) == bench.SuiteBroker {
		var out io.Writer = stdout
		if *jsonOut {
			out = nil
		}
		bin, err := findTollgate(*tollgateBin)
		if err != nil {
			fmt.Fprintln(stderr, "tollgate-bench:", err)
			return 2
		}
		cfg := bench.BrokerConfig{
			Tollgate:        bin,
			Dir:             *brokerDir,
			ProduceBytes:    *brokerMiB << 20,
			MemoryBytes:     *brokerMemMiB << 20,
			MemoryStep:      *brokerStepMiB << 20,
			ProbeBytes:      *brokerProbeMiB << 20,
			LatencyRate:     *brokerRate,
			LatencyDuration: *brokerLatDur,
		}
		if !*quiet {
			cfg.Log = stderr
		}
		rep, err := bench.RunBroker(ctx, cfg, out)
		if err != nil {
			fmt.Fprintln(stderr, "tollgate-bench:", err)
			return 1
		}
		if *jsonOut {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				fmt.Fprintln(stderr, "tollgate-bench:", err)
				return 1
			}
		}
		return 0
	}
	if bench.Suite(*suite) == bench.SuiteShare {
		return shareCmd(ctx, *tollgateBin, *brokerDir, *shareMiB<<20, *partitions, *rounds, int32(*shareMaxRecords), set, *jsonOut, *check, *quiet, stdout, stderr)
	}
	if bench.Suite(*suite) == bench.SuiteSlowReaders {
		return slow.run(ctx, *tollgateBin, *workDir, *rounds, *duration, set, *jsonOut, *check, *quiet, stdout, stderr)
	}
	if bench.Suite(*suite) == bench.SuiteFaults {
		return faultsCmd(ctx, *tollgateBin, *workDir, *faultList, *faultModes, *faultCycles, *faultHold, *faultNetFor, *faultHole, *jsonOut, *check, *quiet, stdout, stderr)
	}
	opts := bench.Options{
		Duration:      *duration,
		Warmup:        *warmup,
		Rounds:        *rounds,
		Brokers:       *brokers,
		Partitions:    *partitions,
		Rate:          *rate,
		ConsumeBytes:  *consumeMiB << 20,
		CPUProfile:    *cpuprofile,
		Syscalls:      *syscalls,
		TCPCongestion: *tcpCC,
		WorkDir:       *workDir,
		ChildStderr:   stderr,
	}
	if *warmup == 0 {
		opts.Warmup = -1 // Options reads 0 as "default"
	}
	if set["workloads"] || bench.Suite(*suite) == bench.SuiteGateway {
		for _, w := range strings.Split(*workloads, ",") {
			if w = strings.TrimSpace(w); w != "" {
				opts.Workloads = append(opts.Workloads, w)
			}
		}
	}
	if !*quiet {
		opts.Progress = stderr
	}
	if !*inProcess {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(stderr, "tollgate-bench: find own executable for the child processes:", err)
			return 1
		}
		opts.Command = func(childArgs []string) *exec.Cmd {
			return exec.Command(exe, childArgs...)
		}
	}
	var rep suiteReport
	var err error
	switch s := bench.Suite(*suite); s {
	case bench.SuiteGateway:
		rep, err = bench.Run(ctx, opts)
	case bench.SuitePolicy, bench.SuiteAudit, bench.SuiteSinglePort, bench.SuiteVC:
		rep, err = bench.RunSuite(ctx, s, opts)
	case bench.SuiteTLS:
		rep, err = bench.RunTLSSuite(ctx, opts)
	case bench.SuiteSoak:
		if !set["duration"] {
			opts.Duration = 2 * time.Minute
		}
		rep, err = bench.RunSoak(ctx, opts)
	default:
		fmt.Fprintf(stderr, "tollgate-bench: unknown suite %q (want gateway, policy, audit, tls, single-port, vc, broker, soak, faults or share)\n", *suite)
		return 2
	}
	return report(rep, err, *jsonOut, *check, stdout, stderr)
}

// shareCmd runs --suite share: a share-group and a classic-group kgo
// consumer read the same records from the built-in broker, alternately,
// --rounds times (default 5 for this suite); --check exits 3 if share
// throughput is below 0.9x classic.
func shareCmd(ctx context.Context, tollgateBin, dir string, n int64, partitions, rounds int, maxRecords int32, set map[string]bool, jsonOut, check, quiet bool, stdout, stderr io.Writer) int {
	bin, err := findTollgate(tollgateBin)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate-bench:", err)
		return 2
	}
	cfg := bench.ShareConfig{Tollgate: bin, Dir: dir, Bytes: n, ShareMaxRecords: maxRecords}
	if set["partitions"] {
		cfg.Partitions = partitions
	}
	if set["rounds"] {
		cfg.Rounds = rounds
	}
	if !quiet {
		cfg.Log = stderr
	}
	rep, err := bench.RunShare(ctx, cfg)
	return report(rep, err, jsonOut, check, stdout, stderr)
}

// faultsCmd runs --suite faults: every fault in every mode (the direct
// mode only for the upstream faults), --fault-cycles faults a run, and
// prints the table; --check exits 3 unless every run lost, duplicated and
// reordered nothing and no client call failed.
func faultsCmd(ctx context.Context, tollgateBin, dir, faults, modes string, cycles int, hold, netFor, holeFor time.Duration, jsonOut, check, quiet bool, stdout, stderr io.Writer) int {
	bin, err := findTollgate(tollgateBin)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate-bench:", err)
		return 2
	}
	cfg := bench.FaultsConfig{Tollgate: bin, Dir: dir, Cycles: cycles, Hold: hold, NetFor: netFor, BlackholeFor: holeFor}
	if !quiet {
		cfg.Log = stderr
	}
	rep := &bench.FaultsReport{}
	for _, f := range splitFlag(faults) {
		for _, m := range splitFlag(modes) {
			if m == bench.ModeDirect && bench.FaultNeedsGateway(f) {
				continue // no gateway to restart, or between clients and upstream
			}
			c := cfg
			c.Faults, c.Modes = []string{f}, []string{m}
			r, err := bench.RunFaults(ctx, c)
			if err != nil {
				fmt.Fprintln(stderr, "tollgate-bench:", err)
				return 1
			}
			rep.Results = append(rep.Results, r.Results...)
		}
	}
	return report(rep, nil, jsonOut, check, stdout, stderr)
}

// suiteReport is what every suite's run returns.
type suiteReport interface {
	WriteJSON(io.Writer) error
	WriteTable(io.Writer) error
	Met() bool
}

// report prints a suite's report (JSON or a table) and gives the exit
// code: 1 for err or a failed write, 3 for --check with a target missed.
func report(rep suiteReport, err error, jsonOut, check bool, stdout, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintln(stderr, "tollgate-bench:", err)
		return 1
	}
	if jsonOut {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "tollgate-bench:", err)
		return 1
	}
	if check && !rep.Met() {
		return 3
	}
	return 0
}

func splitFlag(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// findTollgate returns the tollgate binary the broker suite starts: flag
// (the --tollgate flag) when set, else a tollgate beside this executable, else one on $PATH.
func findTollgate(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "tollgate")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("tollgate"); err == nil {
		return p, nil
	}
	return "", errors.New("--suite broker, faults and share need the tollgate binary: build it (go build -o /tmp/tollgate ./cmd/tollgate) and pass --tollgate /tmp/tollgate")
}
