package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// SuiteReport is the outcome of RunSuite.
type SuiteReport struct {
	Suite          Suite          `json:"suite"`
	Brokers        int            `json:"brokers"`
	Partitions     int            `json:"partitions"`
	Rounds         int            `json:"rounds"`
	DurationSec    float64        `json:"duration_sec"`
	WarmupSec      float64        `json:"warmup_sec"`
	ChildProcesses bool           `json:"child_processes"`
	LoadAvgStart   []float64      `json:"loadavg_start,omitempty"` // 1, 5, 15 min
	TCP            string         `json:"tcp,omitempty"`           // tcpSetting
	LoadAvgEnd     []float64      `json:"loadavg_end,omitempty"`
	Workloads      []WorkloadInfo `json:"workloads"`
	Variants       []VariantInfo  `json:"variants"`
	Runs           []RunResult    `json:"runs"`
	Summary        []Summary      `json:"summary"`
	Ratios         []VariantRatio `json:"ratios"`
	Targets        []Target       `json:"targets"`
}

// VariantInfo is one gateway configuration of a suite and the evidence
// that it was in force.
type VariantInfo struct {
	Name       string `json:"name"`
	Desc       string `json:"description"`
	ConfigFile string `json:"config_file"`
	Rules      int    `json:"rules"`
	Audit      string `json:"audit"`
	Metrics    bool   `json:"metrics"`
	Profiled   bool   `json:"profiled,omitempty"`
	// Probe is what the policy probe got ("accepted", "denied: ..."), and
	// ProbeOK whether that is what the variant's rules call for.
	Probe   string `json:"probe,omitempty"`
	ProbeOK bool   `json:"probe_ok,omitempty"`
	// AuditFiles and AuditBytes are what the audit sink left (rotated
	// files included).
	AuditFiles   int         `json:"audit_files"`
	AuditBytes   int64       `json:"audit_bytes"`
	Stats        *ChildStats `json:"stats,omitempty"`
	PeakRSSBytes int64       `json:"peak_rss_bytes,omitempty"`
}

// VariantRatio is the median of per-round ratios of a variant over the
// variant it is compared with, for one workload.
type VariantRatio struct {
	Workload   string   `json:"workload"`
	Variant    string   `json:"variant"`
	Versus     string   `json:"versus"`
	Throughput float64  `json:"throughput"` // records/s
	CPUPerMB   *float64 `json:"cpu_per_mb,omitempty"`
	Min        float64  `json:"min"` // the per-round throughput ratios' range
	Max        float64  `json:"max"`
	Rounds     int      `json:"rounds"`
}

func (r *SuiteReport) run(workload, variant string, round int) (RunResult, bool) {
	for _, run := range r.Runs {
		if run.Workload == workload && run.Variant == variant && run.Round == round {
			return run, true
		}
	}
	return RunResult{}, false
}

func (r *SuiteReport) summarize(vs []variant) {
	r.Summary, r.Ratios, r.Targets = nil, nil, nil
	for _, w := range r.Workloads {
		for _, v := range vs {
			var runs []RunResult
			for _, run := range r.Runs {
				if run.Workload == w.Name && run.Variant == v.name {
					runs = append(runs, run)
				}
			}
			if len(runs) > 0 {
				s := summarizeRuns(w.Name, Gateway, runs)
				s.Variant = v.name
				r.Summary = append(r.Summary, s)
			}
		}
		for _, v := range vs {
			if v.versus != "" {
				target := v.target
				if t, ok := v.workloadTargets[w.Name]; ok {
					target = t
				}
				r.addRatio(w.Name, v.name, v.versus, target, "throughput "+v.name+"/"+v.versus)
				if v.cpuTarget > 0 {
					r.addCPUTarget(w.Name, v.name, v.versus, v.cpuTarget)
				}
			}
		}
		if r.Suite == SuiteAudit {
			r.addRatio(w.Name, metricsOn, metricsOff, metricsTarget, "throughput "+metricsVariant)
		}
	}
	for _, v := range vs {
		if v.rssTarget > 0 {
			r.addRSSTarget(v.name, v.versus, v.rssTarget)
		}
	}
}

// addRSSTarget checks variant's peak RSS over versus's against limit.
func (r *SuiteReport) addRSSTarget(variant, versus string, limit float64) {
	var a, b int64
	for _, v := range r.Variants {
		switch v.Name {
		case variant:
			a = v.PeakRSSBytes
		case versus:
			b = v.PeakRSSBytes
		}
	}
	if a <= 0 || b <= 0 {
		return
	}
	ratio := float64(a) / float64(b)
	r.Targets = append(r.Targets, Target{
		Name: "peak RSS " + variant + "/" + versus, Goal: fmt.Sprintf("<= %.2f", limit),
		Value: fmt.Sprintf("%.3f (%.1f / %.1f MiB)", ratio, mib(a), mib(b)), Pass: ratio <= limit,
	})
}

func (r *SuiteReport) addRatio(workload, variant, versus string, target float64, name string) {
	c := VariantRatio{Workload: workload, Variant: variant, Versus: versus}
	var tp, cpu []float64
	for round := 1; round <= r.Rounds; round++ {
		a, okA := r.run(workload, variant, round)
		b, okB := r.run(workload, versus, round)
		if !okA || !okB || b.RecordsPerSec <= 0 {
			continue
		}
		tp = append(tp, a.RecordsPerSec/b.RecordsPerSec)
		if a.CPUMsPerMB != nil && b.CPUMsPerMB != nil && *b.CPUMsPerMB > 0 {
			cpu = append(cpu, *a.CPUMsPerMB / *b.CPUMsPerMB)
		}
	}
	if len(tp) == 0 {
		return
	}
	c.Rounds = len(tp)
	c.Throughput = median(tp)
	c.Min, c.Max = tp[0], tp[0]
	for _, x := range tp {
		c.Min, c.Max = min(c.Min, x), max(c.Max, x)
	}
	if len(cpu) > 0 {
		v := median(cpu)
		c.CPUPerMB = &v
	}
	r.Ratios = append(r.Ratios, c)
	if target > 0 {
		r.Targets = append(r.Targets, Target{
			Name: name + ": " + workload, Goal: fmt.Sprintf(">= %.2f", target),
			Value: fmt.Sprintf("%.3f", c.Throughput), Pass: c.Throughput >= target,
		})
	}
}

