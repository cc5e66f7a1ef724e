package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The share benchmark (issue 22 item 4): on one built-in broker
// (tollgate, fsync=never, a child process), the same records are read
// from the start of one topic by a kgo consumer in a classic group
// (Fetch) and by a kgo consumer in a share group (KIP-932: ShareFetch,
// every record accepted by the next poll's acknowledgements), each round
// with a new group, the two alternately (which goes first flips every
// round). Figures per variant: client-side MB/s of record values, broker
// CPU seconds per GB from /proc/<pid>, the consumer's own CPU seconds per
// GB (this process's), and its fetch round trips (how many, the median
// time of one, the share of the read one was in flight), which show
// whether a gap is the broker's or the consumer's. Target: share /
// classic throughput >= 0.9 (median of the per-round ratios).

// SuiteShare is the share-group vs classic-group read on the built-in
// broker (RunShare).
const SuiteShare Suite = "share"

// ShareConfig sizes the share benchmark. Zero fields take the defaults.
type ShareConfig struct {
	Tollgate   string // the tollgate binary; required
	Dir        string // data directory parent; default os.TempDir()
	Bytes      int64  // record value bytes produced once and read per run; default 256 MiB
	RecordSize int    // default 1024
	Partitions int    // default 4
	Rounds     int    // default 5
	// ShareMaxRecords is the share consumer's MaxRecords (kgo's default
	// 500 when 0).
	ShareMaxRecords int32
	Log             io.Writer
}

