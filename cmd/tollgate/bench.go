package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-kafka/tollgate/bench"
)

// benchCmd is `tollgate bench`: the gateway against a direct connection and
// a blind splice relay, over one in-process kfake upstream. See package
// bench for the method. With bench.ChildFlag first it is instead the child
// side that serves the relay or the gateway (hidden: the benchmark starts
// it by re-executing this binary).
func benchCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == bench.ChildFlag {
		if err := bench.ServeChild(args, os.Stdin, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "tollgate bench child:", err)
			return 1
		}
		return 0
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		duration   = fs.Duration("duration", 5*time.Second, "measured window of each run")
		warmup     = fs.Duration("warmup", time.Second, "unmeasured warm-up at the start of each run")
		rounds     = fs.Int("rounds", 3, "alternations of direct, relay, tollgate")
		workloads  = fs.String("workloads", strings.Join(bench.WorkloadNames(), ","), "comma-separated workloads to run")
		brokers    = fs.Int("brokers", 1, "kfake brokers")
		partitions = fs.Int("partitions", 3, "partitions of the throughput topics")
		rate       = fs.Int("rate", 1000, "records/s of the latency workload")
		consumeMiB = fs.Int64("consume-mib", 32, "size of the topic the consume workload loops over")
		jsonOut    = fs.Bool("json", false, "print the report as JSON instead of a table")
		cpuprofile = fs.String("cpuprofile", "", "write a CPU profile of the gateway process to this file")
		inProcess  = fs.Bool("in-process", false, "run relay and gateway in this process (no CPU or RSS figures)")
		check      = fs.Bool("check", false, "exit 3 if a target of the issue is missed")
		quiet      = fs.Bool("quiet", false, "no per-run progress on stderr")
	)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tollgate bench [flags]\n\nworkloads: "+strings.Join(bench.WorkloadNames(), ", ")+"\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tollgate bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	opts := bench.Options{
		Duration:     *duration,
		Warmup:       *warmup,
		Rounds:       *rounds,
		Brokers:      *brokers,
		Partitions:   *partitions,
		Rate:         *rate,
		ConsumeBytes: *consumeMiB << 20,
		CPUProfile:   *cpuprofile,
		ChildStderr:  stderr,
	}
	if *warmup == 0 {
		opts.Warmup = -1 // Options reads 0 as "default"
	}
	for _, w := range strings.Split(*workloads, ",") {
		if w = strings.TrimSpace(w); w != "" {
			opts.Workloads = append(opts.Workloads, w)
		}
	}
	if !*quiet {
		opts.Progress = stderr
	}
	if !*inProcess {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(stderr, "tollgate bench: find own executable for the child processes:", err)
			return 1
		}
		opts.Command = func(childArgs []string) *exec.Cmd {
			return exec.Command(exe, append([]string{"bench"}, childArgs...)...)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate bench:", err)
		return 1
	}
	if *jsonOut {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "tollgate bench:", err)
		return 1
	}
	if *check && !rep.Met() {
		return 3
	}
	return 0
}
