//go:build linux

package bench

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The slow-readers run (issue 23): many raw client connections fetch
// large record sets through the gateway (the tollgate binary, its own
// process, in front of a three-broker kfake in this process); half of
// them read every answer, the other half send their Fetches and then
// never read their sockets, so their kernel buffers fill and the
// gateway's writes to them block. Meanwhile a kgo producer and a kgo
// consumer move records through the gateway and their throughput is
// measured. Phases alternate in one run: a baseline (the readers and the
// kgo clients) and a stalled phase (the same plus the stalled half), so
// each stalled phase has a neighbouring baseline under the same machine
// load. The gateway's RSS is read from /proc and its goroutines from its
// admin /metrics through every phase.
//
// What a connection can make the gateway hold (proxy/session.go): a
// session streams every response from the upstream socket to the client
// socket (Fetch record sets spliced, other frames through a 64 KiB
// buffer) and reads nothing ahead of its write, so a client that stops
// reading stops its session's upstream reads: the answers wait in the
// upstream's socket and the upstream broker, not in the gateway. Per
// connection the gateway holds at most its buffers and queue
// (slowConnBytes), and a response write that makes no progress for
// frame_timeout closes the connection (reason write_timeout).

// SuiteSlowReaders: connections that stop reading (RunSlowReaders).
const SuiteSlowReaders Suite = "slow-readers"

// SlowReadersConfig sizes a run. Zero fields take the defaults.
type SlowReadersConfig struct {
	Tollgate string // the tollgate binary
	Dir      string // work directory; default a temporary one
	Mode     string // ModePortPerBroker (default) or ModeSinglePort

	Conns  int           // raw client connections: half read, half stall (default 1000)
	Rounds int           // baseline and stalled phase pairs (default 3)
	Phase  time.Duration // each phase's measured window (default 10s)

	// The gateway's limits; 0 leaves the gateway's default (frame_timeout
	// 30s, max_in_flight 100).
	FrameTimeout time.Duration
	MaxInFlight  int

	Partitions int32         // of the fetched topic (default 6)
	FillMiB    int           // record bytes in the fetched topic (default 48)
	FetchBytes int32         // a raw Fetch's partition max bytes (default 1 MiB)
	Pipeline   int           // Fetches a stalled connection sends before it stops reading (default 8)
	ReadEvery  time.Duration // a reading connection's Fetch interval (default 2s)
	// WaitClosed ends each stalled phase only once the gateway has closed
	// every stalled connection (write_timeout), within 2 × FrameTimeout
	// past the phase.
	WaitClosed bool

	Log io.Writer `json:"-"`
}

