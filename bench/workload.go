package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type kind int

const (
	kindProduce kind = iota // as fast as the path goes
	kindConsume             // read a preloaded topic from offset 0, over and over
	kindLatency             // produce at a fixed rate and consume, timing each record
)

// workload is one measured traffic pattern.
type workload struct {
	name    string
	kind    kind
	size    int  // record value bytes
	acksAll bool // acks=all with the idempotent producer (kgo's default); else acks=1
}

// workloads: 1 KiB records at acks=1 and acks=all, 100 B records at
// acks=all (kgo's default) and acks=1, consume, and end-to-end latency at
// a fixed rate.
var workloads = []workload{
	{name: "produce-1k-acks1", kind: kindProduce, size: 1024},
	{name: "produce-1k-acksall", kind: kindProduce, size: 1024, acksAll: true},
	{name: "produce-100b", kind: kindProduce, size: 100, acksAll: true},
	{name: "produce-100b-acks1", kind: kindProduce, size: 100},
	{name: "consume", kind: kindConsume, size: 1024},
	{name: "latency", kind: kindLatency, size: 1024, acksAll: true},
}

// consumeTopic is the topic the consume workload reads; it is written once,
// before the first run, and shared by every path.
const consumeTopic = "bench-consume"

// WorkloadNames lists the workloads in the order they run.
func WorkloadNames() []string {
	names := make([]string, len(workloads))
	for i, w := range workloads {
		names[i] = w.name
	}
	return names
}

func findWorkload(name string) (workload, bool) {
	for _, w := range workloads {
		if w.name == name {
			return w, true
		}
	}
	return workload{}, false
}

func (w workload) describe(o Options) string {
	acks := "acks=1"
	if w.acksAll {
		acks = "acks=all, idempotent"
	}
	switch w.kind {
	case kindConsume:
		return fmt.Sprintf("fetch %d B records of a %d MiB topic from offset 0, looping", w.size, o.ConsumeBytes>>20)
	case kindLatency:
		return fmt.Sprintf("%d B records at %d/s (%s, uncompressed, linger 0), produce to fetch on one partition", w.size, o.Rate, acks)
	}
	return fmt.Sprintf("%d B records as fast as possible (%s, uncompressed, kgo defaults otherwise)", w.size, acks)
}

// job is a running workload.
type job interface {
	// window sets the measured window; end is zero while it is open.
	window(start, end time.Time)
	// stop ends the workload, closes its clients, and returns its latency
	// figures (nil for throughput workloads).
	stop() *Latency
}

func (w workload) start(ctx context.Context, b *bencher, e *pathEnv, m *meter, topic string) (job, error) {
	switch w.kind {
	case kindConsume:
		return startConsume(ctx, b, e, m, topic)
	case kindLatency:
		return startLatency(ctx, w, b.opts.Rate, e, m, topic)
	}
	return startProduce(ctx, w, e, m, topic)
}

// producerOpts are the client options of a workload's producer. Batches
// are not compressed (kgo compresses with snappy by default): the benchmark
// measures moving bytes, and compression would spend client CPU to move
// fewer of them.
func producerOpts(w workload, topic string) []kgo.Opt {
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression())}
	if !w.acksAll {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	return opts
}

// payload is a record value of random bytes, so that nothing on the way
// could gain by compressing it.
func payload(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// produceJob keeps the producer's buffer full until stopped.
type produceJob struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startProduce(ctx context.Context, w workload, e *pathEnv, m *meter, topic string) (job, error) {
	cl, err := e.newClient(m, producerOpts(w, topic)...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	j := &produceJob{cl: cl, cancel: cancel, done: make(chan struct{})}
	val := payload(w.size)
	size := int64(w.size)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			if ctx.Err() == nil {
				m.errs.Add(1)
			}
			return
		}
		m.records.Add(1)
		m.payload.Add(size)
	}
	go func() {
		defer close(j.done)
		for ctx.Err() == nil {
			// Produce blocks while the client's buffer is full, which
			// paces this loop at the path's speed.
			cl.Produce(ctx, &kgo.Record{Value: val}, promise)
		}
	}()
	return j, nil
}

func (j *produceJob) window(time.Time, time.Time) {}

