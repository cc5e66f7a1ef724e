package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/wire"
)

// Bounding what one request, and all requests together, may hold.
//
// 1. Size by API: only Produce carries bulk data, so only Produce may use
//    MaxFrameBytes (Kafka's socket.request.max.bytes, 100 MiB); every
//    other request is held to MaxRequestBytes. A 100 MiB Metadata is not a
//    request any client sends, and it decodes into far more memory than
//    its size.
// 2. Bodies are read as they arrive: a buffer starts at what is already
//    buffered (or 64 KiB) and grows fourfold only once full, so a
//    connection that declared 100 MiB and sent 64 KiB holds about 64 KiB
//    (one that sent 65 KiB, 256 KiB), not 100 MiB. Each growth copies what
//    was read; fourfold steps copy a third of the frame where doubling
//    copied all of it (a 1 MiB Produce: 320 KiB instead of 960 KiB).
// 3. Every body buffer is reserved from one budget shared by all
//    connections, MaxRequestBytesInFlight (Kafka's
//    queued.max.request.bytes): when it is spent, a connection stops
//    reading (TCP pushes back on the client) until others finish, up to
//    its frame deadline. A reservation lasts until the request is done:
//    the built-in broker answered it, or the gateway forwarded and
//    accounted it.
//
// Streamed frames (gateway mode, no policy or audit decode) never hold
// their body and take nothing from the budget.

// firstChunk is the body buffer a large frame starts with; frameGrowth
// is the factor it grows by once full.
const (
	firstChunk  = 64 << 10
	frameGrowth = 4
)

// errBudgetTimeout: the shared budget stayed spent until the frame's deadline.
var errBudgetTimeout = errors.New("request memory budget (limits.max_request_bytes_in_flight) stayed spent until the frame deadline")

// checkRequestSize refuses a frame larger than its API may need. It runs
// before the frame's header is read whole, on the key alone (the two
// bytes after the size prefix), so a refused frame costs nothing.
func (s *session) checkRequestSize(size int) error {
	limit := int(s.srv.opts.MaxRequestBytes)
	if size <= limit {
		return nil
	}
	b, err := s.cr.Peek(6)
	if err != nil {
		return badRequest(closeMalformed, "frame truncated before its API key: %w", truncated(err))
	}
	if err := requestSizeErr(int16(binary.BigEndian.Uint16(b[4:])), size, limit); err != nil {
		return badRequest(closeMalformed, "%w", err)
	}
	return nil
}

// requestSizeErr says why a frame of size bytes is too large for key, or
// nil: only Produce may exceed limit (the size prefix check already held
// it to MaxFrameBytes).
func requestSizeErr(key int16, size, limit int) error {
	if size <= limit || key == apis.Produce {
		return nil
	}
	return fmt.Errorf("%w: %s request of %d bytes; requests other than Produce are limited to %d (limits.max_request_bytes)",
		wire.ErrFrameTooLarge, apiName(key), size, limit)
}

// byteBudget is a counting semaphore of bytes shared by every session of a
// Server. Sessions reserve before they grow a body buffer and release when
// the request is done.
//
// Frames grow their reservation as bytes arrive, so frames still being
// read could together hold the whole budget while each waits for more: a
// deadlock only frame timeouts would end. So when every other frame being
// read is waiting and the bytes the readers hold are what is missing, the
// reservation is granted over the budget (as Kafka's non-strict memory
// pool lets an allocation exceed what is left); a buffer only grows to
// twice what its client has sent. A shortage caused by frames already read
// (held until answered) is waited out: those release on their own.
type byteBudget struct {
	hooks    Hooks
	total    int64
	mu       sync.Mutex
	avail    int64         // may go below zero after an over-budget grant
	waiting  int           // reads blocked in reserve
	reading  int           // frames being read into memory (between startRead and endRead)
	readHeld int64         // bytes those frames hold
	freed    chan struct{} // closed (and replaced) whenever bytes are released
}

func newByteBudget(n int64, hooks Hooks) *byteBudget {
	return &byteBudget{hooks: hooks, total: n, avail: n, freed: make(chan struct{})}
}

