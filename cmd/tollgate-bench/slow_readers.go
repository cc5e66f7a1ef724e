package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/tollgate-kafka/tollgate/bench"
)

// slowFlags are --suite slow-readers' own flags (bench/slow_readers.go).
type slowFlags struct {
	conns        *int
	mode         *string
	frameTimeout *time.Duration
	maxInFlight  *int
	waitClosed   *bool
}

func addSlowFlags(fs *flag.FlagSet) slowFlags {
	return slowFlags{
		conns:        fs.Int("slow-conns", 1000, "slow-readers: raw client connections, half reading and half stalled"),
		mode:         fs.String("slow-mode", bench.ModePortPerBroker, "slow-readers: listener mode (port-per-broker or single-port)"),
		frameTimeout: fs.Duration("slow-frame-timeout", 0, "slow-readers: the gateway's frame_timeout (0: its default, 30s)"),
		maxInFlight:  fs.Int("slow-max-in-flight", 0, "slow-readers: the gateway's max_in_flight (0: its default, 100)"),
		waitClosed:   fs.Bool("slow-wait-closed", false, "slow-readers: end each stalled phase once the gateway has closed every stalled connection (write_timeout)"),
	}
}

// slowReadersCmd runs --suite slow-readers: --rounds pairs of a baseline
// and a stalled phase of --duration each (defaults for this suite: 3 and
// 10s); --check exits 3 if the gateway's RSS passed the bound or the kgo
// clients moved nothing while connections stalled.
func (f slowFlags) run(ctx context.Context, tollgateBin, dir string, rounds int, duration time.Duration, set map[string]bool, jsonOut, check, quiet bool, stdout, stderr io.Writer) int {
	bin, err := findTollgate(tollgateBin)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate-bench:", err)
		return 2
	}
	cfg := bench.SlowReadersConfig{Tollgate: bin, Dir: dir, Mode: *f.mode, Conns: *f.conns,
		FrameTimeout: *f.frameTimeout, MaxInFlight: *f.maxInFlight, WaitClosed: *f.waitClosed}
	if set["rounds"] {
		cfg.Rounds = rounds
	}
	if set["duration"] {
		cfg.Phase = duration
	}
	if !quiet {
		cfg.Log = stderr
	}
	rep, err := bench.RunSlowReaders(ctx, cfg)
	return report(rep, err, jsonOut, check, stdout, stderr)
}
