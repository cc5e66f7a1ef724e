package storage

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"time"
)

// Log compaction (cleanup.policy=compact), with the semantics of Kafka's
// LogCleaner (core/src/main/scala/kafka/log/LogCleaner.scala and
// MemoryRecords.filterTo):
//
//   - The cleanable part of the log is the prefix of whole segments before
//     the first uncleanable offset: the active segment's base, the last
//     stable offset (nothing of an open transaction is touched), and the
//     first segment holding a record younger than min.compaction.lag.ms.
//   - A run builds a key -> latest offset map (offsetmap.go, bounded by the
//     dedupe buffer) over the dirty part, from the first dirty offset (the
//     end of the previous cleaning, kept in the cleaner-offset file) on; if
//     the map fills, the run ends there and the next one goes on.
//   - Every cleanable segment from the log start is then copied, batch by
//     batch and record by record, into new segments: a record survives when
//     it is its key's latest (or lies past what the map covers), a keyless
//     record is dropped, and a tombstone survives until the delete horizon
//     of its batch (KIP-534: the first cleaning that keeps it stamps the
//     batch with now + delete.retention.ms, attribute bit 6 and
//     BaseTimestamp). Offsets never change: a rewritten batch keeps its
//     BaseOffset and LastOffsetDelta, so compaction leaves gaps and the
//     batch's last sequence is intact.
//   - Batches of aborted transactions are dropped; a commit or abort marker
//     stays until no batch of its transaction remains before it, then
//     another delete.retention.ms. The last data batch of every producer
//     the log still tracks is kept, empty if need be (Kafka's
//     RETAIN_EMPTY), so recovery that replays headers finds the same
//     sequences.
//   - Rewritten batches are compressed again with their own codec.
//
// Cleaning reads and writes with no log lock held; appends and reads go
// on. The new segments replace the old ones through a swap manifest
// (cleanswap.go), so a crash at any point leaves the old or the new
// segments, never a mix.
//
// A segment of a cleaned log may begin past its base, hold gaps between
// batches, end before the next segment's base, and hold batches with fewer
// records than LastOffsetDelta+1 (or none); recovery accepts all of that
// in every segment but the active one, which is never cleaned.

const attrDeleteHorizon = 0x40 // KIP-534: BaseTimestamp is the delete horizon

// CleanOptions tune one cleaning run.
type CleanOptions struct {
	// Now is the run's clock (delete horizons, compaction lags); zero is
	// time.Now().
	Now time.Time
	// DedupeBufferBytes bounds the offset map (log.cleaner.dedupe.buffer
	// .size); zero is DefaultDedupeBufferBytes. The map is sized for the
	// dirty part, so small logs take little of it.
	DedupeBufferBytes int64
	// Force cleans whatever the dirty ratio and lags say (tests).
	Force bool
	// Stop, when closed, abandons the run at the next segment (broker
	// shutdown); its files are removed and the log is unchanged.
	Stop <-chan struct{}
}

// CleanResult is what one run did.
type CleanResult struct {
	Cleaned     bool
	DirtyRatio  float64 // before the run
	BytesBefore int64   // of the segments rewritten
	BytesAfter  int64
	FirstDirty  int64 // after the run
}

// CleanerStats is a log's compaction state, for metrics.
type CleanerStats struct {
	Runs           int64   // cleanings finished since open
	BytesReclaimed int64   // bytes they removed
	DirtyRatio     float64 // dirty share of the cleanable log now (0 for a non-compacted log)
	KeylessRefused int64   // produces refused for a record without a key (ErrKeyless)
}

// errCleanAbandoned: the log changed under a run (retention, close); the
// run's files are discarded and the next run starts over.
var errCleanAbandoned = errors.New("cleaning abandoned: the log changed")

// cleanPlan is what a run cleans, snapshotted under the log lock.
type cleanPlan struct {
	cfg         LogConfig
	srcs        []*segment // a prefix of the log's segments, each ref'd
	ends        []int64    // where each src's offsets end: the next segment's base
	end         int64      // base of the segment after srcs
	firstDirty  int64
	dirty       int64 // bytes
	clean       int64
	aborted     []AbortedTxn    // by FirstOffset
	lastData    map[int64]int64 // producer id -> last offset of its last data batch
	horizonNext int64
}

func (p *cleanPlan) release() {
	for _, s := range p.srcs {
		s.unref()
	}
	p.srcs = nil
}

