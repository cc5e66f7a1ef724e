package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The soak suite runs one gateway child (assembled by package gateway from
// a configuration file, like every configured variant) in front of kfake
// for Options.Duration under a mixed, steady load, and samples the child's
// resident set (from /proc, readProc) and goroutine count (the admin
// server's /metrics, go_goroutines) every few seconds:
//
//   - producers: soakProducers clients producing Options.Rate records/s in
//     total (idempotent, acks=all: kgo's defaults) to one topic;
//   - a plain consumer reading that topic from the start;
//   - consumer-group churn: every churn interval a new member joins
//     soakGroup, and once more than soakMaxMembers are in, the oldest
//     leaves (kgo's Close sends LeaveGroup), so the group rebalances all
//     the time and every join opens new connections.
//
// The verdict compares the median of the last third of the samples with
// the median of the first third, per series, as a ratio (the samples of
// the warm-up, until the group first has soakMaxMembers+1 joins behind
// it, are reported but left out); a series is
// "flat" when that ratio is at most SoakTolerance. It is a reading of a
// few minutes, not a test threshold: the smoke test checks only that
// samples were taken and records moved.

// SuiteSoak is `tollgate-bench --suite soak` (RunSoak).
const SuiteSoak Suite = "soak"

// SoakTolerance is the largest last-third/first-third median ratio a
// series may show and still be called flat.
const SoakTolerance = 1.25

const (
	soakTopic      = "bench-soak"
	soakGroup      = "bench-soak-group"
	soakProducers  = 2
	soakMaxMembers = 3
	soakRecordSize = 256
	soakBatches    = 20 // produce batches per second per producer
)

// SoakSample is one reading of the gateway child during the soak.
type SoakSample struct {
	AtSec         float64 `json:"at_sec"`
	RSSBytes      int64   `json:"rss_bytes"`
	Goroutines    int     `json:"goroutines"`
	Produced      int64   `json:"produced"`       // records acknowledged so far
	Consumed      int64   `json:"consumed"`       // records the plain consumer read so far
	GroupConsumed int64   `json:"group_consumed"` // records the group's members read so far
	Members       int     `json:"members"`        // group members running
	// Warmup marks a sample taken before the group first reached its
	// full size; the verdict leaves those out.
	Warmup bool `json:"warmup,omitempty"`
}

// SoakSeries is the verdict on one sampled series.
type SoakSeries struct {
	Name        string  `json:"name"`
	FirstMedian float64 `json:"first_third_median"`
	LastMedian  float64 `json:"last_third_median"`
	Ratio       float64 `json:"ratio"` // last / first
	Flat        bool    `json:"flat"`  // Ratio <= Tolerance
}

// SoakReport is the outcome of RunSoak.
type SoakReport struct {
	Suite         Suite     `json:"suite"`
	DurationSec   float64   `json:"duration_sec"`
	SampleSec     float64   `json:"sample_interval_sec"`
	ChurnSec      float64   `json:"churn_interval_sec"`
	Brokers       int       `json:"brokers"`
	Partitions    int       `json:"partitions"`
	Rate          int       `json:"rate"` // records/s produced in total
	LoadAvgStart  []float64 `json:"loadavg_start,omitempty"`
	LoadAvgEnd    []float64 `json:"loadavg_end,omitempty"`
	Produced      int64     `json:"produced"`
	ProduceErrors int64     `json:"produce_errors"`
	// FirstProduceError is the first failed record's error ("" if none).
	FirstProduceError string       `json:"first_produce_error,omitempty"`
	Consumed          int64        `json:"consumed"`
	GroupConsumed     int64        `json:"group_consumed"`
	Joins             int          `json:"joins"`
	Leaves            int          `json:"leaves"`
	Samples           []SoakSample `json:"samples"`
	Tolerance         float64      `json:"tolerance"`
	Series            []SoakSeries `json:"series"`
	Flat              bool         `json:"flat"` // every series flat
}

// soakIntervals returns how often the soak samples and churns the group:
// about 30 samples over the run, between 1 and 5 seconds apart.
func soakIntervals(d time.Duration) (sample, churn time.Duration) {
	sample = min(max(d/30, time.Second), 5*time.Second)
	return sample, sample
}

// RunSoak runs the soak suite (see above). It needs the gateway in a child
// process (opts.Command): its RSS and goroutines are what is measured.
func RunSoak(ctx context.Context, opts Options) (*SoakReport, error) {
	if opts.Command == nil {
		return nil, errors.New("the soak suite needs the gateway in a child process (Options.Command; not --in-process)")
	}
	if opts.Duration <= 0 {
		opts.Duration = 2 * time.Minute
	}
	opts.setDefaults()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(opts.Brokers))
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	defer cluster.Close()
	b := &bencher{opts: opts, upstreams: cluster.ListenAddrs(), cluster: cluster}
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.upstreams...))
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	defer admin.Close()
	b.admin = kadm.NewClient(admin)
	if err := b.createTopic(ctx, soakTopic, opts.Partitions, nil); err != nil {
		return nil, err
	}
	gw, err := startSoakGateway(opts, b.upstreams)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			gw.stop()
		}
	}()
	sample, churn := soakIntervals(opts.Duration)
	rep := &SoakReport{
		Suite: SuiteSoak, DurationSec: opts.Duration.Seconds(), SampleSec: sample.Seconds(), ChurnSec: churn.Seconds(),
		Brokers: opts.Brokers, Partitions: opts.Partitions, Rate: opts.Rate, Tolerance: SoakTolerance,
		LoadAvgStart: loadAvg(),
	}
	l := &soakLoad{seed: gw.info.Bootstrap}
	if err := l.run(ctx, opts, gw, sample, churn, rep); err != nil {
		return nil, err
	}
	rep.LoadAvgEnd = loadAvg()
	stopped = true
	if err := gw.stop(); err != nil {
		return nil, err
	}
	rep.summarize()
	return rep, nil
}