func (c *SlowReadersConfig) defaults() {
	if c.Mode == "" {
		c.Mode = ModePortPerBroker
	}
	if c.Conns <= 0 {
		c.Conns = 1000
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	if c.Phase <= 0 {
		c.Phase = 10 * time.Second
	}
	if c.Partitions <= 0 {
		c.Partitions = 6
	}
	if c.FillMiB <= 0 {
		c.FillMiB = 48
	}
	if c.FetchBytes <= 0 {
		c.FetchBytes = 1 << 20
	}
	if c.Pipeline <= 0 {
		c.Pipeline = 8
	}
	if c.ReadEvery <= 0 {
		c.ReadEvery = 2 * time.Second
	}
}

// gatewayMaxInFlight and gatewayFrameTimeout are the limits in force.
func (c *SlowReadersConfig) gatewayMaxInFlight() int {
	if c.MaxInFlight > 0 {
		return c.MaxInFlight
	}
	return 100 // configs.DefaultMaxInFlight
}

func (c *SlowReadersConfig) gatewayFrameTimeout() time.Duration {
	if c.FrameTimeout > 0 {
		return c.FrameTimeout
	}
	return 30 * time.Second // configs.DefaultFrameTimeout
}

// slowConnBytes bounds what one client connection of a port-per-broker
// (or SNI) listener makes the gateway hold, from proxy/session.go: the
// client read buffer and the upstream read buffer (bufSize, 64 KiB each),
// the write loop's scratch (the Fetch stream's output, flushed at 64 KiB,
// so under 128 KiB), the queue (maxInFlight entries, under 512 bytes each),
// two goroutine stacks (under 32 KiB each at these call depths) and the
// sockets' own structures (under 8 KiB) — doubled, because Go's collector
// (GOGC=100) lets the heap reach twice what is live before it collects.
func slowConnBytes(maxInFlight int) int64 {
	const kib = 1 << 10
	live := 64*kib + 64*kib + 128*kib + int64(maxInFlight)*512 + 2*32*kib + 8*kib
	return 2 * live
}

// singlePortConnBytes bounds what one client connection of a single-port
// listener makes the gateway hold: slowConnBytes, plus the one Fetch
// answer a session holds unwritten (proxy/route.go, awaitAnswerSlot),
// which is read whole and merged: the parts' buffers, the decoded answer
// re-encoded and the encoded answer, each up to the client's Fetch max
// bytes (fetch), plus a connection per upstream broker (brokers), each
// with a 64 KiB reader and a goroutine, and the tunnel's state (32 KiB) —
// doubled for the collector too.
func singlePortConnBytes(maxInFlight int, fetch int64, brokers int) int64 {
	return slowConnBytes(maxInFlight) + 2*(3*fetch+int64(brokers)*72<<10+32<<10)
}

// slowBrokers is the upstream kfake's size.
const slowBrokers = 3

// SlowReadersPhase is one measured phase.
type SlowReadersPhase struct {
	Round         int     `json:"round"`
	Stalled       int     `json:"stalled"` // stalled connections open during the phase
	ProduceMBps   float64 `json:"produce_mbps"`
	ConsumeMBps   float64 `json:"consume_mbps"`
	ReaderMBps    float64 `json:"reader_mbps"` // the reading raw connections, all together
	MaxRSS        int64   `json:"max_rss_bytes"`
	MaxGoroutines int     `json:"max_goroutines"`
	ReaderErrors  int64   `json:"reader_errors"`
	// MaxTCPMem is the kernel's TCP buffer memory, all sockets of the
	// machine (/proc/net/sockstat): where the stalled connections' bytes
	// wait, outside every process's RSS.
	MaxTCPMem int64 `json:"max_tcp_mem_bytes"`
}

// SlowReadersReport is RunSlowReaders' outcome.
type SlowReadersReport struct {
	Config SlowReadersConfig  `json:"config"`
	Phases []SlowReadersPhase `json:"phases"`
	// Medians over the rounds of stalled / baseline throughput.
	ProduceRatio float64 `json:"produce_ratio"`
	ConsumeRatio float64 `json:"consume_ratio"`
	ReaderRatio  float64 `json:"reader_ratio"`
	// Memory: the largest RSS of the first baseline phase (before any
	// stall), of the stalled phases, the process's peak (VmHWM), and the
	// bound: the baseline's RSS plus stalled connections × PerConnBound.
	BaselineRSS   int64 `json:"baseline_rss_bytes"`
	StalledRSS    int64 `json:"stalled_rss_bytes"`
	PeakRSS       int64 `json:"peak_rss_bytes"`
	PerConnBound  int64 `json:"per_conn_bound_bytes"`
	Bound         int64 `json:"bound_bytes"`
	BaselineGor   int   `json:"baseline_goroutines"`
	StalledGor    int   `json:"stalled_goroutines"`
	WriteTimeouts int64 `json:"write_timeout_closes"` // the gateway's closes with reason write_timeout
	// Records the kgo clients moved while stalled connections were open.
	StalledProduced int64    `json:"stalled_produced"`
	StalledConsumed int64    `json:"stalled_consumed"`
	Errors          []string `json:"errors,omitempty"`
}

// Met reports whether memory stayed under the bound, the kgo clients
// moved records while the stalled half was open, and nothing failed.
// Throughput ratios are reported, not judged.
func (r *SlowReadersReport) Met() bool {
	if r.Config.Mode == ModeDirect {
		return len(r.Errors) == 0 && r.StalledProduced > 0 && r.StalledConsumed > 0
	}
	return len(r.Errors) == 0 && r.StalledRSS > 0 && r.StalledRSS <= r.Bound && r.PeakRSS <= r.Bound &&
		r.StalledProduced > 0 && r.StalledConsumed > 0
}

const slowTopic, slowGoodTopic = "slow", "good"

// settleStalls waits, after the stalled connections are opened, until
// the kernel's TCP memory stops growing (their answers are queued as far
// as they go): at least 2s, at most 15s.
func settleStalls(ctx context.Context) {
	start, last := time.Now(), tcpMemBytes()
	for time.Since(start) < 15*time.Second && ctx.Err() == nil {
		sleepCtx(ctx, 500*time.Millisecond)
		m := tcpMemBytes()
		if time.Since(start) >= 2*time.Second && float64(m) <= float64(last)*1.02 {
			return
		}
		last = m
	}
}

// RunSlowReaders runs the phases and reports throughput and memory.
func RunSlowReaders(ctx context.Context, cfg SlowReadersConfig) (*SlowReadersReport, error) {
	cfg.defaults()
	rep := &SlowReadersReport{Config: cfg, PerConnBound: slowConnBytes(cfg.gatewayMaxInFlight())}
	if cfg.Mode == ModeSinglePort {
		rep.PerConnBound = singlePortConnBytes(cfg.gatewayMaxInFlight(), int64(cfg.FetchBytes), slowBrokers)
	}
	if cfg.Tollgate == "" {
		return nil, errors.New("slow-readers: no tollgate binary")
	}
	if cfg.Mode != ModePortPerBroker && cfg.Mode != ModeSinglePort && cfg.Mode != ModeDirect {
		return nil, fmt.Errorf("slow-readers: mode %q (want %s, %s or %s)", cfg.Mode, ModePortPerBroker, ModeSinglePort, ModeDirect)
	}
	raiseNoFile()
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "tollgate-slow-")
		if err != nil {
			return nil, fmt.Errorf("slow-readers: %w", err)
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "slow-readers: "+format+"\n", a...)
		}
	}

	kc, err := kfake.NewCluster(kfake.NumBrokers(slowBrokers), kfake.SeedTopics(cfg.Partitions, slowTopic), kfake.ListenFn(kafkaLikeListen))
	if err != nil {
		return nil, fmt.Errorf("slow-readers: kfake: %w", err)
	}
	defer kc.Close()
	// The measured producer writes as fast as it can: kfake keeps its
	// records in memory, so the topic keeps only its last 32 MiB a
	// partition (retention applied every second below).
	if err := createGoodTopic(ctx, kc.ListenAddrs()); err != nil {
		return nil, err
	}
	retain := time.NewTicker(time.Second)
	defer retain.Stop()
	go func() {
		for range retain.C {
			kc.ApplyRetention()
		}
	}()
	logf("filling %s with %d MiB", slowTopic, cfg.FillMiB)
	if err := fillSlowTopic(ctx, kc.ListenAddrs(), cfg.FillMiB); err != nil {
		return nil, err
	}
	// The direct mode has no gateway: the clients and the stalled
	// connections go to kfake itself, a control for what the upstream and
	// the machine do under the same load.
	gw, admin, seed := (*faultProc)(nil), "", kc.ListenAddrs()[0]
	tail := func() string { return "" }
	if cfg.Mode != ModeDirect {
		if gw, admin, err = startSlowGateway(ctx, cfg, kc.ListenAddrs()); err != nil {
			return nil, err
		}
		defer gw.kill()
		seed, tail = gw.addr, gw.tail
	}
	targets, err := slowTargets(ctx, seed, cfg.Partitions)
	if err != nil {
		return nil, fmt.Errorf("slow-readers: %w\n%s", err, tail())
	}
	writeTimeouts := func() float64 {
		if admin == "" {
			return 0
		}
		v, _ := scrapeCounter(ctx, admin, "tollgate_connection_closes_total", `reason="write_timeout"`)
		return v
	}

	work, err := startSlowWork(ctx, seed)
	if err != nil {
		return nil, err
	}
	defer work.close()

	// The reading half runs through every phase.
	rctx, rcancel := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	var readBytes, readErrs atomic.Int64
	nReaders := cfg.Conns / 2
	for i := range nReaders {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			slowReader(rctx, cfg, targets[i%len(targets)], time.Duration(i)*cfg.ReadEvery/time.Duration(nReaders), &readBytes, &readErrs)
		}()
	}
	defer func() { rcancel(); rwg.Wait() }()

	// The sampler: RSS every 100 ms, goroutines every second.
	var smu sync.Mutex
	var curRSS int64
	var curGor int
	var curTCP int64
	sctx, scancel := context.WithCancel(ctx)
	var swg sync.WaitGroup
	swg.Add(1)
	go func() {
		defer swg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			if gw != nil {
				if u, err := readProc(gw.cmd.Process.Pid); err == nil {
					smu.Lock()
					curRSS = max(curRSS, u.rssBytes)
					smu.Unlock()
				}
			}
			if m := tcpMemBytes(); m > 0 {
				smu.Lock()
				curTCP = max(curTCP, m)
				smu.Unlock()
			}
			if i%10 == 0 && admin != "" {
				if g, err := scrapeGoroutines(sctx, admin); err == nil {
					smu.Lock()
					curGor = max(curGor, g)
					smu.Unlock()
				}
			}
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	defer func() { scancel(); swg.Wait() }()
	resetPeak := func() (int64, int, int64) {
		smu.Lock()
		defer smu.Unlock()
		r, g, m := curRSS, curGor, curTCP
		curRSS, curGor, curTCP = 0, 0, 0
		return r, g, m
	}

	// Warm-up: the readers connected and the kgo clients moving.
	if err := waitUntil(ctx, time.Minute, func() bool { return work.consumed.Load() > 0 && readBytes.Load() > 0 }); err != nil {
		return rep, fmt.Errorf("slow-readers: no traffic after a minute: %w\n%s", err, tail())
	}
	sleepCtx(ctx, cfg.Phase/2)

	stallAt := make([]string, cfg.Conns-nReaders)
	for i := range stallAt {
		stallAt[i] = targets[i%len(targets)]
	}
	var baseProd, baseCons, baseRead, stProd, stCons, stRead []float64
	for round := range cfg.Rounds {
		for _, stalled := range []bool{false, true} {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			var stallers []net.Conn
			before := writeTimeouts()
			n0, m0 := work.produced.Load(), work.consumed.Load()
			if stalled {
				stallers, err = openStallers(ctx, cfg, stallAt)
				if err != nil {
					closeAll(stallers)
					return rep, fmt.Errorf("slow-readers: %w", err)
				}
				logf("round %d: %d connections stalled", round+1, len(stallers))
				// Their one-time cost (the dials, kfake encoding their
				// answers, the kernel queueing them) passes before the
				// window opens: what is measured is the others'
				// throughput while the stalled connections are held.
				settleStalls(ctx)
			}
			resetPeak()
			p0, c0, r0, e0 := work.producedBytes.Load(), work.consumedBytes.Load(), readBytes.Load(), readErrs.Load()
			start := time.Now()
			sleepCtx(ctx, cfg.Phase)
			secs := time.Since(start).Seconds()
			ph := SlowReadersPhase{Round: round + 1, Stalled: len(stallers),
				ProduceMBps:  float64(work.producedBytes.Load()-p0) / secs / 1e6,
				ConsumeMBps:  float64(work.consumedBytes.Load()-c0) / secs / 1e6,
				ReaderMBps:   float64(readBytes.Load()-r0) / secs / 1e6,
				ReaderErrors: readErrs.Load() - e0,
			}
			if stalled {
				if cfg.WaitClosed && admin != "" {
					want := before + float64(len(stallers))
					bound := cfg.Phase + 2*cfg.gatewayFrameTimeout()
					if err := waitUntil(ctx, bound, func() bool { return writeTimeouts() >= want }); err != nil {
						v := writeTimeouts()
						rep.Errors = append(rep.Errors, fmt.Sprintf("round %d: %v of %d stalled connections closed with write_timeout within %v", round+1, v-before, len(stallers), bound))
					}
				}
			}
			ph.MaxRSS, ph.MaxGoroutines, ph.MaxTCPMem = resetPeak()
			if stalled {
				// Records moved from the stalled connections' opening
				// to their close.
				rep.StalledProduced += work.produced.Load() - n0
				rep.StalledConsumed += work.consumed.Load() - m0
			}
			closeAll(stallers)
			rep.Phases = append(rep.Phases, ph)
			logf("round %d stalled %4d: produce %.2f MB/s consume %.2f MB/s readers %.2f MB/s rss %.1f MiB goroutines %d",
				round+1, ph.Stalled, ph.ProduceMBps, ph.ConsumeMBps, ph.ReaderMBps, float64(ph.MaxRSS)/(1<<20), ph.MaxGoroutines)
			if stalled {
				stProd, stCons, stRead = append(stProd, ph.ProduceMBps), append(stCons, ph.ConsumeMBps), append(stRead, ph.ReaderMBps)
				rep.StalledRSS = max(rep.StalledRSS, ph.MaxRSS)
				rep.StalledGor = max(rep.StalledGor, ph.MaxGoroutines)
				// Let the gateway end the closed sessions before the next baseline.
				sleepCtx(ctx, time.Second)
			} else {
				baseProd, baseCons, baseRead = append(baseProd, ph.ProduceMBps), append(baseCons, ph.ConsumeMBps), append(baseRead, ph.ReaderMBps)
				if round == 0 {
					// Before any stall: later baselines include what the
					// Go runtime kept of a stalled phase's heap.
					rep.BaselineRSS = ph.MaxRSS
				}
				rep.BaselineGor = max(rep.BaselineGor, ph.MaxGoroutines)
			}
		}
	}
	rep.ProduceRatio, rep.ConsumeRatio, rep.ReaderRatio = medianRatio(stProd, baseProd), medianRatio(stCons, baseCons), medianRatio(stRead, baseRead)
	if gw != nil {
		if u, err := readProc(gw.cmd.Process.Pid); err == nil {
			rep.PeakRSS = u.hwmBytes
		}
	}
	rep.Bound = rep.BaselineRSS + int64(cfg.Conns-nReaders)*rep.PerConnBound
	rep.WriteTimeouts = int64(writeTimeouts())
	return rep, nil
}

