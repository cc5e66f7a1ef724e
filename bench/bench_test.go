package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/internal/congestion"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// childEnv marks a re-execution of the test binary as a bench child.
const childEnv = "TOLLGATE_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := ServeChild(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString("bench test child: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testCommand runs the child side in a copy of this test binary.
func testCommand(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	return cmd
}

func smokeOptions(t *testing.T) Options {
	var logs bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("children's stderr:\n%s", logs.String())
		}
	})
	// Windows long enough that a pause of a loaded, race-instrumented CI
	// machine does not leave one empty (the assertions need records moved).
	return Options{
		Duration:     time.Second,
		Warmup:       300 * time.Millisecond,
		Rounds:       1,
		Partitions:   2,
		Rate:         500,
		ConsumeBytes: 1 << 20,
		ChildStderr:  &logs,
	}
}

// TestSmoke runs every workload over every path once, with the relay and
// the gateway in child processes, and checks that records flowed on each
// path through the process in the middle.
func TestSmoke(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU and RSS come from /proc")
	}
	opts := smokeOptions(t)
	opts.Command = testCommand
	// --tcp-congestion reaches both children (a flag either child did not
	// take would fail it; TestRelayTCPCongestion reads the sockets back).
	if _, alt, _, err := congestion.Alternative(); err == nil {
		opts.TCPCongestion = alt
	}
	var progress bytes.Buffer
	opts.Progress = &progress
	defer func() { t.Logf("progress:\n%s", progress.String()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if opts.TCPCongestion != "" && !strings.Contains(rep.TCP, "own sockets: "+opts.TCPCongestion) {
		t.Errorf("report's TCP line %q does not name --tcp-congestion %s", rep.TCP, opts.TCPCongestion)
	}
	if want := len(workloads) * len(Paths); len(rep.Runs) != want {
		t.Fatalf("%d runs, want %d", len(rep.Runs), want)
	}
	var gatewayCPU float64
	for _, r := range rep.Runs {
		name := r.Workload + "/" + string(r.Path)
		if r.Records <= 0 || r.PayloadBytes <= 0 || r.WireBytes <= 0 {
			t.Errorf("%s: records %d payload %d wire %d: nothing flowed", name, r.Records, r.PayloadBytes, r.WireBytes)
		}
		// Every dial went through the path's route (a dial off it fails),
		// so a client that dialed and moved records moved them through
		// the relay or the gateway.
		if r.Dials <= 0 {
			t.Errorf("%s: the client dialed nothing", name)
		}
		if r.Errors != 0 {
			t.Errorf("%s: %d errors", name, r.Errors)
		}
		if r.BenchCPUMsPerMB == nil || *r.BenchCPUMsPerMB < 0 {
			t.Errorf("%s: the benchmark process's own CPU was not measured (%v)", name, r.BenchCPUMsPerMB)
		}
		switch r.Path {
		case Direct:
			if r.CPUSeconds != nil || r.RSSBytes != nil {
				t.Errorf("%s: CPU or RSS reported for a path with nothing in the middle", name)
			}
		default:
			if r.CPUSeconds == nil || r.RSSBytes == nil || *r.RSSBytes <= 0 {
				t.Errorf("%s: CPU %v RSS %v: the middle process was not measured", name, r.CPUSeconds, r.RSSBytes)
			}
			if r.Path == Gateway && r.CPUSeconds != nil {
				gatewayCPU += *r.CPUSeconds
			}
		}
		if r.Workload == "latency" && (r.Latency == nil || r.Latency.Samples == 0 || r.Latency.E2EP50 <= 0) {
			t.Errorf("%s: no latency samples: %+v", name, r.Latency)
		}
	}
	if gatewayCPU <= 0 {
		t.Errorf("the gateway process used no CPU over all its runs: traffic did not go through it")
	}
	var hwm bool
	for _, p := range rep.PeakRSS {
		hwm = hwm || (p.Path == Gateway && p.HWMBytes > 0)
	}
	if !hwm {
		t.Errorf("no peak RSS for the gateway: %+v", rep.PeakRSS)
	}
	if len(rep.Comparisons) != len(workloads) || len(rep.Targets) == 0 {
		t.Errorf("%d comparisons, %d targets", len(rep.Comparisons), len(rep.Targets))
	}
	for _, c := range rep.Comparisons {
		if c.MachineCPUGatewayRelay == nil || *c.MachineCPUGatewayRelay <= 0 {
			t.Errorf("%s: no CPU per MB ratio with the benchmark process (%v)", c.Workload, c.MachineCPUGatewayRelay)
		}
	}

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tollgate/relay", "e2e p50", "produce-1k-acks1", "targets"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Runs) != len(rep.Runs) {
		t.Errorf("JSON round trip: %v, %d runs", err, len(back.Runs))
	}
	if testing.Verbose() {
		t.Logf("\n%s", table.String())
	}
}