// startSoakGateway writes the soak's configuration (the policy suites'
// file with no rules and audit off) and starts its gateway child with the
// admin server on a kernel-chosen port.
func startSoakGateway(opts Options, upstreams []string) (*child, error) {
	dir, err := os.MkdirTemp("", "tollgate-bench-soak-")
	if err != nil {
		return nil, fmt.Errorf("soak work directory: %w", err)
	}
	defer os.RemoveAll(dir) // the child has read the file once it is ready
	v := variant{name: "soak", desc: "tollgate defaults, no policy, audit off, metrics on", metrics: true}
	file := filepath.Join(dir, "tollgate.yaml")
	if err := os.WriteFile(file, []byte(v.configYAML(upstreams, "")), 0o644); err != nil {
		return nil, fmt.Errorf("write soak config: %w", err)
	}
	args := []string{ChildFlag, string(Gateway), "--config", file, "--admin-listen", "127.0.0.1:0"}
	c, err := spawnChildArgs(opts.Command, Gateway, args, opts.ChildStderr)
	if err != nil {
		return nil, err
	}
	if c.info.Admin == "" {
		c.stop()
		return nil, errors.New("soak gateway child reported no admin address")
	}
	return c, nil
}

// soakLoad is the soak's clients. Its counters are written by the client
// goroutines and read by the sampler; members is owned by the churn loop.
type soakLoad struct {
	seed                    string
	produced, produceErrs   atomic.Int64
	consumed, groupConsumed atomic.Int64
	members                 atomic.Int32
	joins, leaves           int

	mu              sync.Mutex
	firstProduceErr string
	clients         []*kgo.Client // every client still open, closed at the end
}

func (l *soakLoad) client(extra ...kgo.Opt) (*kgo.Client, error) {
	c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(l.seed)}, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("soak client: %w", err)
	}
	l.mu.Lock()
	l.clients = append(l.clients, c)
	l.mu.Unlock()
	return c, nil
}

// close closes one client and forgets it.
func (l *soakLoad) close(c *kgo.Client) {
	l.mu.Lock()
	for i, x := range l.clients {
		if x == c {
			l.clients = append(l.clients[:i], l.clients[i+1:]...)
			break
		}
	}
	l.mu.Unlock()
	c.Close()
}