// kafkaSendBuffer is Kafka's socket.send.buffer.bytes default: a broker
// sets SO_SNDBUF to it on every connection, where kfake leaves the
// kernel's autotuning (up to net.ipv4.tcp_wmem's maximum, 4 MiB here).
const kafkaSendBuffer = 102400

// kafkaLikeListen makes kfake's sockets send through a Kafka-sized
// buffer (accepted sockets inherit the listener's SO_SNDBUF), so the
// bytes an upstream queues for a connection that stopped reading are
// what a Kafka broker would queue.
func kafkaLikeListen(network, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, kafkaSendBuffer)
		})
	}}
	return lc.Listen(context.Background(), network, addr)
}

// tcpMemBytes is the kernel's TCP buffer memory in use, from the "TCP:
// ... mem N" line of /proc/net/sockstat (pages); 0 if unreadable.
func tcpMemBytes() int64 {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "TCP:") {
			continue
		}
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "mem" {
				n, _ := strconv.ParseInt(f[i+1], 10, 64)
				return n * int64(os.Getpagesize())
			}
		}
	}
	return 0
}

// medianRatio is the median of a[i]/b[i].
func medianRatio(a, b []float64) float64 {
	var rs []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			rs = append(rs, a[i]/b[i])
		}
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	if len(rs)%2 == 1 {
		return rs[len(rs)/2]
	}
	return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
}