func (j *produceJob) stop() *Latency {
	j.cancel()
	<-j.done
	j.cl.Close() // fails what is still buffered; it is past the window
	return nil
}

// consumeJob fetches the consume topic, seeking a partition back to 0
// whenever it reaches the end offset recorded at preload.
type consumeJob struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startConsume(ctx context.Context, b *bencher, e *pathEnv, m *meter, topic string) (job, error) {
	start := make(map[int32]kgo.Offset)
	for p, end := range b.consumeEnd {
		if end > 0 {
			start[p] = kgo.NewOffset().At(0)
		}
	}
	cl, err := e.newClient(m, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	j := &consumeJob{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(j.done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			fs.EachError(func(string, int32, error) { m.errs.Add(1) })
			var rewind map[int32]kgo.EpochOffset
			fs.EachPartition(func(p kgo.FetchTopicPartition) {
				if len(p.Records) == 0 {
					return
				}
				var n int64
				for _, r := range p.Records {
					n += int64(len(r.Value))
				}
				m.records.Add(int64(len(p.Records)))
				m.payload.Add(n)
				if p.Records[len(p.Records)-1].Offset >= b.consumeEnd[p.Partition]-1 {
					if rewind == nil {
						rewind = make(map[int32]kgo.EpochOffset)
					}
					rewind[p.Partition] = kgo.EpochOffset{Epoch: -1, Offset: 0}
				}
			})
			if rewind != nil {
				cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: rewind})
			}
		}
	}()
	return j, nil
}

func (j *consumeJob) window(time.Time, time.Time) {}

func (j *consumeJob) stop() *Latency {
	j.cancel()
	<-j.done
	j.cl.Close()
	return nil
}

// preloadConsume writes the consume topic once, directly to kfake. With
// consume prefixes (the vc suite) it writes one copy under each, record
// by record to the same partition, so every copy has the same end
// offsets.
func (b *bencher) preloadConsume(ctx context.Context) error {
	prefixes := b.consumePrefixes
	if len(prefixes) == 0 {
		prefixes = []string{""}
	}
	for _, p := range prefixes {
		if err := b.createTopic(ctx, p+consumeTopic, b.opts.Partitions, nil); err != nil {
			return err
		}
	}
	w := workload{size: 1024}
	opts := append(producerOpts(w, consumeTopic), kgo.SeedBrokers(b.upstreams...))
	if len(prefixes) > 1 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("preload client: %w", err)
	}
	defer cl.Close()
	val := payload(w.size)
	var failed atomic.Int64
	var firstErr atomic.Value
	for i := range b.opts.ConsumeBytes / int64(w.size) {
		for _, p := range prefixes {
			r := &kgo.Record{Topic: p + consumeTopic, Value: val}
			if len(prefixes) > 1 {
				r.Partition = int32(i % int64(b.opts.Partitions))
			}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil && failed.Add(1) == 1 {
					firstErr.Store(err)
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("preload %s: %w", consumeTopic, err)
	}
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("preload %s: %d records failed, first: %v", consumeTopic, n, firstErr.Load())
	}
	for i, p := range prefixes {
		ends, err := b.admin.ListEndOffsets(ctx, p+consumeTopic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return fmt.Errorf("preload %s: end offsets: %w", p+consumeTopic, err)
		}
		got := make(map[int32]int64)
		ends.Each(func(o kadm.ListedOffset) { got[o.Partition] = o.Offset })
		if i == 0 {
			b.consumeEnd = got
		} else if !maps.Equal(got, b.consumeEnd) {
			return fmt.Errorf("preload: %s ends at %v, %s at %v", p+consumeTopic, got, prefixes[0]+consumeTopic, b.consumeEnd)
		}
	}
	return nil
}

// latencyJob produces at a fixed rate and consumes the same partition over
// the same path, timing each record from just before Produce to its ack
// (ack latency) and to its arrival at the consumer (end-to-end). The send
// time travels in the record's first 8 bytes; both clients share the
// process clock.
type latencyJob struct {
	prod, cons *kgo.Client
	m          *meter
	epoch      time.Time
	winStart   atomic.Int64 // ns since epoch; MaxInt64 until the window opens
	winEnd     atomic.Int64 // ns since epoch; MaxInt64 while the window is open

	mu       sync.Mutex
	ack, e2e []time.Duration

	stopProduce, stopConsume context.CancelFunc
	prodDone, consDone       chan struct{}
}