// Clean runs one cleaning of a compacted log if its dirty ratio is above
// min.cleanable.dirty.ratio (Kafka's LogCleanerManager compares with >),
// its max.compaction.lag.ms is exceeded, or a delete horizon it kept has
// passed (or o.Force). One run at a time per log; a second concurrent call returns
// at once.
func (l *Log) Clean(o CleanOptions) (CleanResult, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.DedupeBufferBytes <= 0 {
		o.DedupeBufferBytes = DefaultDedupeBufferBytes
	}
	if !l.cleaning.CompareAndSwap(false, true) {
		return CleanResult{}, nil
	}
	defer l.cleaning.Store(false)
	plan, ratio, err := l.plan(o)
	res := CleanResult{DirtyRatio: ratio}
	if plan == nil || err != nil {
		return res, err
	}
	defer plan.release()
	// The swap renames new files over the old names: load what a reader
	// could still need from the old index files now (outside the log lock;
	// segment.loadMu guards it).
	for _, s := range plan.srcs {
		if err := s.loadIndexes(s.size); err != nil {
			return res, fmt.Errorf("clean %s: %w: %w", l.dir, ErrStorage, err)
		}
	}
	out, err := l.runClean(plan, o)
	if errors.Is(err, errCleanAbandoned) {
		l.logger.Info("log cleaning abandoned", "reason", err)
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("clean %s: %w", l.dir, err)
	}
	res.Cleaned, res.BytesBefore, res.BytesAfter, res.FirstDirty = true, out.before, out.after, out.firstDirty
	l.cleanRuns.Add(1)
	l.cleanReclaimed.Add(out.before - out.after)
	l.logger.Info("log cleaned", "dirty_ratio", ratio, "segments", len(plan.srcs), "bytes_before", out.before, "bytes_after", out.after, "first_dirty", out.firstDirty)
	return res, nil
}

// CleanerStats reports the log's compaction counters and dirty ratio.
func (l *Log) CleanerStats() CleanerStats {
	st := CleanerStats{Runs: l.cleanRuns.Load(), BytesReclaimed: l.cleanReclaimed.Load(), KeylessRefused: l.keylessRefused.Load()}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.cfg.Compact && !l.closed {
		n := l.cleanableCountLocked(time.Now(), l.cfg)
		st.DirtyRatio = l.dirtyRatioLocked(n)
	}
	return st
}

// plan decides whether to clean and snapshots what. It returns a nil plan
// when there is nothing to do, and the dirty ratio either way.
func (l *Log) plan(o CleanOptions) (*cleanPlan, float64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	cfg := l.cfg
	if l.closed || !cfg.Compact || l.cleanBroken != nil {
		return nil, 0, l.cleanBroken
	}
	n := l.cleanableCountLocked(o.Now, cfg)
	if n == 0 {
		return nil, 0, nil
	}
	p := &cleanPlan{cfg: cfg, srcs: append([]*segment(nil), l.segs[:n]...), end: l.segs[n].base,
		firstDirty: max(l.firstDirty, l.logStart), horizonNext: l.horizonNext}
	for i, s := range p.srcs {
		p.ends = append(p.ends, l.segs[i+1].base)
		if p.ends[i] <= p.firstDirty {
			p.clean += s.size
		} else {
			p.dirty += s.size
		}
	}
	ratio := l.dirtyRatioLocked(n)
	now := o.Now.UnixMilli()
	due := o.Force ||
		(p.dirty > 0 && p.firstDirty < p.end && ratio > cfg.MinCleanableDirtyRatio) ||
		(p.firstDirty < p.end && l.dirtySinceLocked(p.firstDirty) < now-cfg.MaxCompactionLagMs) ||
		(p.horizonNext > 0 && p.horizonNext <= now)
	if !due {
		return nil, ratio, nil
	}
	for _, s := range p.srcs {
		s.ref()
	}
	p.aborted = append([]AbortedTxn(nil), l.ps.aborted...)
	sort.Slice(p.aborted, func(i, j int) bool { return p.aborted[i].FirstOffset < p.aborted[j].FirstOffset })
	p.lastData = l.ps.lastDataOffsets()
	return p, ratio, nil
}

// cleanableCountLocked is how many leading segments are cleanable: all
// before the first uncleanable offset (the active segment, the last stable
// offset, min.compaction.lag.ms). Each segment's extent ends at the next
// one's base.
func (l *Log) cleanableCountLocked(now time.Time, cfg LogConfig) int {
	limit := min(l.active().base, l.lsoLocked())
	n := 0
	for n < len(l.segs)-1 && l.segs[n+1].base <= limit {
		s := l.segs[n]
		if cfg.MinCompactionLagMs > 0 && s.maxTs > now.UnixMilli()-cfg.MinCompactionLagMs {
			break
		}
		n++
	}
	return n
}

