package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// The targets for the gateway, relative to the blind relay (CPU per MB
// from issue 22, which tightened the first issue's 1.25).
const (
	targetThroughput = 0.95     // tollgate/relay records per second, at least
	targetCPU        = 1.10     // tollgate/relay CPU seconds per MB, at most
	targetAddedP50Ms = 0.05     // end-to-end p50 over the relay's, at most
	targetRSSBytes   = 64 << 20 // gateway peak RSS, below
)

// Report is the outcome of Run: every run, and medians across rounds.
type Report struct {
	Brokers        int            `json:"brokers"`
	Partitions     int            `json:"partitions"`
	Rounds         int            `json:"rounds"`
	DurationSec    float64        `json:"duration_sec"`
	WarmupSec      float64        `json:"warmup_sec"`
	Rate           int            `json:"latency_rate"`
	ChildProcesses bool           `json:"child_processes"`
	TCP            string         `json:"tcp,omitempty"` // tcpSetting
	Workloads      []WorkloadInfo `json:"workloads"`
	Runs           []RunResult    `json:"runs"`
	Summary        []Summary      `json:"summary"`
	Comparisons    []Comparison   `json:"comparisons"`
	PeakRSS        []PeakRSS      `json:"peak_rss,omitempty"`
	Targets        []Target       `json:"targets"`
}

// WorkloadInfo names a workload and says what it does.
type WorkloadInfo struct {
	Name string `json:"name"`
	Desc string `json:"description"`
}

// RunResult is one workload over one path in one round, over the measured
// window. MB are 10^6 bytes. Payload is record values; wire is every request
// and response byte the client wrote or read. CPU and RSS are the middle
// process's (nil for direct, or when it runs in-process).
type RunResult struct {
	Workload      string   `json:"workload"`
	Path          Path     `json:"path"`
	Variant       string   `json:"variant,omitempty"` // overhead suites: the gateway configuration
	Round         int      `json:"round"`
	StartupSec    float64  `json:"startup_sec"` // from the client's start to its first record
	Seconds       float64  `json:"seconds"`
	Records       int64    `json:"records"`
	PayloadBytes  int64    `json:"payload_bytes"`
	WireBytes     int64    `json:"wire_bytes"`
	Requests      int64    `json:"requests"` // Kafka requests the clients wrote
	Errors        int64    `json:"errors"`
	Dials         int64    `json:"dials"`
	RecordsPerSec float64  `json:"records_per_sec"`
	MBPerSec      float64  `json:"mb_per_sec"`
	WireMBPerSec  float64  `json:"wire_mb_per_sec"`
	CPUSeconds    *float64 `json:"cpu_seconds,omitempty"`
	CPUMsPerMB    *float64 `json:"cpu_ms_per_mb,omitempty"`
	// BenchCPUMsPerMB is the benchmark process's own CPU per MB in the
	// window: the clients and, in process, kfake. Over loopback the
	// kernel charges a segment's receive to whichever side's system call
	// or softirq sends it, so work moves between the middle process and
	// this one; their sum is the machine's cost per MB.
	BenchCPUMsPerMB *float64 `json:"bench_cpu_ms_per_mb,omitempty"`
	RSSBytes        *int64   `json:"rss_bytes,omitempty"`
	Latency         *Latency `json:"latency,omitempty"`
	// Syscalls is the middle process's system calls in the window by name
	// ("all": every call), with Options.Syscalls.
	Syscalls map[string]int64 `json:"syscalls,omitempty"`
}

// Latency is the latency workload's figures in milliseconds. Samples counts
// records seen by the consumer, Acked records acked, both sent inside the
// window.
type Latency struct {
	Samples int     `json:"samples"`
	Acked   int     `json:"acked"`
	E2EP50  float64 `json:"e2e_p50_ms"`
	E2EP99  float64 `json:"e2e_p99_ms"`
	AckP50  float64 `json:"ack_p50_ms"`
	AckP99  float64 `json:"ack_p99_ms"`
}

// Summary is the median of one workload over one path across rounds (RSS:
// the largest; errors: the sum).
type Summary struct {
	Workload      string   `json:"workload"`
	Path          Path     `json:"path"`
	Variant       string   `json:"variant,omitempty"`
	RecordsPerSec float64  `json:"records_per_sec"`
	MBPerSec      float64  `json:"mb_per_sec"`
	WireMBPerSec  float64  `json:"wire_mb_per_sec"`
	CPUMsPerMB    *float64 `json:"cpu_ms_per_mb,omitempty"`
	RSSBytes      *int64   `json:"rss_bytes,omitempty"`
	Errors        int64    `json:"errors"`
	Latency       *Latency `json:"latency,omitempty"`
}

