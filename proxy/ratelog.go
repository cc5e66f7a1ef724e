package proxy

import (
	"log/slog"
	"sync"
	"time"
)

// rateLog logs one event per kind at most once per interval, counting
// the ones it suppressed, so what a client can trigger at will cannot
// flood the log. (A minimal one, local to the gateway's hostile-input
// paths; it can fold into a shared rate-limited logger.)
type rateLog struct {
	every time.Duration
	mu    sync.Mutex
	kinds map[string]*rateLogKind
}

type rateLogKind struct {
	last       time.Time
	suppressed int
}

// maxRateLogKinds bounds the kinds remembered (kinds come from closed sets,
// but a bound keeps a mistake from growing the map).
const maxRateLogKinds = 256

func newRateLog(every time.Duration) *rateLog {
	return &rateLog{every: every, kinds: map[string]*rateLogKind{}}
}

// warn logs msg at Warn unless kind was logged within the interval; the
// next log of the kind carries the count it suppressed.
func (r *rateLog) warn(log *slog.Logger, kind, msg string, args ...any) {
	now := time.Now()
	r.mu.Lock()
	k := r.kinds[kind]
	if k == nil {
		if len(r.kinds) >= maxRateLogKinds {
			clear(r.kinds)
		}
		k = &rateLogKind{}
		r.kinds[kind] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < r.every {
		k.suppressed++
		r.mu.Unlock()
		return
	}
	suppressed := k.suppressed
	k.last, k.suppressed = now, 0
	r.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "suppressed_since_last", suppressed)
	}
	log.Warn(msg, args...)
}
