package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Log is one partition's log: a directory of segments. It is safe for
// concurrent use. Appends and index updates happen under mu; fsyncs,
// checkpoint writes and the bytes of a Read never do (design rule: slow
// work happens outside the owner's lock).
//
// Lock order: Log.swapMu, then Log.flushMu, then Log.mu, then
// segment.loadMu.
type Log struct {
	dir    string
	syncer *Syncer // nil: nobody fsyncs except rolls and Close
	policy FsyncPolicy
	logger *slog.Logger

	flushMu sync.Mutex // one flush of this log at a time

	mu        sync.RWMutex
	cfg       LogConfig
	segs      []*segment // ordered by base; the last is active
	logStart  int64
	leo       int64 // log end offset: next offset to assign
	hw        int64 // high watermark: end of what readers may see
	hwSeg     *segment
	hwPos     int64
	ps        producerState
	waiters   map[int64]chan struct{} // Wait: closed when hw > key
	stable    map[int64]chan struct{} // WaitStable: closed when the LSO > key
	pending   []pendingAck            // FsyncAlways acks waiting for a flush
	failed    error                   // sticky: a failed fsync (see flush)
	closed    bool
	shut      bool // Close finished its flush; files are closed
	tailDirty bool // a failed write may have left bytes past the active size
	rolled    bool // a segment rolled since the last checkpoint
	dirDirty  bool // a segment file was created since the last dir fsync
	lastCkpt  time.Time
	ckptNext  int64 // next offset of the last checkpoint written

	// writeAt writes segment data; tests replace it to simulate a full disk.
	writeAt func(f *os.File, b []byte, off int64) (int, error)

	recoveredBytes int64 // bytes verified by the last recovery (tests)

	retaining   atomic.Bool  // a roll-time retention pass is running
	retainAgain atomic.Bool  // a roll happened since the running pass began
	retainNow   atomic.Int64 // the latest roll's time (UnixNano), for the pass

	// Compaction (cleaner.go). swapMu is held while cleaned segments
	// replace old ones, and by retention and DeleteRecords, which remove
	// leading segments; cleaning itself runs without it.
	swapMu         sync.Mutex
	cleaning       atomic.Bool // one cleaning at a time
	firstDirty     int64       // end of the last cleaning; guarded by mu
	horizonNext    int64       // earliest future delete horizon kept (0 none); guarded by mu
	cleanBroken    error       // a failed swap: no more cleaning until reopened; guarded by mu
	cleanRuns      atomic.Int64
	cleanReclaimed atomic.Int64
	cleanHook      func(stage string) error // tests: stop a run at a stage
	keylessRefused atomic.Int64             // produces refused with ErrKeyless
}

type pendingAck struct {
	end int64 // acknowledged once hw >= end
	ch  chan error
}

// checkpointEvery bounds how often a flush rewrites the recovery checkpoint
// (and so how much a crash makes recovery verify, besides the active
// segment under FsyncNever).
const checkpointEvery = 5 * time.Second

// closedAck is the durable channel of an append that needs no fsync.
var closedAck = func() chan error { c := make(chan error); close(c); return c }()

// AppendOptions tune one Append.
type AppendOptions struct {
	// AllowControl admits control batches (transaction markers), which
	// only the broker itself may write.
	AllowControl bool
	// Now is the append time (LogAppendTime, segment.ms); zero means
	// time.Now().
	Now time.Time
}

// AppendResult is what a Produce response needs for one partition.
type AppendResult struct {
	BaseOffset     int64
	LogAppendTime  int64 // -1 unless the log uses LogAppendTime
	LogStartOffset int64
	// Duplicate is an idempotent retry of a batch already in the log:
	// BaseOffset is the original one and nothing was written.
	Duplicate bool
}

