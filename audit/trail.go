package audit

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
	"gopkg.in/natefinch/lumberjack.v2"
)

// Level is how much a record says.
type Level int32

// Levels, in increasing detail.
const (
	Off     Level = iota // no records
	Summary              // from the request header and the gateway's own knowledge: no body decoding
	Full                 // plus Describe: topics, partitions, groups, error codes
)

func (l Level) String() string {
	switch l {
	case Summary:
		return configs.AuditSummary
	case Full:
		return configs.AuditFull
	}
	return configs.AuditOff
}

// ParseLevel reads off, summary or full.
func ParseLevel(s string) (Level, error) {
	switch s {
	case configs.AuditOff, "":
		return Off, nil
	case configs.AuditSummary:
		return Summary, nil
	case configs.AuditFull:
		return Full, nil
	}
	return Off, fmt.Errorf("audit level %q: want off, summary or full", s)
}

// Hooks is told about every record written or dropped; package metrics
// implements it. Calls come from the writer goroutine and from Log
// callers, concurrently.
type Hooks interface {
	AuditWritten()
	AuditDropped(reason string)
}

// Drop reasons passed to Hooks.AuditDropped: a closed set, safe as a
// metric label.
const (
	DropQueueFull = "queue_full" // best-effort: the queue was full
	DropSinkError = "sink_error" // best-effort: the sink failed to write it
	DropClosed    = "closed"     // logged after Close, or pending when Close gave up
	DropTapSlow   = "tap_slow"   // a live subscriber did not keep up (the sink still got it)
)

var (
	// ErrSinkFailed is returned by Log in strict mode while the sink is
	// failing: the gateway must refuse the request rather than forward
	// it unaudited. Healthy wraps it too, in either mode.
	ErrSinkFailed = errors.New("audit sink is failing")
	// ErrClosed is returned by Log in strict mode after Close.
	ErrClosed = errors.New("audit trail is closed")
)

// Defaults that options override.
const (
	DefaultRetryInterval = time.Second
	// subscriberBuffer is how many records a live subscriber may lag
	// before its records are dropped.
	subscriberBuffer = 1024
	// maxWriteBytes bounds one write to the sink; records are batched up
	// to it so that a busy trail makes few system calls.
	maxWriteBytes = 64 << 10
)

// Option changes how New builds a Trail.
type Option func(*Trail)

// WithSink writes records to w instead of the configured sink (tests, or
// an embedding program). If w is an io.Closer, Close closes it.
func WithSink(w io.Writer) Option { return func(t *Trail) { t.sink = w } }

// WithLogger sets where sink failures and recoveries are logged.
func WithLogger(l *slog.Logger) Option { return func(t *Trail) { t.log = l } }

// WithRetryInterval sets how often a failing sink is retried (default 1s).
func WithRetryInterval(d time.Duration) Option { return func(t *Trail) { t.retry = d } }

// Trail is the audit trail: it filters records, queues them for the sink
// writer, and fans them out to live subscribers. Its methods are safe for
// concurrent use, and a nil *Trail is a trail that is off.
type Trail struct {
	level  atomic.Int32 // a Level; Reconfigure changes it
	strict bool
	filter atomic.Pointer[Filter] // nil selects every record
	hooks  Hooks
	log    *slog.Logger
	retry  time.Duration

	sink  io.Writer
	file  *lumberjack.Logger // the sink when it is a file; only the writer goroutine touches it after New
	queue chan *Record

	maxSizeMiB atomic.Int64 // a new audit.sink.max_size for the writer to apply; 0: none

	failing atomic.Bool
	lastErr atomic.Pointer[error]

	subMu sync.RWMutex
	subs  []*subscriber
	nsubs atomic.Int32

	done       chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once
	closeErr   error
}

type subscriber struct {
	f  *Filter
	ch chan *Record
}

type noHooks struct{}

func (noHooks) AuditWritten()       {}
func (noHooks) AuditDropped(string) {}