// Comparison holds the medians of per-round ratios for one workload.
type Comparison struct {
	Workload         string   `json:"workload"`
	GatewayOverRelay float64  `json:"tollgate_over_relay"` // records/s
	RelayOverDirect  float64  `json:"relay_over_direct"`   // records/s
	CPUGatewayRelay  *float64 `json:"cpu_tollgate_over_relay,omitempty"`
	// MachineCPUGatewayRelay is the same for the middle process plus the
	// benchmark process (clients and kfake): over loopback the kernel
	// charges a segment's delivery to whichever side sends it, so work
	// moves between them, and their sum is what the path costs the
	// machine. Reported, not a target.
	MachineCPUGatewayRelay *float64 `json:"machine_cpu_tollgate_over_relay,omitempty"`
	AddedP50Ms             *float64 `json:"added_p50_ms,omitempty"` // tollgate minus relay, end to end
	AddedP99Ms             *float64 `json:"added_p99_ms,omitempty"`
}

// PeakRSS is a middle process's VmHWM at the end of the benchmark.
type PeakRSS struct {
	Path     Path  `json:"path"`
	HWMBytes int64 `json:"hwm_bytes"`
}

// Target is one of the targets, checked.
type Target struct {
	Name  string `json:"name"`
	Goal  string `json:"goal"`
	Value string `json:"value"`
	Pass  bool   `json:"pass"`
}

// Met reports whether every target was checked and met.
func (r *Report) Met() bool {
	for _, t := range r.Targets {
		if !t.Pass {
			return false
		}
	}
	return len(r.Targets) > 0
}

func (r *Report) runsOf(workload string, p Path) []RunResult {
	var out []RunResult
	for _, run := range r.Runs {
		if run.Workload == workload && run.Path == p {
			out = append(out, run)
		}
	}
	return out
}

// run returns the run of workload over p in round, if any.
func (r *Report) run(workload string, p Path, round int) (RunResult, bool) {
	for _, run := range r.Runs {
		if run.Workload == workload && run.Path == p && run.Round == round {
			return run, true
		}
	}
	return RunResult{}, false
}

func (r *Report) summarize() {
	r.Summary, r.Comparisons, r.Targets = nil, nil, nil
	for _, w := range r.Workloads {
		for _, p := range Paths {
			if runs := r.runsOf(w.Name, p); len(runs) > 0 {
				r.Summary = append(r.Summary, summarizeRuns(w.Name, p, runs))
			}
		}
		r.Comparisons = append(r.Comparisons, r.compare(w.Name))
	}
	r.checkTargets()
}

func summarizeRuns(workload string, p Path, runs []RunResult) Summary {
	s := Summary{Workload: workload, Path: p}
	s.RecordsPerSec = medianOf(runs, func(r RunResult) (float64, bool) { return r.RecordsPerSec, true })
	s.MBPerSec = medianOf(runs, func(r RunResult) (float64, bool) { return r.MBPerSec, true })
	s.WireMBPerSec = medianOf(runs, func(r RunResult) (float64, bool) { return r.WireMBPerSec, true })
	if v, ok := medianOK(runs, func(r RunResult) (float64, bool) { return deref(r.CPUMsPerMB) }); ok {
		s.CPUMsPerMB = &v
	}
	for _, r := range runs {
		s.Errors += r.Errors
		if r.RSSBytes != nil && (s.RSSBytes == nil || *r.RSSBytes > *s.RSSBytes) {
			v := *r.RSSBytes
			s.RSSBytes = &v
		}
	}
	if runs[0].Latency != nil {
		lat := func(f func(*Latency) float64) float64 {
			return medianOf(runs, func(r RunResult) (float64, bool) {
				if r.Latency == nil || r.Latency.Samples == 0 {
					return 0, false
				}
				return f(r.Latency), true
			})
		}
		s.Latency = &Latency{
			E2EP50: lat(func(l *Latency) float64 { return l.E2EP50 }),
			E2EP99: lat(func(l *Latency) float64 { return l.E2EP99 }),
			AckP50: lat(func(l *Latency) float64 { return l.AckP50 }),
			AckP99: lat(func(l *Latency) float64 { return l.AckP99 }),
		}
		for _, r := range runs {
			if r.Latency != nil {
				s.Latency.Samples += r.Latency.Samples
				s.Latency.Acked += r.Latency.Acked
			}
		}
	}
	return s
}

