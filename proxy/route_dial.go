package proxy

import (
	"fmt"
	"sync"
	"time"
)

// A single-port session dials a broker when a request part needs it and
// its tunnel has no live connection there. While the broker refuses the
// gateway (a rotated certificate the gateway does not trust yet, a
// changed password, a broker down), every request part of every session
// would dial it again: the clients' retries, every 50 ms here and there,
// became hundreds of failed TLS handshakes or SASL logins a second at the
// broker (the credential faults, bench/faults_auth.go). A port-per-broker
// session retries its one dial with backoff (upstream_faults.go); the
// tunnels share the same schedule per broker: after a failed dial, parts
// for that broker fail at once with that dial's error until the backoff
// (dialRetryFirst, doubling to dialRetryMax) has passed, and the next
// part dials again. A dial that succeeds ends the hold.

// dialHolds is, per broker, the hold after its latest failed dial.
// The zero value is ready.
type dialHolds struct {
	mu sync.Mutex
	m  map[int32]*dialHold
}

type dialHold struct {
	until time.Time
	wait  time.Duration
	err   error
}

// held returns the latest dial error of node while its hold lasts, else
// nil (dial).
func (h *dialHolds) held(node int32) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.m[node]
	if d == nil {
		return nil
	}
	left := time.Until(d.until)
	if left <= 0 {
		return nil
	}
	return fmt.Errorf("upstream node %d not dialled again for %v after a failed dial: %w", node, left.Round(time.Millisecond), d.err)
}

// done records a dial's outcome.
func (h *dialHolds) done(node int32, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		delete(h.m, node)
		return
	}
	if h.m == nil {
		h.m = map[int32]*dialHold{}
	}
	d := h.m[node]
	if d == nil {
		d = &dialHold{}
		h.m[node] = d
	}
	if d.wait == 0 || time.Since(d.until) > dialRetryMax {
		d.wait = dialRetryFirst // a first failure, or one long after the last
	} else {
		d.wait = min(2*d.wait, dialRetryMax)
	}
	d.until, d.err = time.Now().Add(d.wait), err
}