func (c *ShareConfig) setDefaults() error {
	if c.Tollgate == "" {
		return errors.New("share bench: the tollgate binary is not set (ShareConfig.Tollgate)")
	}
	if c.Dir == "" {
		c.Dir = os.TempDir()
	}
	if c.Bytes <= 0 {
		c.Bytes = 256 << 20
	}
	if c.RecordSize <= 0 {
		c.RecordSize = 1024
	}
	if c.Partitions <= 0 {
		c.Partitions = 4
	}
	if c.Rounds <= 0 {
		c.Rounds = 5
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

// ShareRun is one variant's read in one round. MB is 10^6 bytes.
type ShareRun struct {
	Variant  string  `json:"variant"` // "classic" or "share"
	Round    int     `json:"round"`
	MBps     float64 `json:"mb_per_sec"`
	CPUPerGB float64 `json:"broker_cpu_s_per_gb"`
	// Fetches is the Fetch or ShareFetch requests the consumer sent,
	// FetchTime the median time one took from its write to the end of
	// its answer's read (the broker's handling and both transfers), and
	// InFetch the share of the read's wall time a request was in flight.
	Fetches   int64         `json:"fetches"`
	FetchTime time.Duration `json:"fetch_time_ns"`
	InFetch   float64       `json:"in_fetch"`
	// ClientCPUPerGB is the benchmark process's own CPU per GB over the
	// read: the kgo consumer, which shares the machine with the broker.
	ClientCPUPerGB float64 `json:"client_cpu_s_per_gb"`
	Load1          float64 `json:"load1"` // /proc/loadavg after the run
}

// ShareReport is the whole run.
type ShareReport struct {
	Config ShareConfig `json:"-"`
	TCP    string      `json:"tcp,omitempty"` // tcpSetting
	Runs   []ShareRun  `json:"runs"`
	// Medians of the per-round share/classic ratios, and of each
	// variant's own figures.
	ThroughputRatio float64 `json:"throughput_ratio"`
	CPURatio        float64 `json:"cpu_per_gb_ratio"`
	ClassicMBps     float64 `json:"classic_mb_per_sec"`
	ShareMBps       float64 `json:"share_mb_per_sec"`
	ClassicCPUPerGB float64 `json:"classic_cpu_s_per_gb"`
	ShareCPUPerGB   float64 `json:"share_cpu_s_per_gb"`
	// The consumer's own CPU per GB (the benchmark process).
	ClassicClientCPUPerGB float64 `json:"classic_client_cpu_s_per_gb"`
	ShareClientCPUPerGB   float64 `json:"share_client_cpu_s_per_gb"`
}

// RunShare runs the share benchmark.
func RunShare(ctx context.Context, cfg ShareConfig) (*ShareReport, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(cfg.Dir, "tollgate-share-bench-")
	if err != nil {
		return nil, fmt.Errorf("share bench: %w", err)
	}
	defer os.RemoveAll(work)
	p, err := startTollgateBroker(cfg.Tollgate, work, "never")
	if err != nil {
		return nil, err
	}
	defer p.stop()
	bc := BrokerConfig{RecordSize: cfg.RecordSize, Partitions: cfg.Partitions, Linger: 5 * time.Millisecond}
	if err := bc.createTopic(ctx, p.addr, "share"); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Log, "share bench: producing %d MiB\n", cfg.Bytes>>20)
	if _, err := bc.produce(ctx, p.addr, "share", cfg.Bytes); err != nil {
		return nil, err
	}
	// Records produced: the produce loop sends whole records until Bytes.
	recs := (cfg.Bytes + int64(cfg.RecordSize) - 1) / int64(cfg.RecordSize)
	rep := &ShareReport{Config: cfg, TCP: tcpSetting("", "")}
	for round := range cfg.Rounds {
		order := []string{"classic", "share"}
		if round%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, v := range order {
			r, err := cfg.readOnce(ctx, p, v, fmt.Sprintf("%s-%d", v, round), recs)
			if err != nil {
				return nil, fmt.Errorf("round %d %s: %w", round, v, err)
			}
			r.Round = round
			fmt.Fprintf(cfg.Log, "round %d %s: %.1f MB/s, broker %.3f CPU s/GB, client %.3f CPU s/GB, %d fetches of median %v, in flight %.0f%% of the read (load %.2f)\n",
				round, v, r.MBps, r.CPUPerGB, r.ClientCPUPerGB, r.Fetches, r.FetchTime.Round(time.Microsecond), 100*r.InFetch, r.Load1)
			rep.Runs = append(rep.Runs, r)
		}
	}
	rep.summarise()
	return rep, nil
}

// readOnce reads every record of the topic with a new group of the
// variant and returns its figures.
func (c *ShareConfig) readOnce(ctx context.Context, p *brokerProc, variant, group string, recs int64) (ShareRun, error) {
	r := ShareRun{Variant: variant}
	opts := []kgo.Opt{kgo.SeedBrokers(p.addr), kgo.ConsumeTopics("share")}
	if variant == "share" {
		if err := setShareEarliest(ctx, p.addr, group); err != nil {
			return r, err
		}
		opts = append(opts, kgo.ShareGroup(group))
		if c.ShareMaxRecords > 0 {
			opts = append(opts, kgo.ShareMaxRecords(c.ShareMaxRecords))
		}
	} else {
		opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	fh := &fetchHook{}
	opts = append(opts, kgo.WithHooks(fh))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return r, err
	}
	defer cl.Close()
	u0, err := p.usage()
	if err != nil {
		return r, err
	}
	c0, err := readProc(os.Getpid())
	if err != nil {
		return r, err
	}
	start := time.Now()
	var got, bytes int64
	for got < recs {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return r, fmt.Errorf("read %d of %d records: %w", got, recs, ctx.Err())
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err) })
		if ferr != nil {
			return r, ferr
		}
		fs.EachRecord(func(rec *kgo.Record) { got++; bytes += int64(len(rec.Value)) })
	}
	d := time.Since(start)
	u1, err := p.usage()
	if err != nil {
		return r, err
	}
	c1, err := readProc(os.Getpid())
	if err != nil {
		return r, err
	}
	if got != recs {
		return r, fmt.Errorf("%s read %d records, %d produced (a record delivered twice?)", variant, got, recs)
	}
	r.MBps = float64(bytes) / 1e6 / d.Seconds()
	r.CPUPerGB = (u1.cpuSeconds - u0.cpuSeconds) / (float64(bytes) / 1e9)
	r.ClientCPUPerGB = (c1.cpuSeconds - c0.cpuSeconds) / (float64(bytes) / 1e9)
	var busy time.Duration
	r.Fetches, r.FetchTime, busy = fh.summary()
	r.InFetch = busy.Seconds() / d.Seconds()
	r.Load1 = load1()
	return r, nil
}

// fetchHook times a consumer's Fetch and ShareFetch round trips (kgo's
// HookBrokerE2E).
type fetchHook struct {
	mu    sync.Mutex
	times []time.Duration
}

func (h *fetchHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != int16(kmsg.Fetch) && key != int16(kmsg.ShareFetch) {
		return
	}
	h.mu.Lock()
	h.times = append(h.times, e2e.TimeToWrite+e2e.ReadWait+e2e.TimeToRead)
	h.mu.Unlock()
}