// dirtyRatioLocked is dirty / (clean + dirty) bytes of the first n
// segments, a segment counting as clean when it ends at or before the
// first dirty offset (Kafka's cleanableRatio).
func (l *Log) dirtyRatioLocked(n int) float64 {
	firstDirty := max(l.firstDirty, l.logStart)
	var clean, dirty int64
	for i := 0; i < n; i++ {
		if l.segs[i+1].base <= firstDirty {
			clean += l.segs[i].size
		} else {
			dirty += l.segs[i].size
		}
	}
	if clean+dirty == 0 {
		return 0
	}
	return float64(dirty) / float64(clean+dirty)
}

// dirtySinceLocked is the timestamp (MaxTimestamp) of the first batch of
// firstDirty's segment (for max.compaction.lag.ms), or MaxInt64.
func (l *Log) dirtySinceLocked(firstDirty int64) int64 {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > firstDirty }) - 1
	if i < 0 {
		i = 0
	}
	s := l.segs[i]
	// Kafka (KIP-354) uses the first batch's timestamp, not the append
	// time firstTs holds for segment.ms.
	if s.size < batchHeaderSize {
		return math.MaxInt64
	}
	var hb [batchHeaderSize]byte
	h, err := s.readHeader(0, &hb)
	if err != nil {
		return math.MaxInt64
	}
	return h.maxTimestamp
}

// cleanOutput is what runClean produced.
type cleanOutput struct {
	before, after int64
	firstDirty    int64
}

// runClean builds the offset map, writes the cleaned segments and swaps
// them in.
func (l *Log) runClean(p *cleanPlan, o CleanOptions) (cleanOutput, error) {
	m, end, err := l.buildOffsetMap(p, o.DedupeBufferBytes, o.Stop)
	if err != nil {
		return cleanOutput{}, err
	}
	// Only segments that begin before the map's end are rewritten.
	n := len(p.srcs)
	for n > 1 && p.srcs[n-1].base >= end {
		n--
	}
	pass := newCleanPass(p, m, end, o.Now.UnixMilli())
	var groups []*swapGroup
	defer func() {
		for _, g := range groups {
			if g.swapped {
				continue
			}
			if g.seg != nil {
				g.seg.closeFiles()
			}
			removeCleaned(l.dir, g.base)
		}
	}()
	for _, r := range groupSegments(p.srcs[:n], p.ends[:n], p.cfg.SegmentBytes) {
		g := &swapGroup{base: p.srcs[r[0]].base, srcs: p.srcs[r[0]:r[1]]}
		groups = append(groups, g)
		if g.seg, err = l.writeCleaned(pass, g, p.ends[r[1]-1], p.cfg, o.Stop); err != nil {
			return cleanOutput{}, err
		}
	}
	if err := syncDir(l.dir); err != nil {
		return cleanOutput{}, err
	}
	if err := l.hook("cleaned"); err != nil {
		return cleanOutput{}, err
	}
	out := cleanOutput{firstDirty: end}
	for _, g := range groups {
		for _, s := range g.srcs {
			out.before += s.size
		}
		out.after += g.seg.size
	}
	if err := l.swap(groups, end, pass.horizonNext, pass.droppedMarkers); err != nil {
		return cleanOutput{}, err
	}
	return out, nil
}

// groupSegments splits srcs (ending at ends) into runs [i, j) whose total
// size fits one segment and whose offsets fit the 32-bit relative index
// (Kafka's groupSegmentsBySize). Each run becomes one cleaned segment.
func groupSegments(srcs []*segment, ends []int64, maxBytes int64) [][2]int {
	var out [][2]int
	for i := 0; i < len(srcs); {
		j, size := i+1, srcs[i].size
		for j < len(srcs) && size+srcs[j].size <= maxBytes && ends[j]-srcs[i].base <= math.MaxUint32 {
			size += srcs[j].size
			j++
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

// forEachBatch calls fn with every batch of s from position 0 (the
// segment's bytes at the time of the call; sealed segments do not change).
func forEachBatch(s *segment, fn func(buf []byte, h batchHeader) error) error {
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, s.size), 256<<10)
	var buf []byte
	for pos := int64(0); pos < s.size; {
		if s.size-pos < batchHeaderSize {
			return fmt.Errorf("%w: %d trailing bytes in %s", ErrCorruptMessage, s.size-pos, s.logPath())
		}
		buf = append(buf[:0], make([]byte, batchHeaderSize)...)
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("read %s: %w", s.logPath(), err)
		}
		h := parseHeader(buf)
		if err := checkFraming(&h, s.size-pos); err != nil {
			return fmt.Errorf("%s at %d: %w", s.logPath(), pos, err)
		}
		buf = append(buf, make([]byte, h.size()-batchHeaderSize)...)
		if _, err := io.ReadFull(r, buf[batchHeaderSize:]); err != nil {
			return fmt.Errorf("read %s: %w", s.logPath(), err)
		}
		if err := fn(buf, h); err != nil {
			return err
		}
		pos += int64(h.size())
	}
	return nil
}