// TestInProcess runs one workload with the relay and the gateway in this
// process: records flow, and no CPU figures are invented.
func TestInProcess(t *testing.T) {
	opts := smokeOptions(t)
	opts.Workloads = []string{"produce-100b"}
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != len(Paths) {
		t.Fatalf("%d runs, want %d", len(rep.Runs), len(Paths))
	}
	for _, r := range rep.Runs {
		if r.Records <= 0 || r.Dials <= 0 {
			t.Errorf("%s: records %d dials %d", r.Path, r.Records, r.Dials)
		}
		if r.CPUSeconds != nil {
			t.Errorf("%s: CPU reported for an in-process run", r.Path)
		}
	}
}

func TestUnknownWorkload(t *testing.T) {
	_, err := Run(context.Background(), Options{Workloads: []string{"produce-1k-acks1", "nope"}})
	if !errors.Is(err, ErrUnknownWorkload) {
		t.Fatalf("err = %v, want ErrUnknownWorkload", err)
	}
}

// TestRoutes checks that each path's dialer refuses to leave its path.
func TestRoutes(t *testing.T) {
	b := &bencher{opts: Options{ChildStderr: &bytes.Buffer{}}, upstreams: []string{"127.0.0.1:1"}}
	b.opts.setDefaults()
	if err := b.startPaths(); err != nil {
		t.Fatal(err)
	}
	defer b.stopPaths()
	cases := []struct {
		path    Path
		addr    string
		allowed bool
	}{
		{Direct, "127.0.0.1:1", true},
		{Direct, "127.0.0.1:2", false},
		{Relay, "127.0.0.1:1", true},
		{Relay, "127.0.0.1:2", false},
		{Gateway, "127.0.0.1:1", false},
		{Gateway, "127.0.0.1:2", true},
	}
	for _, c := range cases {
		var e *pathEnv
		for _, p := range b.paths {
			if p.path == c.path {
				e = p
			}
		}
		to, err := e.route(c.addr)
		if c.allowed != (err == nil) {
			t.Errorf("%s dialing %s: err %v, allowed %v", c.path, c.addr, err, c.allowed)
		}
		if err != nil && !errors.Is(err, errOffRoute) {
			t.Errorf("%s dialing %s: err %v is not errOffRoute", c.path, c.addr, err)
		}
		if c.path == Relay && err == nil && to == c.addr {
			t.Errorf("relay route left %s unchanged", c.addr)
		}
	}
}

