//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tollgate-kafka/tollgate/bench/netimpair"
)

// The network faults (issue 23): the upstream, a three-broker kfake in
// this process, listens in a network namespace behind a veth pair
// (package netimpair); the gateway and the clients stay in this
// namespace, so the only traffic on the link is the gateway's to its
// upstream (in mode direct, the clients' own). The link is impaired for a
// while and then healed, and the fault checker of faults.go judges the
// records.
//
// How an impairment is made depends on the kernel: tc netem where it has
// netem, otherwise an NFQUEUE delayer in this process (delay, jitter,
// reordering) and nftables drops at the link (loss); a blackhole is always
// nftables. FaultResult.Impairment says which, and what it measured
// (packets delayed, reordered, dropped).

// Network fault names.
const (
	FaultNetDelay     = "net-delay"     // every packet held 50 ms ± 10 ms, each direction, for NetFor
	FaultNetLoss      = "net-loss"      // 1% of packets dropped, each direction, for NetFor
	FaultNetReorder   = "net-reorder"   // 25% of packets at once, the others held 50 ms, each direction, for NetFor
	FaultNetBlackhole = "net-blackhole" // every packet dropped both ways for BlackholeFor
)

// NetFaultNames are the network faults, in run order (appended to
// FaultNames).
var NetFaultNames = []string{FaultNetDelay, FaultNetLoss, FaultNetReorder, FaultNetBlackhole}

func init() { FaultNames = append(FaultNames, NetFaultNames...) }

// The impairments' sizes.
const (
	netDelay        = 50 * time.Millisecond
	netJitter       = 10 * time.Millisecond
	netLossPct      = 1
	netReorderPct   = 25
	netForDefault   = 5 * time.Second
	blackholeForDef = 10 * time.Second
)

func isNetFault(f string) bool { return slices.Contains(NetFaultNames, f) }

// NetFaultsAvailable reports why the network faults cannot run here (nil
// when they can): they need root, namespaces and veth.
func NetFaultsAvailable() error {
	l, err := netimpair.New()
	if err != nil {
		return err
	}
	return l.Close()
}

// runNetFault is RunFault for the network faults.
func runNetFault(ctx context.Context, cfg FaultsConfig, fault, mode string) (FaultResult, error) {
	res := FaultResult{Fault: fault, Mode: mode, Cycles: cfg.Cycles}
	netFor, holeFor := cfg.NetFor, cfg.BlackholeFor
	if netFor <= 0 {
		netFor = netForDefault
	}
	if holeFor <= 0 {
		holeFor = blackholeForDef
	}
	ctx, cancel := context.WithTimeout(ctx, faultRunBound)
	defer cancel()
	link, err := netimpair.New()
	if errors.Is(err, netimpair.ErrUnavailable) {
		res.Errors = append(res.Errors, "not run: "+err.Error())
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("faults: %w", err)
	}
	t0 := time.Now()
	phase := func(what string) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "faults: %s / %s: %s at +%v\n", fault, mode, what, time.Since(t0).Round(time.Millisecond))
		}
	}
	defer func() { link.Close(); phase("link removed") }()
	dir, err := os.MkdirTemp(cfg.Dir, fault+"-"+mode+"-")
	if err != nil {
		return res, fmt.Errorf("faults: %w", err)
	}
	env := &faultEnv{cfg: cfg, mode: mode, dir: dir, topic: "faults"}
	defer func() { env.close(); phase("clients, gateway and upstream closed") }() // before link.Close: the processes go first

	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(cfg.Partitions, env.topic), kfake.ListenFn(link.Listen))
	if err != nil {
		return res, fmt.Errorf("faults: kfake in namespace %s: %w", link.NS, err)
	}
	env.kfake = c
	upstreams := c.ListenAddrs()
	if mode == ModeDirect {
		env.seed = strings.Join(upstreams, ",")
	} else if err := env.startGateway(ctx, upstreams); err != nil {
		return res, err
	}
	w, err := env.startWork(ctx)
	if err != nil {
		return res, err
	}
	fail := func(format string, a ...any) {
		res.Errors = append(res.Errors, fmt.Sprintf(format, a...))
	}
	hold := func() bool {
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
	phase("traffic started")
	if !hold() {
		fail("no records acknowledged before the fault")
	}
	phase("held")
	var stats []string
	for cycle := 0; cycle < cfg.Cycles && len(res.Errors) == 0; cycle++ {
		var a *netimpair.Impairment
		var err error
		lasts := netFor
		switch fault {
		case FaultNetDelay:
			a, err = link.Delay(netDelay, netJitter)
		case FaultNetLoss:
			a, err = link.Loss(netLossPct)
		case FaultNetReorder:
			a, err = link.Reorder(netDelay, netReorderPct)
		case FaultNetBlackhole:
			a, err = link.Blackhole()
			lasts = holeFor
		}
		if err != nil {
			fail("impair: %v", err)
			break
		}
		res.Impairment = a.Method
		start := time.Now()
		acks0 := w.acks.Load()
		time.Sleep(lasts) // the fault itself: the link stays impaired this long
		during := w.acks.Load() - acks0
		s, err := link.Heal(a)
		if err != nil {
			fail("heal: %v", err)
			break
		}
		end := time.Now()
		phase("healed")
		stats = append(stats, fmt.Sprintf("cycle %d: %v impaired, %d records acknowledged meanwhile, %s", cycle+1, lasts, during, s))
		d, ok := w.recovery(ctx, end)
		if !ok {
			fail("no produce and consume succeeded after the fault within %v", faultRunBound)
			break
		}
		res.Recovery = max(res.Recovery, d)
		res.Outage = max(res.Outage, end.Sub(start)+d)
		phase("recovered")
		if !hold() {
			fail("traffic did not resume after fault %d", cycle+1)
		}
		phase("held")
	}
	finishStart := time.Now()
	w.finish(ctx, &res)
	stats = append(stats, fmt.Sprintf("check (flush, the group's catch-up, the final read) %v", time.Since(finishStart).Round(time.Millisecond)))
	if len(stats) > 0 {
		res.Impairment += "; " + strings.Join(stats, "; ")
	}
	if !res.OK() && cfg.Log != nil {
		fmt.Fprintf(cfg.Log, "faults: %s / %s failed: %+v\ngateway log (last lines):\n%s\nthe link:\n%s\n", fault, mode, res, env.gwLogs(), link.Diagnose())
	}
	return res, nil
}
