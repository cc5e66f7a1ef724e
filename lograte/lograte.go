// Package lograte logs events that a client can trigger at will — refused
// connections, malformed frames, failed logins, TLS mistakes — without
// letting that client fill the disk: per reason, the first few events of
// each interval are logged in full, the rest are only counted, and at the
// end of an interval with suppressed events one summary line gives the
// count per reason and the busiest source addresses. Metrics are the
// place that counts every event; this package only decides what is
// written to the log.
//
// A *Logger is safe for concurrent use. Whoever creates it owns it and
// calls Close when done (Close writes the pending summary).
package lograte

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"time"
)

// Defaults for Options fields left zero.
const (
	DefaultBurst    = 5           // full lines per reason per interval
	DefaultInterval = time.Minute // summary period
	DefaultTopAddrs = 5           // addresses named in a summary
	maxTrackedAddrs = 1024        // distinct addresses counted per interval; the rest are "other"
)

// Options tune a Logger; zero fields take the defaults above.
type Options struct {
	Burst    int
	Interval time.Duration
	TopAddrs int
	// Level of the summary line (default slog.LevelWarn).
	SummaryLevel slog.Level
}

// Logger is the rate-limited front of a *slog.Logger.
type Logger struct {
	log  *slog.Logger
	opts Options

	mu      sync.Mutex
	logged  map[string]int // reason -> full lines this interval
	dropped map[string]int // reason -> suppressed events this interval
	addrs   map[string]int // source address -> suppressed events this interval
	other   int            // suppressed events from addresses past maxTrackedAddrs
	timer   *time.Timer    // ends the interval; nil when none is running
	closed  bool
}

// New returns a Logger writing to log.
func New(log *slog.Logger, o Options) *Logger {
	if log == nil {
		log = slog.Default()
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.TopAddrs <= 0 {
		o.TopAddrs = DefaultTopAddrs
	}
	if o.SummaryLevel == 0 {
		o.SummaryLevel = slog.LevelWarn
	}
	l := &Logger{log: log, opts: o}
	l.reset()
	return l
}

func (l *Logger) reset() {
	l.logged, l.dropped, l.addrs, l.other = map[string]int{}, map[string]int{}, map[string]int{}, 0
}

// Warn logs msg at WARN, subject to the limit for reason. addr is the
// client's address (host or host:port; only the host is counted).
func (l *Logger) Warn(reason, addr, msg string, attrs ...any) {
	l.Log(slog.LevelWarn, reason, addr, msg, attrs...)
}

// Info logs msg at INFO, subject to the limit for reason.
func (l *Logger) Info(reason, addr, msg string, attrs ...any) {
	l.Log(slog.LevelInfo, reason, addr, msg, attrs...)
}

// Log logs msg at level with the attributes "reason" and "client" added,
// or counts it when reason has used up its lines for this interval.
func (l *Logger) Log(level slog.Level, reason, addr, msg string, attrs ...any) {
	if l == nil || !l.Allow(reason, addr) {
		return
	}
	attrs = append(attrs, "reason", reason)
	if addr != "" {
		attrs = append(attrs, "client", addr)
	}
	l.log.Log(context.Background(), level, msg, attrs...)
}

// Allow reports whether an event of reason from addr may be logged now;
// when it may not, the event is counted for the interval's summary. It
// is for callers that log through a logger of their own (one carrying a
// connection's attributes): if lr.Allow(reason, addr) { log.Warn(...) }.
// A nil Logger allows everything.
func (l *Logger) Allow(reason, addr string) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer == nil && !l.closed {
		l.timer = time.AfterFunc(l.opts.Interval, l.endInterval)
	}
	if l.logged[reason] < l.opts.Burst {
		l.logged[reason]++
		return true
	}
	l.dropped[reason]++
	host := hostOf(addr)
	switch _, seen := l.addrs[host]; {
	case seen || len(l.addrs) < maxTrackedAddrs:
		l.addrs[host]++
	default:
		l.other++
	}
	return false
}

// endInterval writes the summary of the interval that ended and starts
// the next one.
func (l *Logger) endInterval() {
	l.mu.Lock()
	l.timer = nil
	line, attrs := l.summaryLocked()
	l.reset()
	l.mu.Unlock()
	if line {
		l.log.Log(context.Background(), l.opts.SummaryLevel, "repeated log lines suppressed", attrs...)
	}
}

// Flush writes the summary of the current interval now and starts a new
// interval (tests, and Close).
func (l *Logger) Flush() {
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.mu.Unlock()
	l.endInterval()
}

// Close writes the pending summary and stops the interval timer; later
// events are still rate-limited but no new summary is scheduled.
func (l *Logger) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.Flush()
}

// Suppressed reports the events counted but not logged in the current
// interval, by reason (tests and diagnostics).
func (l *Logger) Suppressed() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.dropped))
	for k, v := range l.dropped {
		out[k] = v
	}
	return out
}

// summaryLocked builds the summary attributes; line is false when nothing
// was suppressed. Caller holds l.mu.
func (l *Logger) summaryLocked() (line bool, attrs []any) {
	total := 0
	for _, n := range l.dropped {
		total += n
	}
	if total == 0 {
		return false, nil
	}
	return true, []any{
		"interval", l.opts.Interval.String(),
		"suppressed", total,
		"by_reason", countList(l.dropped, 0, 0),
		"busiest", countList(l.addrs, l.opts.TopAddrs, l.other),
	}
}

// countList renders counts as "a=3, b=1", largest first (ties by name),
// at most top entries when top > 0; other adds an "other=N" entry.
func countList(m map[string]int, top, other int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	rest := other
	if top > 0 && len(keys) > top {
		for _, k := range keys[top:] {
			rest += m[k]
		}
		keys = keys[:top]
	}
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	if rest > 0 {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "other=%d", rest)
	}
	return b.String()
}

// hostOf strips a port from addr ("1.2.3.4:5678" -> "1.2.3.4",
// "[::1]:9" -> "::1"); an address without a port is returned as is.
func hostOf(addr string) string {
	if addr == "" {
		return "unknown"
	}
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