func startLatency(ctx context.Context, w workload, rate int, e *pathEnv, m *meter, topic string) (job, error) {
	j := &latencyJob{m: m, epoch: time.Now(), prodDone: make(chan struct{}), consDone: make(chan struct{})}
	j.winStart.Store(math.MaxInt64)
	j.winEnd.Store(math.MaxInt64)
	var err error
	j.cons, err = e.newClient(m,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxWait(time.Second))
	if err != nil {
		return nil, err
	}
	j.prod, err = e.newClient(m, append(producerOpts(w, topic), kgo.ProducerLinger(0))...)
	if err != nil {
		j.cons.Close()
		return nil, err
	}
	pctx, stopP := context.WithCancel(ctx)
	cctx, stopC := context.WithCancel(ctx)
	j.stopProduce, j.stopConsume = stopP, stopC
	go j.produce(pctx, w.size, rate)
	go j.consume(cctx)
	return j, nil
}

func (j *latencyJob) now() time.Duration { return time.Since(j.epoch) }

func (j *latencyJob) inWindow(sent time.Duration) bool {
	return int64(sent) >= j.winStart.Load() && int64(sent) < j.winEnd.Load()
}

func (j *latencyJob) produce(ctx context.Context, size, rate int) {
	defer close(j.prodDone)
	interval := time.Second / time.Duration(rate)
	for i := 0; ; i++ {
		if wait := time.Duration(i)*interval - j.now(); wait > 0 {
			if sleep(ctx, wait) != nil {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		val := payload(size)
		sent := j.now()
		binary.BigEndian.PutUint64(val, uint64(sent))
		j.prod.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					j.m.errs.Add(1)
				}
				return
			}
			j.m.records.Add(1)
			j.m.payload.Add(int64(size))
			if d := j.now() - sent; j.inWindow(sent) {
				j.mu.Lock()
				j.ack = append(j.ack, d)
				j.mu.Unlock()
			}
		})
	}
}

func (j *latencyJob) consume(ctx context.Context) {
	defer close(j.consDone)
	for {
		fs := j.cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		now := j.now()
		fs.EachError(func(string, int32, error) { j.m.errs.Add(1) })
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) < 8 {
				return
			}
			sent := time.Duration(binary.BigEndian.Uint64(r.Value))
			if j.inWindow(sent) {
				j.mu.Lock()
				j.e2e = append(j.e2e, now-sent)
				j.mu.Unlock()
			}
		})
	}
}

func (j *latencyJob) window(start, end time.Time) {
	j.winStart.Store(int64(start.Sub(j.epoch)))
	if !end.IsZero() {
		j.winEnd.Store(int64(end.Sub(j.epoch)))
	}
}

// stop ends production, then gives the consumer up to 5 s to see every
// record acked inside the window, so the slowest records count too.
func (j *latencyJob) stop() *Latency {
	j.stopProduce()
	<-j.prodDone
	fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	j.prod.Flush(fctx)
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		j.mu.Lock()
		caught := len(j.e2e) >= len(j.ack)
		j.mu.Unlock()
		if caught || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	j.stopConsume()
	<-j.consDone
	j.prod.Close()
	j.cons.Close()

	j.mu.Lock()
	defer j.mu.Unlock()
	return &Latency{
		Samples: len(j.e2e),
		Acked:   len(j.ack),
		E2EP50:  percentileMs(j.e2e, 0.50),
		E2EP99:  percentileMs(j.e2e, 0.99),
		AckP50:  percentileMs(j.ack, 0.50),
		AckP99:  percentileMs(j.ack, 0.99),
	}
}

// percentileMs is the nearest-rank percentile of ds in milliseconds (0 for
// no samples; Latency.Samples says so); it sorts ds.
func percentileMs(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(p*float64(len(ds)))) - 1
	i = max(0, min(i, len(ds)-1))
	return float64(ds[i]) / 1e6
}