// raiseNoFile lifts the soft open-file limit to the hard one: the run
// holds a socket per client connection and kfake one per upstream
// connection (the gateway, a Go program, raises its own).
func raiseNoFile() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func waitUntil(ctx context.Context, bound time.Duration, cond func() bool) error {
	deadline := time.Now().Add(bound)
	for !cond() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func closeAll(cs []net.Conn) {
	for _, c := range cs {
		c.Close()
	}
}

// fillSlowTopic writes mib MiB of incompressible 16 KiB records straight
// to the upstream, spread over the topic's partitions.
func fillSlowTopic(ctx context.Context, seeds []string, mib int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(slowTopic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return fmt.Errorf("slow-readers: fill client: %w", err)
	}
	defer cl.Close()
	val := make([]byte, 16<<10)
	crand.Read(val)
	var ferr atomic.Pointer[error]
	for range mib * 64 {
		cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				ferr.Store(&err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("slow-readers: fill: %w", err)
	}
	if e := ferr.Load(); e != nil {
		return fmt.Errorf("slow-readers: fill: %w", *e)
	}
	return nil
}

func createGoodTopic(ctx context.Context, seeds []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return fmt.Errorf("slow-readers: admin client: %w", err)
	}
	defer cl.Close()
	retention := strconv.Itoa(32 << 20)
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, map[string]*string{"retention.bytes": &retention}, slowGoodTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("slow-readers: create %s: %w", slowGoodTopic, err)
	}
	return nil
}