// compare computes per-round ratios between adjacent runs and their median.
func (r *Report) compare(workload string) Comparison {
	c := Comparison{Workload: workload}
	var gr, rd, cpu, machine, p50, p99 []float64
	for round := 1; round <= r.Rounds; round++ {
		d, okD := r.run(workload, Direct, round)
		rl, okR := r.run(workload, Relay, round)
		g, okG := r.run(workload, Gateway, round)
		if okR && okG && rl.RecordsPerSec > 0 {
			gr = append(gr, g.RecordsPerSec/rl.RecordsPerSec)
			if rl.CPUMsPerMB != nil && g.CPUMsPerMB != nil && *rl.CPUMsPerMB > 0 {
				cpu = append(cpu, *g.CPUMsPerMB / *rl.CPUMsPerMB)
				if rl.BenchCPUMsPerMB != nil && g.BenchCPUMsPerMB != nil {
					machine = append(machine, (*g.CPUMsPerMB+*g.BenchCPUMsPerMB)/(*rl.CPUMsPerMB+*rl.BenchCPUMsPerMB))
				}
			}
			if rl.Latency != nil && g.Latency != nil && rl.Latency.Samples > 0 && g.Latency.Samples > 0 {
				p50 = append(p50, g.Latency.E2EP50-rl.Latency.E2EP50)
				p99 = append(p99, g.Latency.E2EP99-rl.Latency.E2EP99)
			}
		}
		if okD && okR && d.RecordsPerSec > 0 {
			rd = append(rd, rl.RecordsPerSec/d.RecordsPerSec)
		}
	}
	c.GatewayOverRelay = median(gr)
	c.RelayOverDirect = median(rd)
	if len(cpu) > 0 {
		v := median(cpu)
		c.CPUGatewayRelay = &v
	}
	if len(machine) > 0 {
		v := median(machine)
		c.MachineCPUGatewayRelay = &v
	}
	if len(p50) > 0 {
		a, b := median(p50), median(p99)
		c.AddedP50Ms, c.AddedP99Ms = &a, &b
	}
	return c
}

func (r *Report) checkTargets() {
	for _, c := range r.Comparisons {
		w, _ := findWorkload(c.Workload)
		if w.kind == kindLatency {
			if c.AddedP50Ms != nil {
				r.Targets = append(r.Targets, Target{
					Name: "p50 latency added over relay: " + c.Workload, Goal: fmt.Sprintf("<= %.2f ms", targetAddedP50Ms),
					Value: fmt.Sprintf("%+.3f ms", *c.AddedP50Ms), Pass: *c.AddedP50Ms <= targetAddedP50Ms,
				})
			}
			continue
		}
		if c.GatewayOverRelay > 0 {
			r.Targets = append(r.Targets, Target{
				Name: "throughput tollgate/relay: " + c.Workload, Goal: fmt.Sprintf(">= %.2f", targetThroughput),
				Value: fmt.Sprintf("%.3f", c.GatewayOverRelay), Pass: c.GatewayOverRelay >= targetThroughput,
			})
		}
		if c.CPUGatewayRelay != nil {
			r.Targets = append(r.Targets, Target{
				Name: "CPU per MB tollgate/relay: " + c.Workload, Goal: fmt.Sprintf("<= %.2f", targetCPU),
				Value: fmt.Sprintf("%.3f", *c.CPUGatewayRelay), Pass: *c.CPUGatewayRelay <= targetCPU,
			})
		}
	}
	for _, p := range r.PeakRSS {
		if p.Path == Gateway {
			r.Targets = append(r.Targets, Target{
				Name: "gateway peak RSS (VmHWM)", Goal: fmt.Sprintf("< %d MiB", targetRSSBytes>>20),
				Value: fmt.Sprintf("%.1f MiB", mib(p.HWMBytes)), Pass: p.HWMBytes < targetRSSBytes,
			})
		}
	}
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	return writeJSON(w, r)
}