// OpenLog opens the partition log in dir, creating it or recovering it
// (see recover.go). s may be nil, which behaves like FsyncNever.
func OpenLog(dir string, cfg LogConfig, s *Syncer) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l := &Log{
		dir:     dir,
		syncer:  s,
		policy:  FsyncNever,
		logger:  slog.Default().With("log", dir),
		cfg:     cfg.normalized(),
		ps:      newProducerState(),
		waiters: map[int64]chan struct{}{},
		stable:  map[int64]chan struct{}{},
		writeAt: func(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) },
	}
	if s != nil {
		l.policy = s.policy
	}
	if err := l.recover(); err != nil {
		for _, seg := range l.segs {
			seg.closeFiles()
		}
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	return l, nil
}

// SetConfig replaces the configuration (AlterConfigs); it applies to the
// next append and the next retention pass.
func (l *Log) SetConfig(cfg LogConfig) {
	l.mu.Lock()
	l.cfg = cfg.normalized()
	l.mu.Unlock()
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// Append validates the record batches of one partition from a produce
// request and appends them, assigning BaseOffset and PartitionLeaderEpoch
// in place in batches (the caller's buffer is modified). It returns once
// the bytes are written (write(2)). durable yields nil (or is closed) once
// the data is on disk per the fsync policy, or carries the error if it
// never will be; under FsyncAlways the high watermark moves only then.
//
// A batch set is appended whole or not at all: a failed write is cut back
// off the segment, so the log takes appends again once space returns.
func (l *Log) Append(batches []byte, o AppendOptions) (AppendResult, <-chan error, error) {
	res := AppendResult{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	l.mu.RLock()
	cfg := l.cfg
	l.mu.RUnlock()
	in, err := splitBatches(batches, &cfg, &o)
	if err != nil {
		if errors.Is(err, ErrKeyless) {
			l.keylessRefused.Add(1)
		}
		return res, nil, err
	}
	if len(in) > 1 {
		for _, b := range in {
			if b.h.producerID >= 0 {
				// Produce v3+ carries exactly one batch per partition
				// (ProduceRequest.validateRecords); sequences across several
				// would need a tentative producer state.
				return res, nil, fmt.Errorf("%w: an idempotent produce must carry exactly one batch", ErrInvalidRecord)
			}
		}
	}
	l.mu.Lock()
	nsegs := len(l.segs)
	res, ack, kick, err := l.appendLocked(batches, in, cfg, o)
	rolled := len(l.segs) != nsegs
	l.mu.Unlock()
	if kick {
		l.requestFlush(l.policy == FsyncAlways || l.rolledPending())
	}
	if rolled {
		l.retainSoon(o.Now)
	}
	return res, ack, err
}

// retainSoon applies retention in the background after a roll: a roll is
// when a segment becomes eligible for deletion, so a partition written
// faster than the broker's retention timer still stays within
// retention.bytes (Kafka checks every log.retention.check.interval.ms, 5
// minutes by default; a roll-time pass keeps the overshoot to about one
// segment). One pass at a time; the pass takes the log lock itself and is
// a no-op once the log is closed.
//
// A roll during a running pass is not lost: it sets retainAgain, and the
// pass runs once more (with the latest roll's time) before it ends.
func (l *Log) retainSoon(now time.Time) {
	l.retainNow.Store(now.UnixNano())
	l.retainAgain.Store(true)
	if !l.retaining.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			l.retainAgain.Store(false)
			if err := l.ApplyRetention(time.Unix(0, l.retainNow.Load())); err != nil {
				l.logger.Warn("retention after segment roll", "err", err)
			}
			l.retaining.Store(false)
			// A roll that found the pass running set retainAgain before
			// its CompareAndSwap failed; one after the Store above
			// starts its own pass.
			if !l.retainAgain.Load() || !l.retaining.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

func (l *Log) rolledPending() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.rolled
}

func (l *Log) appendLocked(raw []byte, in []incoming, cfg LogConfig, o AppendOptions) (AppendResult, <-chan error, bool, error) {
	res := AppendResult{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: l.logStart}
	switch {
	case l.closed:
		return res, nil, false, fmt.Errorf("%w: log %s is closed", ErrStorage, l.dir)
	case l.failed != nil:
		return res, nil, false, l.failed
	}
	act := l.active()
	if l.tailDirty {
		if err := act.truncate(act.size); err != nil {
			return res, nil, false, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		l.tailDirty = false
	}
	if len(in) == 1 {
		dupBase, dup, err := l.ps.check(&in[0].h, l.leo == 0)
		if err != nil {
			return res, nil, false, err
		}
		if dup {
			res.BaseOffset, res.Duplicate = dupBase, true
			if dupBase < l.hw {
				return res, closedAck, false, nil
			}
			ch := make(chan error, 1)
			l.pending = append(l.pending, pendingAck{end: dupBase + 1, ch: ch})
			return res, ch, false, nil
		}
	}
	total := int64(len(raw))
	lastDelta := int64(0)
	for _, b := range in {
		lastDelta += int64(b.h.lastOffsetDelta) + 1
	}
	kick := false
	if act.size > 0 && (act.size+total > cfg.SegmentBytes ||
		o.Now.UnixMilli()-act.firstTs > cfg.SegmentMs ||
		l.leo+lastDelta-act.base > math.MaxUint32) {
		if err := l.rollLocked(); err != nil {
			return res, nil, false, err
		}
		act, kick = l.active(), true
	}
	if act.size+total > maxSegmentBytes {
		return res, nil, kick, fmt.Errorf("%w: %d bytes do not fit a segment", ErrMessageTooLarge, total)
	}

	pos, next := act.size, l.leo
	for i := range in {
		assignOffset(in[i].buf, next)
		in[i].h.baseOffset = next
		next = in[i].h.lastOffset() + 1
	}
	if n, err := l.writeAt(act.f, raw, pos); err != nil || n != len(raw) {
		if err == nil {
			err = fmt.Errorf("short write: %d of %d bytes", n, len(raw))
		}
		// Cut the partial batch off so nothing of it is ever read or
		// recovered; if even that fails, retry before the next append.
		if terr := act.truncate(pos); terr != nil {
			l.tailDirty = true
		}
		return res, nil, kick, fmt.Errorf("%w: append to %s: %w", ErrStorage, act.logPath(), err)
	}
	p := pos
	for _, b := range in {
		act.noteBatch(b.h, p, b.buf, cfg.IndexIntervalBytes)
		l.ps.update(&b.h, controlType(b.buf, b.h))
		p += int64(b.h.size())
	}
	if pos == 0 {
		act.firstTs = o.Now.UnixMilli() // segment.ms counts from the first append
	}
	if err := act.writeIndexes(); err != nil {
		// The in-memory index is authoritative while running and the
		// missing entries are retried on the next append; recovery
		// rebuilds what a checkpoint does not cover.
		l.logger.Warn("index write failed", "err", err)
	}
	l.leo = next
	res.BaseOffset = in[0].h.baseOffset
	if cfg.LogAppendTime {
		res.LogAppendTime = o.Now.UnixMilli()
	}
	switch l.policy {
	case FsyncAlways:
		ch := make(chan error, 1)
		l.pending = append(l.pending, pendingAck{end: next, ch: ch})
		return res, ch, true, nil
	case FsyncInterval:
		l.setHW(next, act, act.size)
		return res, closedAck, true, nil
	default:
		l.setHW(next, act, act.size)
		return res, closedAck, kick, nil
	}
}

// rollLocked seals the active segment and starts a new one at the log end.
func (l *Log) rollLocked() error {
	old := l.active()
	if err := old.seal(); err != nil {
		l.logger.Warn("sealing segment", "base", old.base, "err", err)
	}
	seg, err := openSegment(l.dir, l.leo, true)
	if err != nil {
		return fmt.Errorf("%w: roll: %w", ErrStorage, err)
	}
	seg.loaded = true
	if err := seg.openIndexes(); err != nil {
		seg.closeFiles()
		return fmt.Errorf("%w: roll: %w", ErrStorage, err)
	}
	l.segs = append(l.segs, seg)
	l.rolled, l.dirDirty = true, true
	return nil
}

// requestFlush asks the Syncer for a flush of l (now: at once, else at the
// next interval tick).
func (l *Log) requestFlush(now bool) {
	if l.syncer != nil && l.syncer.markDirty(l, now) {
		return
	}
	if now {
		go l.flush(flushNormal)
	}
}

// setHW moves the high watermark to off, whose batch ends at pos of seg,
// and wakes the waiters it passes. Caller holds mu.
func (l *Log) setHW(off int64, seg *segment, pos int64) {
	if off <= l.hw && l.hwSeg != nil {
		return
	}
	l.hw, l.hwSeg, l.hwPos = off, seg, pos
	for w, ch := range l.waiters {
		if w < off {
			close(ch)
			delete(l.waiters, w)
		}
	}
	// The last stable offset moves only here: it is min(hw, first open
	// transaction), and a marker that closes a transaction is an append,
	// which moves the high watermark (at once, or after its fsync).
	if len(l.stable) > 0 {
		lso := l.lsoLocked()
		for w, ch := range l.stable {
			if w < lso {
				close(ch)
				delete(l.stable, w)
			}
		}
	}
	keep := l.pending[:0]
	for _, p := range l.pending {
		if p.end <= off {
			p.ch <- nil
			close(p.ch)
		} else {
			keep = append(keep, p)
		}
	}
	l.pending = keep
}

type flushMode int

const (
	flushNormal     flushMode = iota // a Syncer round: checkpoint only when due
	flushCheckpoint                  // Flush: always checkpoint
	flushClean                       // Close: checkpoint marked clean
)

// flush fsyncs every segment with unsynced bytes, moves the high watermark
// (FsyncAlways) and, when due, writes the recovery checkpoint.
//
// A failed fdatasync makes the log fail for good (until reopened): after a
// failed fsync Linux may have dropped the dirty pages, so neither the data
// nor a retried fsync can be trusted. Pending and later appends get
// ErrStorage; reads below the high watermark keep working. Kafka takes the
// log directory offline in the same case.
func (l *Log) flush(mode flushMode) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()

	l.mu.Lock()
	if l.shut {
		l.mu.Unlock()
		return nil
	}
	if l.failed != nil {
		err := l.failed
		l.mu.Unlock()
		return err
	}
	act := l.active()
	target, tpos := l.leo, act.size
	var dirty []*segment
	var sizes []int64
	for _, s := range l.segs {
		if s.synced < s.size {
			s.ref()
			dirty, sizes = append(dirty, s), append(sizes, s.size)
		}
	}
	dirDirty := l.dirDirty
	l.dirDirty = false
	var ck *checkpoint
	var ckErr error
	if mode != flushNormal || l.rolled || (target != l.ckptNext && time.Since(l.lastCkpt) >= checkpointEvery) {
		ck = &checkpoint{
			clean: mode == flushClean, segBase: act.base, pos: tpos, next: target, ps: l.ps.clone(),
			maxTs: act.maxTs, maxTsOff: act.maxTsOff, firstTs: act.firstTs, sinceIndex: act.sinceIndex,
		}
		l.rolled = false
		// Index files are small; syncing them under the lock keeps a
		// concurrent roll from closing them mid-sync.
		if ckErr = act.writeIndexes(); ckErr == nil {
			ckErr = act.syncIndexes()
		}
	}
	l.mu.Unlock()

	var err error
	if dirDirty {
		err = syncDir(l.dir)
	}
	for _, s := range dirty {
		if err == nil {
			start := time.Now()
			if serr := fdatasync(s.f); serr != nil {
				err = fmt.Errorf("fdatasync %s: %w", s.logPath(), serr)
			}
			l.syncer.observeFsync(time.Since(start))
		}
	}
	if err == nil && ck != nil && ckErr == nil {
		ckErr = writeFileAtomic(l.dir, checkpointFile, ck.encode())
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range dirty {
		if err == nil && sizes[i] > s.synced {
			s.synced = sizes[i]
		}
		s.unref()
	}
	if err != nil {
		l.failLocked(err)
		return l.failed
	}
	if l.policy == FsyncAlways || mode != flushNormal {
		l.setHW(target, act, tpos)
	}
	if ck != nil {
		if ckErr != nil {
			l.logger.Warn("writing recovery checkpoint", "err", ckErr)
			return fmt.Errorf("%w: %w", ErrStorage, ckErr)
		}
		l.lastCkpt, l.ckptNext = time.Now(), ck.next
	}
	return nil
}

func (l *Log) failLocked(err error) {
	l.failed = fmt.Errorf("%w: log %s is offline after a failed flush: %w", ErrStorage, l.dir, err)
	l.logger.Error("flush failed; log refuses appends until reopened", "err", err)
	for _, p := range l.pending {
		p.ch <- l.failed
		close(p.ch)
	}
	l.pending = nil
}

// Flush fsyncs everything appended so far and writes a recovery
// checkpoint.
func (l *Log) Flush() error {
	return l.flush(flushCheckpoint)
}

// Wait returns a channel closed once the high watermark is past offset
// (long-poll Fetch), or the log closes. Waiters on one offset share a
// channel, so an abandoned poll costs nothing per retry.
func (l *Log) Wait(offset int64) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hw > offset || l.closed {
		c := make(chan struct{})
		close(c)
		return c
	}
	ch, ok := l.waiters[offset]
	if !ok {
		ch = make(chan struct{})
		l.waiters[offset] = ch
	}
	return ch
}

// WaitStable returns a channel closed once the last stable offset is past
// offset (a read_committed long-poll Fetch: a commit or abort marker makes
// the open transaction's records readable), or the log closes.
func (l *Log) WaitStable(offset int64) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lsoLocked() > offset || l.closed {
		c := make(chan struct{})
		close(c)
		return c
	}
	ch, ok := l.stable[offset]
	if !ok {
		ch = make(chan struct{})
		l.stable[offset] = ch
	}
	return ch
}

// HighWatermark is the end of what consumers may read.
func (l *Log) HighWatermark() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.hw
}