// startSlowGateway starts the gateway with an admin listener, and
// returns it with the admin address.
func startSlowGateway(ctx context.Context, cfg SlowReadersConfig, upstreams []string) (*faultProc, string, error) {
	var last error
	for range 10 {
		port, err := freeBase(3) // bootstrap, 3 brokers
		if err != nil {
			return nil, "", fmt.Errorf("slow-readers: %w", err)
		}
		// The admin port must be outside the ports the listener keeps for
		// node ids 0-99 (bootstrap+1 to bootstrap+100).
		aport, err := freeBase(0)
		if err != nil {
			return nil, "", fmt.Errorf("slow-readers: %w", err)
		}
		if aport >= port && aport <= port+100 {
			continue
		}
		admin := "127.0.0.1:" + strconv.Itoa(aport)
		var b strings.Builder
		b.WriteString("listeners:\n")
		if cfg.Mode == ModeSinglePort {
			fmt.Fprintf(&b, "  - {name: slow, listen: 127.0.0.1:%d, brokers: single-port}\n", port)
		} else {
			fmt.Fprintf(&b, "  - {name: slow, listen: 127.0.0.1:%d}\n", port)
		}
		fmt.Fprintf(&b, "upstream:\n  bootstrap: [%s]\n", strings.Join(upstreams, ", "))
		fmt.Fprintf(&b, "admin:\n  listen: %q\nlog:\n  level: info\n", admin)
		b.WriteString("limits:\n")
		if cfg.FrameTimeout > 0 {
			fmt.Fprintf(&b, "  frame_timeout: %s\n", cfg.FrameTimeout)
		}
		if cfg.MaxInFlight > 0 {
			fmt.Fprintf(&b, "  max_in_flight: %d\n", cfg.MaxInFlight)
		}
		file := filepath.Join(cfg.Dir, "gateway.yaml")
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			return nil, "", fmt.Errorf("slow-readers: %w", err)
		}
		p, err := startFaultProc(ctx, cfg.Tollgate, []string{"--config", file})
		if err == nil {
			p.addr = "127.0.0.1:" + strconv.Itoa(port)
			if err := waitUntil(ctx, 30*time.Second, func() bool { _, err := scrapeGoroutines(ctx, admin); return err == nil }); err != nil {
				p.kill()
				return nil, "", fmt.Errorf("slow-readers: admin %s: %w", admin, err)
			}
			return p, admin, nil
		}
		last = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, "", fmt.Errorf("slow-readers: start gateway: %w", last)
}