func TestSummary(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rep := &Report{Rounds: 3, Workloads: []WorkloadInfo{{Name: "produce-100b"}, {Name: "latency"}}}
	for round, rs := range [][3]float64{{100, 90, 81}, {100, 80, 80}, {100, 100, 99}} {
		for i, p := range Paths {
			r := RunResult{Workload: "produce-100b", Path: p, Round: round + 1, RecordsPerSec: rs[i]}
			if p == Relay {
				r.CPUMsPerMB, r.BenchCPUMsPerMB = f(1), f(3)
			}
			if p == Gateway {
				r.CPUMsPerMB, r.BenchCPUMsPerMB = f(1.5), f(2.5)
			}
			rep.Runs = append(rep.Runs, r)
		}
		for i, p := range Paths {
			rep.Runs = append(rep.Runs, RunResult{Workload: "latency", Path: p, Round: round + 1, RecordsPerSec: 500,
				Latency: &Latency{Samples: 10, E2EP50: 1 + 0.01*float64(i*(round+1)), E2EP99: 2}})
		}
	}
	rep.PeakRSS = []PeakRSS{{Path: Gateway, HWMBytes: 20 << 20}}
	rep.summarize()

	c := rep.Comparisons[0]
	// tollgate/relay per round: 0.9, 1.0, 0.99 -> median 0.99.
	if c.GatewayOverRelay != 0.99 {
		t.Errorf("tollgate/relay = %v, want 0.99", c.GatewayOverRelay)
	}
	if c.RelayOverDirect != 0.9 {
		t.Errorf("relay/direct = %v, want 0.9", c.RelayOverDirect)
	}
	if c.CPUGatewayRelay == nil || *c.CPUGatewayRelay != 1.5 {
		t.Errorf("CPU ratio = %v, want 1.5", c.CPUGatewayRelay)
	}
	// (1.5+2.5) / (1+3): the gateway's extra was the bench process's saving.
	if c.MachineCPUGatewayRelay == nil || *c.MachineCPUGatewayRelay != 1 {
		t.Errorf("machine CPU ratio = %v, want 1", c.MachineCPUGatewayRelay)
	}
	lc := rep.Comparisons[1]
	// tollgate minus relay p50 per round: 0.01, 0.02, 0.03 -> median 0.02.
	if lc.AddedP50Ms == nil || *lc.AddedP50Ms < 0.0199 || *lc.AddedP50Ms > 0.0201 {
		t.Errorf("added p50 = %v, want 0.02", lc.AddedP50Ms)
	}
	verdicts := map[string]bool{}
	for _, tg := range rep.Targets {
		verdicts[tg.Name] = tg.Pass
	}
	want := map[string]bool{
		"throughput tollgate/relay: produce-100b": true,
		"CPU per MB tollgate/relay: produce-100b": false,
		"p50 latency added over relay: latency":   true,
		"gateway peak RSS (VmHWM)":                true,
	}
	for name, pass := range want {
		got, ok := verdicts[name]
		if !ok || got != pass {
			t.Errorf("target %q: got %v (present %v), want %v; all: %+v", name, got, ok, pass, rep.Targets)
		}
	}
	if rep.Met() {
		t.Error("Met() with a failed target")
	}
	if s := rep.Summary[0]; s.Path != Direct || s.RecordsPerSec != 100 {
		t.Errorf("first summary %+v", s)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
	if p := percentileMs(ds, 0.5); p != 3 {
		t.Errorf("p50 = %v, want 3", p)
	}
	if p := percentileMs(ds, 0.99); p != 5 {
		t.Errorf("p99 = %v, want 5", p)
	}
	if p := percentileMs(nil, 0.5); p != 0 {
		t.Errorf("p50 of nothing = %v", p)
	}
}

func TestReadProcSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	u, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.rssBytes <= 0 || u.hwmBytes < u.rssBytes {
		t.Errorf("rss %d hwm %d", u.rssBytes, u.hwmBytes)
	}
	// Burn some CPU and see the counter move.
	start := time.Now()
	x := 0
	for time.Since(start) < 100*time.Millisecond {
		x++
	}
	u2, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u2.cpuSeconds <= u.cpuSeconds {
		t.Errorf("cpu did not advance: %v -> %v (%d spins)", u.cpuSeconds, u2.cpuSeconds, x)
	}
}

// TestCreateTopicSpreadsLeaders: the bench's topics have their leaders
// on kfake's brokers in turn, not where kfake put them at random, so
// every run spreads the work the same way.
func TestCreateTopicSpreadsLeaders(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	b := &bencher{opts: Options{Brokers: 3}, upstreams: c.ListenAddrs(), cluster: c, admin: kadm.NewClient(cl)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 4 { // kfake's random placement matches p mod 3 for 6 partitions once in 729
		topic := fmt.Sprintf("spread-%d", i)
		if err := b.createTopic(ctx, topic, 6, nil); err != nil {
			t.Fatal(err)
		}
		td, err := b.admin.ListTopics(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		for p, pd := range td[topic].Partitions {
			if pd.Leader != p%3 {
				t.Errorf("%s[%d]: leader %d, want %d", topic, p, pd.Leader, p%3)
			}
		}
	}
}

// TestUpstreamRetention: the benchmark's produce topics keep only their
// last produceRetentionBytes a partition, and the upstream applies it on
// its own while producers write (log.cleaner.backoff.ms), so a produce run
// does not hold everything it wrote in the benchmark process's memory.
func TestUpstreamRetention(t *testing.T) {
	c, err := newUpstream(1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // what is produced is what is kept
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	b := &bencher{opts: Options{Brokers: 1, Partitions: 1}, upstreams: c.ListenAddrs(), cluster: c, admin: kadm.NewClient(cl)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	topic, err := b.topicFor(ctx, workloads[0], &pathEnv{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := b.admin.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rc.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := configValue(got.Configs, "retention.bytes"); v != fmt.Sprint(produceRetentionBytes) {
		t.Errorf("%s: retention.bytes %q, want %d", topic, v, produceRetentionBytes)
	}

	// The same on a small scale: 1 MiB segments and retention, 4 MiB
	// produced; the log start offset moves without anyone asking.
	one := fmt.Sprint(1 << 20)
	if err := b.createTopic(ctx, "trimmed", 1, map[string]*string{"retention.bytes": &one, "segment.bytes": &one}); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 64<<10)
	for range 64 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "trimmed", Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for {
		starts, err := b.admin.ListStartOffsets(ctx, "trimmed")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := starts.Lookup("trimmed", 0); ok && o.Err == nil && o.Offset > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the log start offset of a topic 4× over its retention.bytes did not move: %v", starts)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func configValue(cs []kadm.Config, name string) string {
	for _, c := range cs {
		if c.Key == name && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}