// run starts the producers and the consumer, churns the group and samples
// until opts.Duration has passed, then stops every client.
func (l *soakLoad) run(ctx context.Context, opts Options, gw *child, sample, churn time.Duration, rep *SoakReport) error {
	ctx, cancel := context.WithTimeout(ctx, opts.Duration)
	defer cancel()
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		l.closeAll()
	}()
	for range soakProducers {
		c, err := l.client()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); l.produce(ctx, c, max(opts.Rate/soakProducers, 1)) }()
	}
	c, err := l.client(kgo.ConsumeTopics(soakTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() { defer wg.Done(); l.consume(ctx, c, &l.consumed) }()

	start := time.Now()
	sampleT, churnT := time.NewTicker(sample), time.NewTicker(churn)
	defer sampleT.Stop()
	defer churnT.Stop()
	var group []*kgo.Client
	for {
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			l.finish(rep)
			return nil
		case <-churnT.C:
			var err error
			if group, err = l.churn(ctx, &wg, group); err != nil {
				return err
			}
		case <-sampleT.C:
			s, err := l.sample(ctx, gw, time.Since(start))
			if err != nil {
				return err
			}
			s.Warmup = l.joins <= soakMaxMembers
			rep.Samples = append(rep.Samples, s)
			if opts.Progress != nil {
				fmt.Fprintf(opts.Progress, "soak %6.1fs rss %6.1f MiB goroutines %5d produced %9d consumed %9d group %9d members %d\n",
					s.AtSec, float64(s.RSSBytes)/(1<<20), s.Goroutines, s.Produced, s.Consumed, s.GroupConsumed, s.Members)
			}
		}
	}
}

// churn starts a new group member and, once more than soakMaxMembers
// run, closes the oldest (it leaves the group).
func (l *soakLoad) churn(ctx context.Context, wg *sync.WaitGroup, group []*kgo.Client) ([]*kgo.Client, error) {
	c, err := l.client(kgo.ConsumerGroup(soakGroup), kgo.ConsumeTopics(soakTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return group, err
	}
	l.joins++
	l.members.Add(1)
	wg.Add(1)
	go func() { defer wg.Done(); l.consume(ctx, c, &l.groupConsumed) }()
	group = append(group, c)
	if len(group) > soakMaxMembers {
		l.close(group[0])
		group = group[1:]
		l.leaves++
		l.members.Add(-1)
	}
	return group, nil
}

// produce sends rate records/s to the soak topic in soakBatches batches a
// second until ctx ends, counting acknowledged and failed records.
func (l *soakLoad) produce(ctx context.Context, c *kgo.Client, rate int) {
	per := max(rate/soakBatches, 1)
	value := make([]byte, soakRecordSize)
	t := time.NewTicker(time.Second / soakBatches)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		recs := make([]*kgo.Record, per)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: soakTopic, Value: value}
		}
		for _, r := range c.ProduceSync(ctx, recs...) {
			switch {
			case r.Err == nil:
				l.produced.Add(1)
			case ctx.Err() == nil:
				l.produceErrs.Add(1)
				l.mu.Lock()
				if l.firstProduceErr == "" {
					l.firstProduceErr = r.Err.Error()
				}
				l.mu.Unlock()
			}
		}
	}
}

// consume polls c until ctx ends (or c is closed), adding the records it
// gets to n.
func (l *soakLoad) consume(ctx context.Context, c *kgo.Client, n *atomic.Int64) {
	for ctx.Err() == nil {
		fs := c.PollFetches(ctx)
		if fs.IsClientClosed() {
			return
		}
		n.Add(int64(fs.NumRecords()))
	}
}

func (l *soakLoad) closeAll() {
	l.mu.Lock()
	cs := l.clients
	l.clients = nil
	l.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

func (l *soakLoad) finish(rep *SoakReport) {
	rep.Produced, rep.ProduceErrors = l.produced.Load(), l.produceErrs.Load()
	rep.Consumed, rep.GroupConsumed = l.consumed.Load(), l.groupConsumed.Load()
	rep.Joins, rep.Leaves = l.joins, l.leaves
	l.mu.Lock()
	rep.FirstProduceError = l.firstProduceErr
	l.mu.Unlock()
}

// sample reads the gateway child's RSS and goroutine count.
func (l *soakLoad) sample(ctx context.Context, gw *child, at time.Duration) (SoakSample, error) {
	s := SoakSample{AtSec: at.Seconds(), Produced: l.produced.Load(), Consumed: l.consumed.Load(),
		GroupConsumed: l.groupConsumed.Load(), Members: int(l.members.Load())}
	u, err := gw.usage()
	if err != nil {
		return s, err
	}
	s.RSSBytes = u.rssBytes
	if s.Goroutines, err = scrapeGoroutines(ctx, gw.info.Admin); err != nil {
		return s, err
	}
	return s, nil
}

// scrapeGoroutines reads go_goroutines from the admin server's /metrics.
func scrapeGoroutines(ctx context.Context, admin string) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", admin, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", admin, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape %s: %s", admin, resp.Status)
	}
	return parseGoroutines(resp.Body)
}