// slowTargets returns, per partition of the fetched topic, the address
// (as the gateway advertises it) of its leader and the partition:
// "host:port/partition".
func slowTargets(ctx context.Context, seed string, partitions int32) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(mctx, slowTopic)
	if err != nil {
		return nil, fmt.Errorf("metadata through the gateway: %w", err)
	}
	addr := map[int32]string{}
	for _, b := range md.Brokers {
		addr[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	var out []string
	for p := range partitions {
		pd, ok := md.Topics[slowTopic].Partitions[p]
		if !ok || addr[pd.Leader] == "" {
			return nil, fmt.Errorf("no leader for %s/%d through the gateway", slowTopic, p)
		}
		out = append(out, addr[pd.Leader]+"/"+strconv.Itoa(int(p)))
	}
	return out, nil
}

// slowFetch is a Fetch v12 frame for one partition from offset 0.
func slowFetch(cfg SlowReadersConfig, partition int32, corr int32) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 500, 1, cfg.FetchBytes, -1
	tp := kmsg.NewFetchRequestTopic()
	tp.Topic = slowTopic
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.PartitionMaxBytes, p.CurrentLeaderEpoch, p.LogStartOffset = partition, cfg.FetchBytes, -1, -1
	tp.Partitions = append(tp.Partitions, p)
	req.Topics = append(req.Topics, tp)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("slow-readers")).AppendRequest(nil, req, corr)
}