// buildOffsetMap maps every key of the dirty part (from firstDirty, in
// data batches not of an aborted transaction) to its latest offset. It
// returns the map and the offset it covers up to: plan.end, or the first
// batch that did not fit.
func (l *Log) buildOffsetMap(p *cleanPlan, budget int64, stop <-chan struct{}) (*offsetMap, int64, error) {
	m := newOffsetMap(budget, p.end-p.firstDirty)
	end := p.end
	txns := newTxnTracker(p.aborted)
	errFull := errors.New("offset map full")
	for i, s := range p.srcs {
		if p.ends[i] <= p.firstDirty {
			continue
		}
		if l.stopped(stop) {
			return nil, 0, errCleanAbandoned
		}
		err := forEachBatch(s, func(buf []byte, h batchHeader) error {
			if h.lastOffset() < p.firstDirty || h.isControl() {
				return nil
			}
			if h.isTxn() && txns.isAborted(h.producerID, h.baseOffset) {
				return nil
			}
			if m.n+int(h.numRecords) > m.limit {
				if m.n == 0 {
					return fmt.Errorf("%w: the dedupe buffer (%d bytes) cannot hold one batch of %d records", ErrStorage, budget, h.numRecords)
				}
				end = h.baseOffset
				return errFull
			}
			err := walkRecordsAs(buf, &h, true, func(r Record) error {
				if off := h.baseOffset + int64(r.OffsetDelta); r.Key != nil && off >= p.firstDirty {
					m.put(r.Key, off)
				}
				return nil
			})
			if err != nil {
				// Unreadable records stay as they are; they are not mapped.
				l.logger.Warn("cleaner: skipping a batch it cannot decode", "offset", h.baseOffset, "err", err)
			}
			return nil
		})
		if errors.Is(err, errFull) {
			break
		}
		if err != nil {
			return nil, 0, err
		}
	}
	return m, end, nil
}

// stopped reports whether the run must end: the log closed or o.Stop.
func (l *Log) stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
	}
	return l.isClosed()
}

func (l *Log) isClosed() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.closed
}

// hook is a test seam at the stages of a run (tests make it kill the
// process, or fail); nil in production.
func (l *Log) hook(stage string) error {
	if l.cleanHook == nil {
		return nil
	}
	return l.cleanHook(stage)
}

// writeCleaned writes group g's cleaned segment to its .cleaned files and
// fsyncs them. next is the offset after the group.
func (l *Log) writeCleaned(pass *cleanPass, g *swapGroup, next int64, cfg LogConfig, stop <-chan struct{}) (*segment, error) {
	path := segName(l.dir, g.base, ".log") + cleanedSuffix
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	seg := &segment{base: g.base, dir: l.dir, f: f, fd: int(f.Fd()), next: g.base, maxTs: -1, maxTsOff: -1, firstTs: -1, loaded: true}
	seg.refs.Store(1)
	w := bufio.NewWriterSize(f, 256<<10)
	for _, s := range g.srcs {
		if l.stopped(stop) {
			seg.closeFiles()
			return nil, errCleanAbandoned
		}
		err := forEachBatch(s, func(buf []byte, h batchHeader) error {
			out, err := pass.filterBatch(buf, h)
			if err != nil || out == nil {
				return err
			}
			oh := parseHeader(out)
			if _, err := w.Write(out); err != nil {
				return fmt.Errorf("write %s: %w", path, err)
			}
			seg.noteBatch(oh, seg.size, out, cfg.IndexIntervalBytes)
			return nil
		})
		if err != nil {
			seg.closeFiles()
			return nil, err
		}
	}
	if err := l.finishCleaned(seg, w, next); err != nil {
		seg.closeFiles()
		return nil, err
	}
	return seg, nil
}

// finishCleaned flushes and fsyncs a cleaned segment and writes its
// indexes (also as .cleaned files).
func (l *Log) finishCleaned(seg *segment, w *bufio.Writer, next int64) error {
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", seg.logPath(), err)
	}
	if err := fdatasync(seg.f); err != nil {
		return fmt.Errorf("fdatasync %s: %w", seg.logPath(), err)
	}
	seg.synced, seg.next = seg.size, next
	var err error
	if seg.idxF, err = os.OpenFile(segName(l.dir, seg.base, ".index")+cleanedSuffix, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
		return fmt.Errorf("create index: %w", err)
	}
	if seg.timeF, err = os.OpenFile(segName(l.dir, seg.base, ".timeindex")+cleanedSuffix, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
		seg.idxF.Close()
		seg.idxF = nil
		return fmt.Errorf("create time index: %w", err)
	}
	return seg.seal()
}

// Compacted reports whether the log's cleanup.policy includes compact.
func (l *Log) Compacted() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg.Compact
}