// Met reports whether every target was checked and met.
func (r *SuiteReport) Met() bool {
	for _, t := range r.Targets {
		if !t.Pass {
			return false
		}
	}
	return len(r.Targets) > 0
}

// WriteJSON writes the report as indented JSON.
func (r *SuiteReport) WriteJSON(w io.Writer) error {
	return writeJSON(w, r)
}

// WriteTable writes the report for people.
func (r *SuiteReport) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "tollgate-bench --suite %s: kfake with %d broker(s), %d partition(s) per throughput topic; %d round(s), variant order rotating;\n",
		r.Suite, r.Brokers, r.Partitions, r.Rounds)
	fmt.Fprintf(&b, "%.1fs measured after %.1fs warm-up per run; medians across rounds; ratios are medians of per-round ratios; MB = 10^6 bytes.\n",
		r.DurationSec, r.WarmupSec)
	if r.ChildProcesses {
		b.WriteString("each variant is its own gateway process; CPU ms/MB: its utime+stime per MB the client moved.\n")
	} else {
		b.WriteString("gateways ran in-process: CPU and RSS not measured.\n")
	}
	if len(r.LoadAvgStart) == 3 && len(r.LoadAvgEnd) == 3 {
		fmt.Fprintf(&b, "load average (1/5/15 min) at start %.2f %.2f %.2f, at end %.2f %.2f %.2f\n",
			r.LoadAvgStart[0], r.LoadAvgStart[1], r.LoadAvgStart[2], r.LoadAvgEnd[0], r.LoadAvgEnd[1], r.LoadAvgEnd[2])
	}
	if r.TCP != "" {
		fmt.Fprintf(&b, "TCP: %s\n", r.TCP)
	}
	b.WriteString("\n")
	for _, wi := range r.Workloads {
		fmt.Fprintf(&b, "  %-18s  %s\n", wi.Name, wi.Desc)
	}
	b.WriteString("\nvariants:\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, v := range r.Variants {
		fmt.Fprintf(tw, "  %s\t%s\n", v.Name, v.Desc)
	}
	tw.Flush()

	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tvariant\trec/s\tMB/s\tCPU ms/MB\tRSS MiB\terrors\t")
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
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%s\t%s\t%d\t\n", name, s.Variant, s.RecordsPerSec, s.MBPerSec,
				optF(s.CPUMsPerMB, "%.3f"), optRSS(s.RSSBytes), s.Errors)
		}
	}
	tw.Flush()

	b.WriteString("\nratios (median of per-round ratios; range across rounds):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tvariant / versus\trec/s ratio\tmin\tmax\tCPU/MB ratio\t")
	for _, c := range r.Ratios {
		fmt.Fprintf(tw, "%s\t%s / %s\t%.3f\t%.3f\t%.3f\t%s\t\n", c.Workload, c.Variant, c.Versus, c.Throughput, c.Min, c.Max, optF(c.CPUPerMB, "%.3f"))
	}
	tw.Flush()

	b.WriteString("\nin force (checked, or the suite fails):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, v := range r.Variants {
		var facts []string
		facts = append(facts, fmt.Sprintf("%d rules", v.Rules), "audit "+v.Audit)
		if !v.Metrics {
			facts = append(facts, "metrics hooks detached")
		}
		if v.Probe != "" {
			facts = append(facts, "probe "+v.Probe)
		}
		if v.Audit != "" && v.Audit != "off" || v.AuditFiles > 0 {
			facts = append(facts, fmt.Sprintf("audit sink %d file(s), %.1f MiB", v.AuditFiles, mib(v.AuditBytes)))
		}
		if s := v.Stats; s != nil && s.Metrics {
			facts = append(facts, fmt.Sprintf("requests %.0f", s.Requests))
			if s.Denials > 0 {
				facts = append(facts, fmt.Sprintf("denials %.0f", s.Denials))
			}
			if v.Audit != "off" {
				facts = append(facts, fmt.Sprintf("audit records written %.0f, dropped %.0f", s.AuditWritten, s.AuditDropped))
			}
			if s.PipedSets+s.UnpipedParts > 0 {
				facts = append(facts, fmt.Sprintf("record sets piped %.0f (%.0f spilled to memory), parts unpiped %.0f", s.PipedSets, s.SpilledSets, s.UnpipedParts))
			}
			if s.AheadSent > 0 {
				facts = append(facts, fmt.Sprintf("fetch-aheads %.0f (%.0f used, %.0f missed)", s.AheadSent, s.AheadUsed, s.AheadMissed))
			}
		}
		if v.PeakRSSBytes > 0 {
			facts = append(facts, fmt.Sprintf("peak RSS %.1f MiB", mib(v.PeakRSSBytes)))
		}
		if v.Profiled {
			facts = append(facts, "CPU-profiled")
		}
		fmt.Fprintf(tw, "  %s\t%s\n", v.Name, strings.Join(facts, "; "))
	}
	tw.Flush()

	writeTargets(&b, r.Targets)
	_, err := io.WriteString(w, b.String())
	return err
}