func splitTarget(t string) (addr string, partition int32) {
	a, p, _ := strings.Cut(t, "/")
	n, _ := strconv.Atoi(p)
	return a, int32(n)
}

// slowReader fetches from its partition every ReadEvery and reads each
// answer whole, redialling after an error.
func slowReader(ctx context.Context, cfg SlowReadersConfig, target string, delay time.Duration, bytes, errs *atomic.Int64) {
	addr, part := splitTarget(target)
	sleepCtx(ctx, delay)
	var c net.Conn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	stop := context.AfterFunc(ctx, func() {
		if c != nil {
			c.SetDeadline(time.Now())
		}
	})
	defer stop()
	var corr int32
	for ctx.Err() == nil {
		next := time.Now().Add(cfg.ReadEvery)
		if c == nil {
			var err error
			if c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr); err != nil {
				c = nil
				errs.Add(1)
				sleepCtx(ctx, time.Second)
				continue
			}
		}
		corr++
		c.SetDeadline(time.Now().Add(30 * time.Second))
		var size [4]byte
		_, err := c.Write(slowFetch(cfg, part, corr))
		if err == nil {
			_, err = io.ReadFull(c, size[:])
		}
		if err == nil {
			var n int64
			n, err = io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:])))
			bytes.Add(n + 4)
		}
		if err != nil {
			if ctx.Err() == nil {
				errs.Add(1)
			}
			c.Close()
			c = nil
		}
		sleepCtx(ctx, time.Until(next))
	}
}

// openStallers dials one connection per target with a 4 KiB receive
// buffer (set before connecting: the window is negotiated then), sends
// Pipeline Fetches on each and leaves them unread.
func openStallers(ctx context.Context, cfg SlowReadersConfig, targets []string) ([]net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	conns := make([]net.Conn, len(targets))
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	sem := make(chan struct{}, 64)
	for i, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			addr, part := splitTarget(t)
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				first.CompareAndSwap(nil, &err)
				return
			}
			var frames []byte
			for k := range cfg.Pipeline {
				frames = append(frames, slowFetch(cfg, part, int32(k+1))...)
			}
			c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(frames); err != nil {
				c.Close()
				first.CompareAndSwap(nil, &err)
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	out := slices.DeleteFunc(conns, func(c net.Conn) bool { return c == nil })
	if e := first.Load(); e != nil {
		return out, fmt.Errorf("open stalled connections: %w", *e)
	}
	return out, nil
}

// slowWork is the measured kgo producer and consumer.
type slowWork struct {
	prod, cons                   *kgo.Client
	produced, consumed           atomic.Int64 // records
	producedBytes, consumedBytes atomic.Int64
	cancel                       context.CancelFunc
	wg                           sync.WaitGroup
}