// parseGoroutines finds the go_goroutines gauge in a Prometheus text
// exposition.
func parseGoroutines(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "go_goroutines ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, fmt.Errorf("go_goroutines %q: %w", v, err)
		}
		return int(f), nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read metrics: %w", err)
	}
	return 0, errors.New("no go_goroutines in /metrics")
}

// summarize sets the verdict: per series, the last third's median over the
// first third's.
func (r *SoakReport) summarize() {
	r.Series = []SoakSeries{
		soakSeries("rss_bytes", r.Samples, func(s SoakSample) float64 { return float64(s.RSSBytes) }),
		soakSeries("goroutines", r.Samples, func(s SoakSample) float64 { return float64(s.Goroutines) }),
	}
	r.Flat = true
	for _, s := range r.Series {
		r.Flat = r.Flat && s.Flat // a series with under 3 samples is not flat
	}
}

func soakSeries(name string, all []SoakSample, f func(SoakSample) float64) SoakSeries {
	s := SoakSeries{Name: name}
	var samples []SoakSample
	for _, x := range all {
		if !x.Warmup {
			samples = append(samples, x)
		}
	}
	third := len(samples) / 3
	if third == 0 {
		return s
	}
	var first, last []float64
	for i, x := range samples {
		switch {
		case i < third:
			first = append(first, f(x))
		case i >= len(samples)-third:
			last = append(last, f(x))
		}
	}
	s.FirstMedian, s.LastMedian = median(first), median(last)
	if s.FirstMedian > 0 {
		s.Ratio = s.LastMedian / s.FirstMedian
	}
	s.Flat = s.Ratio > 0 && s.Ratio <= SoakTolerance
	return s
}

// Met is whether every series was flat (`--check`).
func (r *SoakReport) Met() bool { return r.Flat }

// WriteJSON writes the report as indented JSON.
func (r *SoakReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the samples, the totals and the verdict.
func (r *SoakReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "soak: %.0fs, kfake %d broker(s), %d partitions, %d records/s produced by %d producers, 1 consumer, group churn every %.0fs (at most %d members); sampled every %.0fs\n",
		r.DurationSec, r.Brokers, r.Partitions, r.Rate, soakProducers, r.ChurnSec, soakMaxMembers, r.SampleSec)
	if len(r.LoadAvgStart) == 3 && len(r.LoadAvgEnd) == 3 {
		fmt.Fprintf(w, "load average: %.2f at start, %.2f at end\n", r.LoadAvgStart[0], r.LoadAvgEnd[0])
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "t (s)\tRSS (MiB)\tgoroutines\tproduced\tconsumed\tgroup consumed\tmembers\t\t")
	for _, s := range r.Samples {
		note := ""
		if s.Warmup {
			note = "warm-up"
		}
		fmt.Fprintf(tw, "%.1f\t%.1f\t%d\t%d\t%d\t%d\t%d\t%s\t\n", s.AtSec, float64(s.RSSBytes)/(1<<20), s.Goroutines,
			s.Produced, s.Consumed, s.GroupConsumed, s.Members, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "records: %d produced (%d failed), %d consumed, %d consumed by the group; %d joins, %d leaves\n",
		r.Produced, r.ProduceErrors, r.Consumed, r.GroupConsumed, r.Joins, r.Leaves)
	if r.FirstProduceError != "" {
		fmt.Fprintf(w, "first produce error: %s\n", r.FirstProduceError)
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "series\tfirst third median\tlast third median\tratio\tflat (ratio <= %.2f)\t\n", r.Tolerance)
	for _, s := range r.Series {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.3f\t%v\t\n", s.Name, s.FirstMedian, s.LastMedian, s.Ratio, s.Flat)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "flat"
	if !r.Flat {
		verdict = "NOT flat (or too few samples)"
	}
	_, err := fmt.Fprintf(w, "verdict: %s\n", verdict)
	return err
}
