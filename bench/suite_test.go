package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/policy"
)

// TestSuiteConfigs checks the files the suites write: each parses and
// validates, each policy compiles, the rule counts are what the variant
// names say, API-key rules look at no request body, and topic rules all
// name topics.
func TestSuiteConfigs(t *testing.T) {
	for _, s := range []Suite{SuitePolicy, SuiteAudit} {
		vs, err := suiteVariants(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			src := v.configYAML([]string{"127.0.0.1:1", "127.0.0.1:2"}, filepath.Join(t.TempDir(), "audit.log"))
			cfg, err := configs.Parse([]byte(src), v.name+".yaml")
			if err != nil {
				t.Errorf("%s/%s: %v\n%s", s, v.name, err, src)
				continue
			}
			if _, _, err := policy.Compile(cfg.Policy); err != nil {
				t.Errorf("%s/%s: compile policy: %v", s, v.name, err)
			}
			if got := len(cfg.Policy.Rules); got != len(v.rules) {
				t.Errorf("%s/%s: %d rules loaded, %d written", s, v.name, got, len(v.rules))
			}
			if want := v.audit; want != "" && cfg.Audit.Level != want {
				t.Errorf("%s/%s: audit level %q, want %q", s, v.name, cfg.Audit.Level, want)
			}
			if cfg.Audit.Enabled() && cfg.Audit.Sink.Stdout() {
				t.Errorf("%s/%s: audit to stdout would corrupt the child's info line", s, v.name)
			}
			for i, r := range cfg.Policy.Rules {
				isTopic := strings.HasPrefix(v.name, "topic-")
				if !isTopic && r.Match.HasResourceConditions() {
					t.Errorf("%s/%s: rule %d (%s) looks inside request bodies", s, v.name, i, r.Name)
				}
				if isTopic && r.Match.Topic == nil {
					t.Errorf("%s/%s: rule %d (%s) has no topic condition", s, v.name, i, r.Name)
				}
			}
		}
	}
	names := map[string]int{"none": 0, "api-10": 10, "api-100": 100, "topic-100": 100}
	vs, _ := suiteVariants(SuitePolicy)
	for _, v := range vs {
		if n, ok := names[v.name]; !ok || n != len(v.rules) {
			t.Errorf("variant %s has %d rules", v.name, len(v.rules))
		}
	}
}

func TestUnknownSuite(t *testing.T) {
	for _, s := range []Suite{"nope", SuiteGateway, SuiteBroker} {
		if _, err := RunSuite(context.Background(), s, Options{}); !errors.Is(err, ErrUnknownSuite) {
			t.Errorf("RunSuite(%q) = %v, want ErrUnknownSuite", s, err)
		}
	}
}

func suiteSmokeOptions(t *testing.T) Options {
	opts := smokeOptions(t)
	opts.WorkDir = t.TempDir()
	return opts
}

