package storage

import (
	"sync"
	"sync/atomic"
	"time"
)

// Syncer runs the fsyncs of all the logs that share it (group commit).
// Under FsyncAlways every append asks for a round; appends that arrive
// while a round's fdatasyncs run are collected and share the next round,
// so N concurrent producers cost about one fsync per round, not N. Under
// FsyncInterval a ticker runs a round over every log written since the last
// one. Under every policy a segment roll asks for a round, which fsyncs the
// closed segment and moves the log's recovery checkpoint past it.
//
// Close the logs before the Syncer; a log whose Syncer is closed flushes
// in its own goroutine.
type Syncer struct {
	policy   FsyncPolicy
	interval time.Duration

	mu     sync.Mutex
	dirty  map[*Log]struct{}
	closed bool
	kick   chan struct{} // capacity 1
	quit   chan struct{}
	done   chan struct{}

	observer atomic.Pointer[func(time.Duration)] // SetFsyncObserver
}

// maxParallelSyncs bounds the fdatasyncs a round runs at once: concurrent
// fsyncs on one file system share journal commits, but each is a thread.
const maxParallelSyncs = 16

// NewSyncer starts the group-commit goroutine. interval is used by
// FsyncInterval (default 1s when <= 0).
func NewSyncer(p FsyncPolicy, interval time.Duration) *Syncer {
	if interval <= 0 {
		interval = time.Second
	}
	s := &Syncer{
		policy:   p,
		interval: interval,
		dirty:    map[*Log]struct{}{},
		kick:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go s.run()
	return s
}

// SetFsyncObserver registers fn to be told how long each fdatasync of a
// segment file of the logs sharing s took (metrics); nil removes it. It is
// safe to call at any time. fn runs on the flushing goroutine with no log
// lock held and must be quick.
func (s *Syncer) SetFsyncObserver(fn func(time.Duration)) {
	if fn == nil {
		s.observer.Store(nil)
		return
	}
	s.observer.Store(&fn)
}

// observeFsync reports one fdatasync's duration to the observer, if any.
// s may be nil (a log without a Syncer).
func (s *Syncer) observeFsync(d time.Duration) {
	if s == nil {
		return
	}
	if fn := s.observer.Load(); fn != nil {
		(*fn)(d)
	}
}

// Policy returns the fsync policy.
func (s *Syncer) Policy() FsyncPolicy { return s.policy }

// markDirty notes that l has unsynced data; now asks for a round at once.
// It reports false if the Syncer is closed.
func (s *Syncer) markDirty(l *Log, now bool) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.dirty[l] = struct{}{}
	s.mu.Unlock()
	if now {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return true
}

func (s *Syncer) forget(l *Log) {
	s.mu.Lock()
	delete(s.dirty, l)
	s.mu.Unlock()
}

func (s *Syncer) run() {
	defer close(s.done)
	var tick <-chan time.Time
	if s.policy == FsyncInterval {
		t := time.NewTicker(s.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.kick:
		case <-tick:
		case <-s.quit:
			s.round()
			return
		}
		s.round()
	}
}

// round flushes every dirty log once, in parallel.
func (s *Syncer) round() {
	s.mu.Lock()
	logs := s.dirty
	s.dirty = map[*Log]struct{}{}
	s.mu.Unlock()
	if len(logs) == 0 {
		return
	}
	sem := make(chan struct{}, maxParallelSyncs)
	var wg sync.WaitGroup
	for l := range logs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			l.flush(flushNormal) // errors are kept in the log and reported to its waiters
		}()
	}
	wg.Wait()
}

// Close runs a last round and stops the goroutine.
func (s *Syncer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.quit)
	<-s.done
	return nil
}
