package storage

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Recovery.
//
// The recovery checkpoint names a point (segment, position, next offset)
// up to which everything was fsynced -- data and index files -- before the
// checkpoint was written. Segments before the checkpoint's are trusted
// whole and not read at all (their indexes load lazily on first read); the
// checkpoint segment's prefix is trusted and its index entries below the
// point are kept. Only the bytes after the point are verified batch by
// batch (length, magic, CRC-32C, the records inside, contiguous offsets) and their index
// entries and producer state rebuilt; the first batch that fails ends the
// log there, the file is cut, and any later segment is removed (it cannot
// follow a hole). So start-up reads what was written since the last
// checkpoint, never the cleanly flushed bulk, and after a clean Close it
// reads nothing. Without a usable checkpoint every segment is verified.

// scanWholeLimit is the largest batch recovery reads into memory; larger
// ones have their CRC checked streaming, so a garbage length cannot make
// recovery allocate gigabytes.
const scanWholeLimit = 1 << 20

func (l *Log) recover() error {
	if err := l.recoverSwap(); err != nil {
		return err
	}
	var err error
	if l.firstDirty, l.horizonNext, err = readCleanerOffset(l.dir); err != nil {
		l.logger.Warn("ignoring cleaner offset file; the next cleaning starts from the log start", "err", err)
	}
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	var ck *checkpoint
	if b, err := os.ReadFile(filepath.Join(l.dir, checkpointFile)); err == nil {
		if ck, err = decodeCheckpoint(b); err != nil {
			l.logger.Warn("ignoring recovery checkpoint; verifying every segment", "err", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read recovery checkpoint: %w", err)
	}
	ls, err := readLogStart(l.dir)
	if err != nil {
		l.logger.Warn("ignoring log start offset file", "err", err)
		ls = -1
	}
	// A crash between persisting a new log start and deleting the segments
	// below it leaves them behind.
	for len(bases) > 1 && ls >= bases[1] {
		if err := (&segment{base: bases[0], dir: l.dir}).removeFiles(); err != nil {
			return err
		}
		bases = bases[1:]
	}
	if len(bases) == 0 {
		return l.startEmpty(max(ls, 0))
	}
	replayFrom := int64(0)
	if ck != nil {
		l.ps = ck.ps
		replayFrom = ck.next
	}
	for i, base := range bases {
		seg, err := openSegment(l.dir, base, false)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, seg)
		size, err := seg.fileSize()
		if err != nil {
			return err
		}
		last := i == len(bases)-1
		// Trusted whole: segments that end before the checkpoint's. (A
		// cleaned segment may have merged the checkpoint's segment into
		// one with a lower base; it is verified and replayed then.)
		if ck != nil && !last && bases[i+1] <= ck.segBase {
			seg.size, seg.synced, seg.next = size, size, bases[i+1]
			seg.readLastTimeEntry()
			continue
		}
		start, next := int64(0), base
		if ck != nil && base == ck.segBase && size >= ck.pos && ck.pos <= maxSegmentBytes {
			if err := seg.loadIndexes(ck.pos); err != nil {
				return err
			}
			start, next = ck.pos, ck.next
			seg.size, seg.synced, seg.next = start, start, next
			seg.maxTs, seg.maxTsOff, seg.firstTs, seg.sinceIndex = ck.maxTs, ck.maxTsOff, ck.firstTs, ck.sinceIndex
		} else if ck != nil && base == ck.segBase {
			l.logger.Warn("segment is shorter than its checkpoint; verifying it whole", "segment", base, "size", size, "checkpoint", ck.pos)
		}
		seg.loaded = true
		intact, err := l.scan(seg, start, next, size, replayFrom, !last)
		if err != nil {
			return err
		}
		if !last && seg.next > bases[i+1] {
			intact = false
			l.logger.Warn("segment runs past where the next begins; dropping the later segments", "segment", base, "next", seg.next, "following", bases[i+1])
		} else if !last {
			seg.next = bases[i+1] // a cleaned segment may end in a gap
		}
		if !intact {
			for _, b := range bases[i+1:] {
				if err := (&segment{base: b, dir: l.dir}).removeFiles(); err != nil {
					return err
				}
			}
			last = true
		}
		if err := seg.openIndexes(); err != nil {
			return err
		}
		if !last {
			if err := seg.seal(); err != nil {
				return err
			}
		}
		if last {
			break
		}
	}
	act := l.active()
	l.leo = act.next
	l.logStart = max(ls, l.segs[0].base)
	if l.logStart > l.leo {
		// DeleteRecords went past what survived the crash: start empty
		// at the persisted log start, as Kafka's truncateFullyAndStartAt.
		for _, s := range l.segs {
			if err := s.remove(); err != nil {
				return err
			}
		}
		l.segs = nil
		return l.startEmpty(l.logStart)
	}
	l.ps.truncateHead(l.logStart)
	if l.recoveredBytes > 0 || ck == nil {
		l.logger.Info("recovered log tail", "verified_bytes", l.recoveredBytes, "log_end_offset", l.leo)
	}
	// Make the verified tail durable and checkpoint it, so the next start
	// does not verify it again; then everything in the log is readable.
	l.hwSeg = act
	l.hw = -1
	return l.flush(flushCheckpoint)
}

func (l *Log) startEmpty(base int64) error {
	seg, err := openSegment(l.dir, base, true)
	if err != nil {
		return err
	}
	seg.loaded = true
	l.segs = []*segment{seg}
	if err := seg.openIndexes(); err != nil {
		return err
	}
	l.leo, l.logStart, l.dirDirty = base, base, true
	l.hwSeg, l.hw = seg, base
	if err := writeLogStart(l.dir, base); err != nil {
		return err
	}
	return l.flush(flushCheckpoint)
}

// listSegments returns the bases of the .log files, removing leftover temp
// files and indexes without a log.
func (l *Log) listSegments() ([]int64, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", l.dir, err)
	}
	logs := map[int64]bool{}
	var orphans []string
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, tmpSuffix) {
			orphans = append(orphans, name)
			continue
		}
		ext := filepath.Ext(name)
		if ext != ".log" && ext != ".index" && ext != ".timeindex" {
			continue
		}
		base, err := strconv.ParseInt(strings.TrimSuffix(name, ext), 10, 64)
		if err != nil || base < 0 {
			continue
		}
		if ext == ".log" {
			logs[base] = true
		} else {
			defer func() {
				if !logs[base] {
					os.Remove(filepath.Join(l.dir, name))
				}
			}()
		}
	}
	for _, name := range orphans {
		os.Remove(filepath.Join(l.dir, name))
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// scan verifies seg's batches from pos (whose first offset must be next)
// to fileSize, rebuilding index entries and replaying producer state for
// batches at or after replayFrom. It cuts the file at the first bad batch
// and reports whether the segment was intact. cleaned allows what log
// compaction leaves (cleaner.go): gaps between offsets and batches with
// fewer records than offsets; the active segment is never cleaned, so it
// gets the strict checks.
func (l *Log) scan(seg *segment, pos, next, fileSize, replayFrom int64, cleaned bool) (bool, error) {
	seg.size, seg.next = pos, next
	r := bufio.NewReaderSize(io.NewSectionReader(seg.f, pos, fileSize-pos), 256<<10)
	var hdr [batchHeaderSize]byte
	buf := make([]byte, 0, 64<<10)
	reason := ""
	for pos < fileSize {
		if fileSize-pos < batchHeaderSize {
			reason = fmt.Sprintf("%d trailing bytes", fileSize-pos)
			break
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return false, fmt.Errorf("recover %s: %w", seg.logPath(), err)
		}
		h := parseHeader(hdr[:])
		if err := checkFraming(&h, fileSize-pos); err != nil {
			reason = err.Error()
			break
		}
		sz := int64(h.size())
		var batch []byte
		crc := crc32.New(castagnoli)
		crc.Write(hdr[offAttributes:])
		if sz <= scanWholeLimit {
			buf = append(buf[:0], hdr[:]...)
			buf = append(buf, make([]byte, sz-batchHeaderSize)...)
			if _, err := io.ReadFull(r, buf[batchHeaderSize:]); err != nil {
				return false, fmt.Errorf("recover %s: %w", seg.logPath(), err)
			}
			crc.Write(buf[batchHeaderSize:])
			batch = buf
		} else if _, err := io.CopyN(crc, r, sz-batchHeaderSize); err != nil {
			return false, fmt.Errorf("recover %s: %w", seg.logPath(), err)
		}
		if crc.Sum32() != h.crc {
			reason = fmt.Sprintf("CRC mismatch in batch at offset %d", h.baseOffset)
			break
		}
		if err := checkStoredCounts(&h, cleaned); err != nil {
			reason = err.Error()
			break
		}
		if err := l.checkRecords(seg, pos, batch, &h, cleaned); err != nil {
			reason = err.Error()
			break
		}
		if h.baseOffset != next && !(cleaned && h.baseOffset > next) {
			reason = fmt.Sprintf("batch offset %d, expected %d", h.baseOffset, next)
			break
		}
		seg.noteBatch(h, pos, batch, l.cfg.IndexIntervalBytes)
		if h.baseOffset >= replayFrom {
			ctl := int16(-1)
			if batch != nil {
				ctl = controlType(batch, h)
			}
			l.ps.update(&h, ctl)
		}
		l.recoveredBytes += sz
		pos += sz
		next = h.lastOffset() + 1
	}
	seg.synced = min(seg.synced, pos)
	if pos == fileSize {
		return true, nil
	}
	l.logger.Warn("truncating torn or corrupt log tail", "segment", seg.base, "position", pos, "dropped_bytes", fileSize-pos, "reason", reason)
	if err := seg.truncate(pos); err != nil {
		return false, err
	}
	return false, nil
}

// checkRecords walks the records of a batch recovery has verified the CRC
// of, as produce does (records.go): a batch whose records disagree with its
// header ends the log like a torn one. cleaned accepts a compacted batch
// (cleaner.go). batch is nil for a batch larger than
// scanWholeLimit, which is streamed from the file.
func (l *Log) checkRecords(seg *segment, pos int64, batch []byte, h *batchHeader, cleaned bool) error {
	if batch != nil {
		return walkRecordsAs(batch, h, cleaned, nil)
	}
	return walkStream(io.NewSectionReader(seg.f, pos+batchHeaderSize, int64(h.size())-batchHeaderSize), h, cleaned, nil)
}

// removeFiles deletes a segment's files by name (no open descriptor).
func (s *segment) removeFiles() error {
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		if err := os.Remove(segName(s.dir, s.base, ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove segment file: %w", err)
		}
	}
	return nil
}