// checkSuiteRuns checks that every workload ran through every variant
// with records, no errors and (with child processes) a measured gateway.
func checkSuiteRuns(t *testing.T, rep *SuiteReport, children bool) {
	t.Helper()
	if want := len(rep.Workloads) * len(rep.Variants) * rep.Rounds; len(rep.Runs) != want {
		t.Fatalf("%d runs, want %d", len(rep.Runs), want)
	}
	for _, r := range rep.Runs {
		name := r.Workload + "/" + r.Variant
		if r.Records <= 0 || r.Dials <= 0 || r.Errors != 0 {
			t.Errorf("%s: records %d dials %d errors %d", name, r.Records, r.Dials, r.Errors)
		}
		if children != (r.CPUSeconds != nil) {
			t.Errorf("%s: CPU %v with child processes %v", name, r.CPUSeconds, children)
		}
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Variants {
		if !strings.Contains(table.String(), v.Name) {
			t.Errorf("table lacks variant %s:\n%s", v.Name, table.String())
		}
	}
	if testing.Verbose() {
		t.Logf("\n%s", table.String())
	}
}

// TestPolicySuiteSmoke runs the policy suite with tiny windows and child
// processes, and checks that each gateway ran the policy its file holds:
// the probe is denied exactly where rules are loaded, and the benchmark
// clients were never denied.
func TestPolicySuiteSmoke(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU and RSS come from /proc")
	}
	opts := suiteSmokeOptions(t)
	opts.Command = testCommand
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := RunSuite(ctx, SuitePolicy, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkSuiteRuns(t, rep, true)
	wantRules := map[string]int{"none": 0, "api-10": 10, "api-100": 100, "topic-100": 100}
	for _, v := range rep.Variants {
		if v.Rules != wantRules[v.Name] {
			t.Errorf("%s: %d rules", v.Name, v.Rules)
		}
		cfg, err := configs.Load(v.ConfigFile)
		if err != nil || len(cfg.Policy.Rules) != v.Rules {
			t.Errorf("%s: config file %s: %v", v.Name, v.ConfigFile, err)
		}
		wantDenied := v.Rules > 0
		if !v.ProbeOK || strings.HasPrefix(v.Probe, "denied") != wantDenied {
			t.Errorf("%s: probe %q ok %v, want denied %v", v.Name, v.Probe, v.ProbeOK, wantDenied)
		}
		if v.Stats == nil || !v.Stats.Metrics || v.Stats.Requests <= 0 || v.Stats.PolicyRules != v.Rules {
			t.Errorf("%s: stats %+v", v.Name, v.Stats)
			continue
		}
		// The API-key rule sets deny the probe's Produce in the gateway's
		// request path, which counts it; the benchmark's own requests
		// must never be denied.
		if strings.HasPrefix(v.Name, "api-") && v.Stats.Denials != 1 {
			t.Errorf("%s: %v denials, want exactly the probe's", v.Name, v.Stats.Denials)
		}
		if v.Name == "none" && v.Stats.Denials != 0 {
			t.Errorf("none: %v denials", v.Stats.Denials)
		}
	}
	if want := 3 * len(rep.Workloads); len(rep.Ratios) != want {
		t.Errorf("%d ratios, want %d", len(rep.Ratios), want)
	}
	if want := 2 * len(rep.Workloads); len(rep.Targets) != want {
		t.Errorf("%d targets, want %d", len(rep.Targets), want)
	}
}

// TestAuditSuiteSmoke runs the audit suite with tiny windows and child
// processes, and checks the sinks: nothing for off, header-only records
// for summary, records with topics for full.
func TestAuditSuiteSmoke(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU and RSS come from /proc")
	}
	opts := suiteSmokeOptions(t)
	opts.Command = testCommand
	opts.Workloads = []string{"produce-1k-acks1"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := RunSuite(ctx, SuiteAudit, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkSuiteRuns(t, rep, true)
	for _, v := range rep.Variants {
		file := filepath.Join(opts.WorkDir, v.Name, "audit.log")
		data, err := os.ReadFile(file)
		switch v.Name {
		case "off", "no-metrics":
			if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: audit file %s: err %v, want none", v.Name, file, err)
			}
		case "summary", "full":
			if err != nil || len(data) == 0 || int64(len(data)) != v.AuditBytes {
				t.Errorf("%s: audit file %d bytes (report %d), err %v", v.Name, len(data), v.AuditBytes, err)
				continue
			}
			hasTopics := bytes.Contains(data, []byte(`"topics":[{"name":"bench-produce-1k-acks1-`))
			if hasTopics != (v.Name == "full") {
				t.Errorf("%s: records with topics %v", v.Name, hasTopics)
			}
			if v.Stats == nil || v.Stats.AuditWritten <= 0 {
				t.Errorf("%s: stats %+v", v.Name, v.Stats)
			}
		}
		if v.Stats == nil || v.Stats.Metrics != (v.Name != "no-metrics") {
			t.Errorf("%s: stats %+v", v.Name, v.Stats)
		}
	}
	// summary/off, full/off, off/no-metrics.
	if len(rep.Ratios) != 3 || len(rep.Targets) != 3 {
		t.Errorf("%d ratios, %d targets", len(rep.Ratios), len(rep.Targets))
	}
}

// TestAuditSuiteInProcess runs the gateways in this process: the audit
// sink is still checked, and no CPU figures are invented.
func TestAuditSuiteInProcess(t *testing.T) {
	opts := suiteSmokeOptions(t)
	opts.Workloads = []string{"consume"}
	rep, err := RunSuite(context.Background(), SuiteAudit, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkSuiteRuns(t, rep, false)
	for _, v := range rep.Variants {
		if (v.AuditBytes > 0) != (v.Name == "summary" || v.Name == "full") {
			t.Errorf("%s: %d audit bytes", v.Name, v.AuditBytes)
		}
	}
}

// TestSuiteRatios checks the per-round ratios, their median and range, and
// the targets against hand-computed values.
func TestSuiteRatios(t *testing.T) {
	vs, err := suiteVariants(SuiteAudit)
	if err != nil {
		t.Fatal(err)
	}
	rep := &SuiteReport{Suite: SuiteAudit, Rounds: 3, Workloads: []WorkloadInfo{{Name: "consume"}}}
	// rec/s per round for off, summary, full, no-metrics.
	rates := [][4]float64{{100, 96, 80, 100}, {200, 180, 190, 220}, {100, 99, 90, 100}}
	for round, rs := range rates {
		for i, v := range vs {
			rep.Runs = append(rep.Runs, RunResult{Workload: "consume", Path: Gateway, Variant: v.name, Round: round + 1, RecordsPerSec: rs[i]})
		}
	}
	rep.summarize(vs)
	got := map[string]VariantRatio{}
	for _, r := range rep.Ratios {
		got[r.Variant+"/"+r.Versus] = r
	}
	// summary/off: 0.96, 0.90, 0.99 -> median 0.96, below 0.95? no: pass.
	if r := got["summary/off"]; r.Throughput != 0.96 || r.Min != 0.90 || r.Max != 0.99 || r.Rounds != 3 {
		t.Errorf("summary/off = %+v", r)
	}
	// full/off: 0.80, 0.95, 0.90 -> 0.90.
	if r := got["full/off"]; r.Throughput != 0.90 {
		t.Errorf("full/off = %+v", r)
	}
	// off/no-metrics: 1.0, 200/220, 1.0 -> 1.0.
	if r := got["off/no-metrics"]; r.Throughput != 1.0 {
		t.Errorf("off/no-metrics = %+v", r)
	}
	pass := map[string]bool{}
	for _, tg := range rep.Targets {
		pass[tg.Name] = tg.Pass
	}
	if !pass["throughput summary/off: consume"] || !pass["throughput full/off: consume"] {
		t.Errorf("targets %+v", rep.Targets)
	}
	if !rep.Met() {
		t.Error("Met() false with every target passed")
	}
	// A summary median below 0.95 fails.
	rep.Runs[1].RecordsPerSec = 90 // round 1 summary: 0.90 -> ratios 0.90, 0.90, 0.99
	rep.summarize(vs)
	if rep.Met() {
		t.Errorf("Met() true with summary/off at 0.90: %+v", rep.Targets)
	}
}

// TestSinglePortTargets: the single-port suite checks issue 22's targets
// — consume >= 0.95 and produce >= 0.9 of port-per-broker's throughput,
// peak RSS <= 1.5x — each against its own goal.
func TestSinglePortTargets(t *testing.T) {
	vs, err := suiteVariants(SuiteSinglePort)
	if err != nil {
		t.Fatal(err)
	}
	rep := &SuiteReport{Suite: SuiteSinglePort, Rounds: 1,
		Workloads: []WorkloadInfo{{Name: "consume"}, {Name: "produce-1k-acksall"}},
		Variants:  []VariantInfo{{Name: "port-per-broker", PeakRSSBytes: 20 << 20}, {Name: "single-port", PeakRSSBytes: 32 << 20}}}
	// single-port at 0.92 of port-per-broker in both workloads.
	for _, w := range []string{"consume", "produce-1k-acksall"} {
		rep.Runs = append(rep.Runs,
			RunResult{Workload: w, Path: Gateway, Variant: "port-per-broker", Round: 1, RecordsPerSec: 100},
			RunResult{Workload: w, Path: Gateway, Variant: "single-port", Round: 1, RecordsPerSec: 92})
	}
	rep.summarize(vs)
	pass := map[string]bool{}
	for _, tg := range rep.Targets {
		pass[tg.Name] = tg.Pass
	}
	want := map[string]bool{
		"throughput single-port/port-per-broker: consume":            false, // 0.92 < 0.95
		"throughput single-port/port-per-broker: produce-1k-acksall": true,  // 0.92 >= 0.9
		"peak RSS single-port/port-per-broker":                       false, // 1.6 > 1.5
	}
	for name, p := range want {
		if got, ok := pass[name]; !ok || got != p {
			t.Errorf("target %q: pass %v (present %v), want %v; all %+v", name, got, ok, p, rep.Targets)
		}
	}
}