// New builds a trail from its configuration and starts its writer. With
// level off no sink is opened, but live subscribers still work. A file
// sink is opened (and its directory created) at once: a failure is not
// an error here, since best-effort keeps serving without its sink, but
// it makes the trail unhealthy, and in strict mode Log refuses requests
// until the sink recovers. hooks may be nil.
func New(cfg configs.Audit, hooks Hooks, opts ...Option) (*Trail, error) {
	level, err := ParseLevel(cfg.Level)
	if err != nil {
		return nil, err
	}
	f, err := NewFilter(cfg.Filter)
	if err != nil {
		return nil, err
	}
	if hooks == nil {
		hooks = noHooks{}
	}
	q := cfg.Queue
	if q <= 0 {
		q = configs.DefaultAuditQueue
	}
	t := &Trail{
		strict:     cfg.Mode == configs.AuditStrict,
		hooks:      hooks,
		log:        slog.Default(),
		retry:      DefaultRetryInterval,
		queue:      make(chan *Record, q),
		done:       make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	t.level.Store(int32(level))
	t.filter.Store(f)
	for _, o := range opts {
		o(t)
	}
	if t.sink == nil && level != Off {
		if cfg.Sink.Kafka != nil {
			return nil, errors.New("audit.sink.kafka: the sink needs a Kafka client: give it with WithSink(NewKafkaSink(...)) (package gateway does)")
		}
		if cfg.Sink.Stdout() {
			t.sink = os.Stdout
		} else {
			t.file = &lumberjack.Logger{
				Filename:   cfg.Sink.File,
				MaxSize:    cfg.Sink.MaxSizeMiB(),
				MaxBackups: cfg.Sink.Keep,
			}
			t.sink = t.file
		}
	}
	if t.sink != nil {
		t.probe()
	}
	go t.run()
	return t, nil
}

// Level is the detail the gateway should collect now: the configured
// level, raised to Full while a live subscriber is attached (the tap
// shows topics). The sink still gets the configured level.
func (t *Trail) Level() Level {
	if t == nil {
		return Off
	}
	if t.nsubs.Load() > 0 {
		return Full
	}
	return Level(t.level.Load())
}

// Wants is the cheap header pre-check the gateway makes before it builds
// a record: false means Log would discard it.
func (t *Trail) Wants(listener string, key int16, clientID string) bool {
	if t == nil {
		return false
	}
	if t.nsubs.Load() > 0 {
		return true
	}
	return Level(t.level.Load()) != Off && t.filter.Load().MatchHeader(listener, key, clientID)
}

// Strict reports whether the trail is in strict mode.
func (t *Trail) Strict() bool { return t != nil && t.strict }

// Log hands a record to the trail; the trail owns it from then on (see
// the package comment). In best-effort mode Log never blocks and never
// fails: a record that does not fit in the queue is dropped and counted.
// In strict mode Log blocks while the queue is full, and never drops an
// accepted record: it is queued even while the sink is failing, and
// retried until the sink recovers. Log then returns an error wrapping
// ErrSinkFailed, and the caller must refuse further requests (check
// Healthy before forwarding each one) until it is healthy again. After
// Close, strict Log returns ErrClosed.
func (t *Trail) Log(rec *Record) error {
	if t == nil {
		return nil
	}
	if t.nsubs.Load() > 0 {
		t.publish(rec)
	}
	if Level(t.level.Load()) == Off || !t.filter.Load().Match(rec) {
		return nil
	}
	select {
	case <-t.done:
		t.hooks.AuditDropped(DropClosed)
		if t.strict {
			return ErrClosed
		}
		return nil
	default:
	}
	if !t.strict {
		select {
		case t.queue <- rec:
		default:
			t.hooks.AuditDropped(DropQueueFull)
		}
		return nil
	}
	// Strict: the request this record describes has usually been
	// forwarded already, so the record is queued even while the sink is
	// failing (the writer retries it); the error tells the caller to
	// refuse what comes next.
	select {
	case t.queue <- rec:
		return t.Healthy()
	case <-t.done:
		t.hooks.AuditDropped(DropClosed)
		return ErrClosed
	}
}

// Healthy returns nil, or an error wrapping ErrSinkFailed with the last
// write error while the sink is failing.
func (t *Trail) Healthy() error {
	if t == nil || !t.failing.Load() {
		return nil
	}
	if p := t.lastErr.Load(); p != nil {
		return fmt.Errorf("%w: %w", ErrSinkFailed, *p)
	}
	return ErrSinkFailed
}

// Close stops the trail: records still queued are written (a failing
// strict sink gets one last try), subscribers' channels are closed, and
// a file sink is closed. Call it after the data path has stopped calling
// Log. It is safe to call more than once.
func (t *Trail) Close() error {
	if t == nil {
		return nil
	}
	t.closeOnce.Do(func() {
		t.subMu.Lock()
		close(t.done)
		for _, s := range t.subs {
			close(s.ch)
		}
		t.subs = nil
		t.nsubs.Store(0)
		t.subMu.Unlock()
		<-t.writerDone
		if c, ok := t.sink.(io.Closer); ok && t.sink != io.Writer(os.Stdout) {
			if err := c.Close(); err != nil {
				t.closeErr = fmt.Errorf("close audit sink: %w", err)
			}
		}
	})
	return t.closeErr
}