// LogStartOffset is the first offset still in the log.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStart
}

// LogEndOffset is the offset the next append gets.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.leo
}

// LastStableOffset is the first offset of the oldest open transaction, or
// the high watermark.
func (l *Log) LastStableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.lsoLocked()
}

func (l *Log) lsoLocked() int64 {
	return min(l.hw, l.ps.firstUnstable())
}

// AbortedTransactions returns the aborted transactions that overlap
// [from, upTo), for a read_committed Fetch.
func (l *Log) AbortedTransactions(from, upTo int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []AbortedTxn
	for _, a := range l.ps.aborted {
		if a.LastOffset >= from && a.FirstOffset < upTo {
			out = append(out, a)
		}
	}
	return out
}

// Size is the bytes of all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.sizeLocked()
}

func (l *Log) sizeLocked() int64 {
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Close flushes, writes a clean-shutdown checkpoint with the producer
// state, and closes the files. Reads still holding sections keep their
// segments open until Release.
func (l *Log) Close() error {
	l.swapMu.Lock()
	defer l.swapMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	err := l.flush(flushClean)
	if l.syncer != nil {
		l.syncer.forget(l)
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shut = true
	for w, ch := range l.waiters {
		close(ch)
		delete(l.waiters, w)
	}
	for w, ch := range l.stable {
		close(ch)
		delete(l.stable, w)
	}
	if l.failed == nil && len(l.pending) > 0 {
		l.failed = fmt.Errorf("%w: log %s closed", ErrStorage, l.dir)
	}
	for _, p := range l.pending {
		p.ch <- l.failed
		close(p.ch)
	}
	l.pending = nil
	for _, s := range l.segs {
		if s.idxF != nil {
			s.idxF.Close()
			s.timeF.Close()
			s.idxF, s.timeF = nil, nil
		}
		s.unref()
	}
	if err != nil {
		return fmt.Errorf("close log %s: %w", l.dir, err)
	}
	return nil
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	cerr := l.Close()
	if err := os.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("delete log %s: %w", l.dir, err)
	}
	if cerr != nil {
		l.logger.Warn("closing deleted log", "err", cerr)
	}
	return nil
}