func startSlowWork(ctx context.Context, seed string) (*slowWork, error) {
	w := &slowWork{}
	var err error
	if w.prod, err = kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic(slowGoodTopic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(2000)); err != nil {
		return nil, fmt.Errorf("slow-readers: producer: %w", err)
	}
	if w.cons, err = kgo.NewClient(kgo.SeedBrokers(seed), kgo.ConsumeTopics(slowGoodTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd())); err != nil {
		w.prod.Close()
		return nil, fmt.Errorf("slow-readers: consumer: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	val := make([]byte, 1<<10)
	crand.Read(val)
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		for wctx.Err() == nil {
			w.prod.Produce(wctx, &kgo.Record{Value: val}, func(r *kgo.Record, err error) {
				if err == nil {
					w.produced.Add(1)
					w.producedBytes.Add(int64(len(r.Value)))
				}
			})
		}
	}()
	go func() {
		defer w.wg.Done()
		for wctx.Err() == nil {
			fs := w.cons.PollFetches(wctx)
			fs.EachRecord(func(r *kgo.Record) {
				w.consumed.Add(1)
				w.consumedBytes.Add(int64(len(r.Value)))
			})
		}
	}()
	return w, nil
}

func (w *slowWork) close() {
	w.cancel()
	w.wg.Wait()
	w.prod.Close()
	w.cons.Close()
}

// scrapeCounter sums the samples of a metric whose labels contain match
// in the admin server's /metrics.
func scrapeCounter(ctx context.Context, admin, name, match string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if match != "" && !strings.Contains(line, match) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}

// WriteJSON writes the report as JSON.
func (r *SlowReadersReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the phases and the summary.
func (r *SlowReadersReport) WriteTable(w io.Writer) error {
	mib := func(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tstalled\tproduce MB/s\tconsume MB/s\treaders MB/s\tmax RSS MiB\tmax goroutines\tkernel TCP MiB\treader errors\t")
	for _, p := range r.Phases {
		fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.2f\t%.2f\t%s\t%d\t%s\t%d\t\n", p.Round, p.Stalled, p.ProduceMBps, p.ConsumeMBps, p.ReaderMBps, mib(p.MaxRSS), p.MaxGoroutines, mib(p.MaxTCPMem), p.ReaderErrors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c := r.Config
	fmt.Fprintf(w, "\n%s, %d connections (%d reading, %d stalled), frame_timeout %v, max_in_flight %d\n",
		c.Mode, c.Conns, c.Conns/2, c.Conns-c.Conns/2, c.gatewayFrameTimeout(), c.gatewayMaxInFlight())
	fmt.Fprintf(w, "throughput stalled / baseline (median of %d rounds): produce %.3f, consume %.3f, readers %.3f (target >= 0.8)\n",
		len(r.Phases)/2, r.ProduceRatio, r.ConsumeRatio, r.ReaderRatio)
	fmt.Fprintf(w, "gateway RSS: first baseline max %s MiB, stalled max %s MiB, peak (VmHWM) %s MiB; bound %s MiB = baseline + %d stalled x %s KiB\n",
		mib(r.BaselineRSS), mib(r.StalledRSS), mib(r.PeakRSS), mib(r.Bound), c.Conns-c.Conns/2, strconv.FormatInt(r.PerConnBound>>10, 10))
	fmt.Fprintf(w, "gateway goroutines: baseline max %d, stalled max %d; closes with reason write_timeout: %d\n", r.BaselineGor, r.StalledGor, r.WriteTimeouts)
	fmt.Fprintf(w, "kgo records moved during the stalled phases: produced %d, consumed %d\n", r.StalledProduced, r.StalledConsumed)
	for _, e := range r.Errors {
		fmt.Fprintln(w, "error:", e)
	}
	ok := "yes"
	if !r.Met() {
		ok = "no"
	}
	fmt.Fprintf(w, "memory under the bound and records moving: %s\n", ok)
	return nil
}