// summary returns the round trips, their median and their sum.
func (h *fetchHook) summary() (n int64, median, sum time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.times) == 0 {
		return 0, 0, 0
	}
	w := slices.Clone(h.times)
	slices.Sort(w)
	for _, t := range w {
		sum += t
	}
	return int64(len(w)), w[len(w)/2], sum
}

// setShareEarliest sets the group's share.auto.offset.reset to earliest
// (IncrementalAlterConfigs on a GROUP resource, KIP-848/KIP-932).
func setShareEarliest(ctx context.Context, addr, group string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	cf := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cf.Name, cf.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, cf)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("set share.auto.offset.reset of %s: %w", group, err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return fmt.Errorf("set share.auto.offset.reset of %s: %w", group, err)
	}
	return nil
}

// load1 is the one-minute load average (0 if unknown).
func load1() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(string(raw), &l)
	return l
}

func (rep *ShareReport) summarise() {
	by := map[int]map[string]ShareRun{}
	var cm, sm, cc, sc, ccl, scl []float64
	for _, r := range rep.Runs {
		if by[r.Round] == nil {
			by[r.Round] = map[string]ShareRun{}
		}
		by[r.Round][r.Variant] = r
		if r.Variant == "share" {
			sm, sc, scl = append(sm, r.MBps), append(sc, r.CPUPerGB), append(scl, r.ClientCPUPerGB)
		} else {
			cm, cc, ccl = append(cm, r.MBps), append(cc, r.CPUPerGB), append(ccl, r.ClientCPUPerGB)
		}
	}
	var tr, cr []float64
	for _, m := range by {
		c, s := m["classic"], m["share"]
		if c.MBps > 0 {
			tr = append(tr, s.MBps/c.MBps)
		}
		if c.CPUPerGB > 0 { // 0: under one 10 ms tick (tiny runs)
			cr = append(cr, s.CPUPerGB/c.CPUPerGB)
		}
	}
	rep.ThroughputRatio, rep.CPURatio = median(tr), median(cr)
	rep.ClassicMBps, rep.ShareMBps = median(cm), median(sm)
	rep.ClassicCPUPerGB, rep.ShareCPUPerGB = median(cc), median(sc)
	rep.ClassicClientCPUPerGB, rep.ShareClientCPUPerGB = median(ccl), median(scl)
}

// Met reports whether share throughput is >= 0.9 x classic.
func (rep *ShareReport) Met() bool { return rep.ThroughputRatio >= 0.9 }

// WriteJSON writes the report as JSON.
func (rep *ShareReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteTable writes every run and the medians.
func (rep *ShareReport) WriteTable(w io.Writer) error {
	cfg := rep.Config
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "share vs classic group read, built-in broker fsync=never: %d B records, %d partitions, %d MiB per read, %d rounds\n",
		cfg.RecordSize, cfg.Partitions, cfg.Bytes>>20, cfg.Rounds)
	if rep.TCP != "" {
		fmt.Fprintf(tw, "TCP: %s\n", rep.TCP)
	}
	fmt.Fprintln(tw, "round\tvariant\tMB/s\tbroker CPU s/GB\tclient CPU s/GB\tfetches\tMB per fetch\tfetch median\tin fetch\tload1")
	for _, r := range rep.Runs {
		mbPer := 0.0
		if r.Fetches > 0 {
			mbPer = float64(cfg.Bytes) / 1e6 / float64(r.Fetches)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.3f\t%.3f\t%d\t%.2f\t%v\t%.0f%%\t%.2f\n", r.Round, r.Variant, r.MBps, r.CPUPerGB, r.ClientCPUPerGB,
			r.Fetches, mbPer, r.FetchTime.Round(time.Microsecond), 100*r.InFetch, r.Load1)
	}
	fmt.Fprintf(tw, "\nmedian classic\t%.1f MB/s\t%.3f broker CPU s/GB\t%.3f client CPU s/GB\n", rep.ClassicMBps, rep.ClassicCPUPerGB, rep.ClassicClientCPUPerGB)
	fmt.Fprintf(tw, "median share\t%.1f MB/s\t%.3f broker CPU s/GB\t%.3f client CPU s/GB\n", rep.ShareMBps, rep.ShareCPUPerGB, rep.ShareClientCPUPerGB)
	met := "met"
	if !rep.Met() {
		met = "MISSED"
	}
	fmt.Fprintf(tw, "share / classic (median of rounds)\tthroughput %.3f (target >= 0.9: %s)\tCPU/GB %.3f\n", rep.ThroughputRatio, met, rep.CPURatio)
	return tw.Flush()
}