// WriteTable writes the summary for people.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "tollgate-bench: kfake with %d broker(s), %d partition(s) per throughput topic; %d round(s) of direct -> relay -> tollgate;\n",
		r.Brokers, r.Partitions, r.Rounds)
	fmt.Fprintf(&b, "%.1fs measured after %.1fs warm-up per run; medians across rounds; MB = 10^6 bytes.\n", r.DurationSec, r.WarmupSec)
	if r.ChildProcesses {
		b.WriteString("CPU ms/MB: utime+stime of the relay or gateway process per MB the client moved (requests + responses).\n")
	} else {
		b.WriteString("relay and gateway ran in-process: CPU and RSS not measured.\n")
	}
	if r.TCP != "" {
		fmt.Fprintf(&b, "TCP: %s\n", r.TCP)
	}
	b.WriteString("\n")
	for _, wi := range r.Workloads {
		fmt.Fprintf(&b, "  %-18s  %s\n", wi.Name, wi.Desc)
	}
	b.WriteString("\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tpath\trec/s\tMB/s\twire MB/s\tCPU ms/MB\tRSS MiB\terrors\t")
	for _, wi := range r.Workloads {
		first := true
		for _, s := range r.Summary {
			if s.Workload != wi.Name {
				continue
			}
			name := ""
			if first {
				name, first = wi.Name, false
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.1f\t%s\t%s\t%d\t\n", name, s.Path, s.RecordsPerSec, s.MBPerSec, s.WireMBPerSec,
				optF(s.CPUMsPerMB, "%.3f"), optRSS(s.RSSBytes), s.Errors)
		}
	}
	tw.Flush()

	b.WriteString("\nratios (median of per-round ratios):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\ttollgate/relay\trelay/direct\tCPU/MB tollgate/relay\twith the bench process\t")
	for _, c := range r.Comparisons {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%s\t%s\t\n", c.Workload, c.GatewayOverRelay, c.RelayOverDirect,
			optF(c.CPUGatewayRelay, "%.3f"), optF(c.MachineCPUGatewayRelay, "%.3f"))
	}
	tw.Flush()

	if r.hasLatency() {
		b.WriteString("\nlatency at a fixed rate (ms; e2e = produce call to consumer poll, ack = produce call to ack):\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "workload\tpath\te2e p50\te2e p99\tack p50\tack p99\tsamples\t")
		for _, s := range r.Summary {
			if l := s.Latency; l != nil {
				fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t\n", s.Workload, s.Path, l.E2EP50, l.E2EP99, l.AckP50, l.AckP99, l.Samples)
			}
		}
		tw.Flush()
		for _, c := range r.Comparisons {
			if c.AddedP50Ms != nil {
				fmt.Fprintf(&b, "%s: tollgate adds %+.3f ms at p50, %+.3f ms at p99 over the relay (median of per-round differences)\n",
					c.Workload, *c.AddedP50Ms, *c.AddedP99Ms)
			}
		}
	}
	for _, p := range r.PeakRSS {
		fmt.Fprintf(&b, "\npeak RSS (VmHWM) of the %s process: %.1f MiB", p.Path, mib(p.HWMBytes))
	}
	if len(r.PeakRSS) > 0 {
		b.WriteString("\n")
	}
	writeTargets(&b, r.Targets)
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) hasLatency() bool {
	return slices.ContainsFunc(r.Summary, func(s Summary) bool { return s.Latency != nil })
}

// brief is the one-line progress report of a run.
func (r RunResult) brief() string {
	s := fmt.Sprintf("%9.0f rec/s %7.1f MB/s", r.RecordsPerSec, r.MBPerSec)
	if r.CPUMsPerMB != nil {
		s += fmt.Sprintf("  CPU %.3f ms/MB", *r.CPUMsPerMB)
	}
	if r.BenchCPUMsPerMB != nil {
		s += fmt.Sprintf(" (bench process %.3f)", *r.BenchCPUMsPerMB)
	}
	if r.RSSBytes != nil {
		s += fmt.Sprintf("  RSS %.1f MiB", mib(*r.RSSBytes))
	}
	if r.Latency != nil {
		s += fmt.Sprintf("  e2e p50 %.3f p99 %.3f ms", r.Latency.E2EP50, r.Latency.E2EP99)
	}
	s += fmt.Sprintf("  (first record after %.0f ms)", r.StartupSec*1e3)
	s += syscallsBrief(r)
	if r.Errors > 0 {
		s += fmt.Sprintf("  %d errors", r.Errors)
	}
	return s
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func medianOK(runs []RunResult, f func(RunResult) (float64, bool)) (float64, bool) {
	var xs []float64
	for _, r := range runs {
		if v, ok := f(r); ok {
			xs = append(xs, v)
		}
	}
	return median(xs), len(xs) > 0
}

func medianOf(runs []RunResult, f func(RunResult) (float64, bool)) float64 {
	v, _ := medianOK(runs, f)
	return v
}

func deref(p *float64) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

func optF(p *float64, format string) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf(format, *p)
}

func optRSS(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", mib(*p))
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// writeTargets writes the pass/fail table of the targets.
func writeTargets(b *strings.Builder, targets []Target) {
	if len(targets) == 0 {
		return
	}
	b.WriteString("\ntargets (from the issue):\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, t := range targets {
		verdict := "FAIL"
		if t.Pass {
			verdict = "pass"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", verdict, t.Name, t.Value, t.Goal)
	}
	tw.Flush()
}

// writeJSON writes a report as indented JSON.
func writeJSON(w io.Writer, report any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(report); err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	return nil
}