// reserve takes n bytes, waiting while fewer are available until deadline
// or until closed is closed.
func (b *byteBudget) reserve(n int64, deadline time.Time, closed <-chan struct{}) error {
	if b == nil || n <= 0 {
		return nil
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	waited := false
	for {
		b.mu.Lock()
		if b.avail >= n || b.waiting >= b.reading-1 && b.avail+b.readHeld >= n {
			// Enough is free; or every other frame being read waits too
			// and what they hold is what is missing (frames already read
			// release on their own: wait for those).
			b.avail -= n
			b.readHeld += n
			inFlight := b.total - b.avail
			b.mu.Unlock()
			b.hooks.RequestBudget(inFlight, waited)
			return nil
		}
		waited = true
		freed := b.freed
		b.waiting++
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
		}
		var err error
		select {
		case <-freed:
		case <-timer.C:
			err = errBudgetTimeout
		case <-closed:
			err = net.ErrClosed
		}
		b.mu.Lock()
		b.waiting--
		b.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// startRead and endRead bracket the reading of one frame into memory.
func (b *byteBudget) startRead() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.reading++
	b.mu.Unlock()
}

func (b *byteBudget) endRead(held int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.reading--
	b.readHeld -= held
	close(b.freed) // a waiter may now be the only frame left reading
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// release gives n bytes back and wakes the waiters.
func (b *byteBudget) release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.avail += n
	inFlight := b.total - b.avail
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
	b.hooks.RequestBudget(inFlight, false)
}

// readBody reads n bytes of the current frame from the client into a
// pooled buffer that grows as bytes arrive, each growth reserved from the
// shared budget first. The buffer's reservation goes back with it
// (putFrame). The frame's deadline moves forward as chunks arrive.
//
// owned: the bytes will be handed over for good (ownedBody), so the
// frame is a heap one (getFrameIn), never mapped outside the heap.
func (s *session) readBody(n int, owned bool) (*frameBuf, error) {
	mapped := framesOffHeap && !owned
	var held int64 // what this frame reserved while being read
	s.srv.budget.startRead()
	defer func() { s.srv.budget.endRead(held) }()
	start := min(n, max(s.cr.Buffered(), firstChunk))
	if err := s.reserve(start); err != nil {
		return nil, err
	}
	held += int64(start)
	f := getFrameIn(start, mapped)
	f.budget, f.reserved = s.srv.budget, int64(start)
	f.b = f.b[:0]
	for len(f.b) < n {
		if len(f.b) == cap(f.b) {
			next := min(n, frameGrowth*cap(f.b))
			if err := s.reserve(next - int(f.reserved)); err != nil {
				putFrame(f)
				return nil, err
			}
			held += int64(next) - f.reserved
			g := getFrameIn(next, mapped)
			g.b = append(g.b[:0], f.b...)
			g.budget, g.reserved, f.reserved = f.budget, int64(next), 0 // the reservation moves
			putFrame(f)
			f = g
		}
		to := min(n, cap(f.b))
		s.client.SetReadDeadline(s.frameDeadline())
		k, err := io.ReadFull(s.cr, f.b[len(f.b):to])
		f.b = f.b[:len(f.b)+k]
		if err != nil {
			putFrame(f)
			return nil, badRequest(closeMalformed, "request truncated: %d of %d bytes: %w", len(f.b), n, truncated(err))
		}
	}
	return f, nil
}

// reserve takes n bytes from the shared budget for the current frame.
func (s *session) reserve(n int) error {
	if err := s.srv.budget.reserve(int64(n), s.frameDeadline(), s.closed); err != nil {
		if errors.Is(err, errBudgetTimeout) {
			return badRequest(closeOverloaded, "%w", err)
		}
		return err
	}
	return nil
}

// ownedBody reads n bytes for a backend that keeps them (the built-in
// broker owns every body but Produce's, and SASL keeps its tokens). The
// bytes leave the pool for good, in the heap (never a mapped frame, which
// nothing would unmap); the reservation is held in s.heldBody until the backend has
// answered (handleLocal takes it over) or the read loop is done with the
// request (releaseHeld).
func (s *session) ownedBody(n int) ([]byte, error) {
	f, err := s.readBody(n, true)
	if err != nil {
		return nil, err
	}
	s.releaseHeld()
	s.heldBody = f.reserved
	return f.b, nil
}

// takeHeld hands the current request's reservation to its completion.
func (s *session) takeHeld() func() {
	n, budget := s.heldBody, s.srv.budget
	s.heldBody = 0
	return func() { budget.release(n) }
}

// releaseHeld releases a reservation no backend took over.
func (s *session) releaseHeld() {
	s.srv.budget.release(s.heldBody)
	s.heldBody = 0
}
