package storage

import (
	"fmt"
	"time"
)

// DeleteRecords moves the log start offset to before (-1: the high
// watermark, as DeleteRecords requests mean it), persists it before
// deleting anything, and removes the segments wholly below it. Offsets
// below the new start are unreadable at once even where their segment
// stays (Kafka deletes only whole segments too).
func (l *Log) DeleteRecords(before int64) (int64, error) {
	l.swapMu.Lock()
	defer l.swapMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return -1, fmt.Errorf("%w: log %s is closed", ErrStorage, l.dir)
	}
	if before < 0 {
		before = l.hw
	}
	if before > l.hw {
		l.mu.Unlock()
		return -1, fmt.Errorf("%w: delete before %d, high watermark is %d", ErrOffsetOutOfRange, before, l.hw)
	}
	if before <= l.logStart {
		ls := l.logStart
		l.mu.Unlock()
		return ls, nil
	}
	if err := writeLogStart(l.dir, before); err != nil {
		l.mu.Unlock()
		return -1, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	l.logStart = before
	rolled := false
	if before == l.leo && l.active().size > 0 {
		// Everything goes: roll so the old active segment can be removed.
		if err := l.rollLocked(); err != nil {
			l.logger.Warn("roll for DeleteRecords", "err", err)
		} else {
			rolled = true
			l.setHW(l.leo, l.active(), 0)
		}
	}
	err := l.dropBelowStartLocked()
	ls := l.logStart
	l.mu.Unlock()
	if rolled {
		l.requestFlush(true)
	}
	return ls, err
}

// dropBelowStartLocked removes the segments whose offsets are all below the
// log start, never the active one, and forgets producers that are gone.
func (l *Log) dropBelowStartLocked() error {
	var err error
	for len(l.segs) > 1 && l.segs[1].base <= l.logStart {
		if rerr := l.segs[0].remove(); rerr != nil && err == nil {
			err = fmt.Errorf("%w: delete segment: %w", ErrStorage, rerr)
		}
		l.segs = l.segs[1:]
	}
	l.ps.truncateHead(l.logStart)
	return err
}

// ApplyRetention deletes whole segments, oldest first, that retention.ms
// (the segment's largest timestamp, or its file's mtime without one) or
// retention.bytes (Kafka: while size - segment >= retention.bytes) allow.
// The active segment and anything past the high watermark stay. Append
// runs it in the background whenever a segment rolls (retainSoon); the
// broker also runs it on a timer for time-based retention of idle logs.
func (l *Log) ApplyRetention(now time.Time) error {
	l.swapMu.Lock()
	defer l.swapMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	cfg := l.cfg
	total := l.sizeLocked()
	n := 0
	for n < len(l.segs)-1 && l.segs[n+1].base <= l.hw {
		s := l.segs[n]
		byTime := cfg.RetentionMs >= 0 && segmentTime(s) < now.UnixMilli()-cfg.RetentionMs
		bySize := cfg.RetentionBytes >= 0 && total-s.size >= cfg.RetentionBytes
		if !byTime && !bySize {
			break
		}
		total -= s.size
		n++
	}
	if n == 0 {
		return nil
	}
	start := l.segs[n].base
	if start <= l.logStart {
		return l.dropBelowStartLocked()
	}
	if err := writeLogStart(l.dir, start); err != nil {
		return fmt.Errorf("%w: retention: %w", ErrStorage, err)
	}
	l.logStart = start
	return l.dropBelowStartLocked()
}

func segmentTime(s *segment) int64 {
	if s.maxTs >= 0 {
		return s.maxTs
	}
	if fi, err := s.f.Stat(); err == nil {
		return fi.ModTime().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// OffsetForTimestamp returns the first offset whose timestamp is >= ts and
// that timestamp (ListOffsets by time), or -1, -1. Records of an
// uncompressed batch are checked one by one, as Kafka does; a compressed
// batch is not decompressed, so it answers with the batch's first offset
// and MaxTimestamp -- a consumer seeking there may see a few earlier
// records of that batch.
func (l *Log) OffsetForTimestamp(ts int64) (int64, int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return -1, -1, fmt.Errorf("%w: log %s is closed", ErrStorage, l.dir)
	}
	var hb [batchHeaderSize]byte
	for _, seg := range l.segs {
		if seg.maxTs < ts || seg.next <= l.logStart {
			continue
		}
		if err := seg.loadIndexes(seg.size); err != nil {
			return -1, -1, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		limit := l.limitLocked(seg)
		pos := seg.lookupTime(ts)
		if seg.base < l.logStart {
			pos = max(pos, seg.lookup(l.logStart))
		}
		for pos < limit {
			h, err := seg.readHeader(pos, &hb)
			if err != nil {
				return -1, -1, fmt.Errorf("%w: %w", ErrStorage, err)
			}
			if h.maxTimestamp >= ts && h.lastOffset() >= l.logStart {
				off, t, err := l.firstAtOrAfter(seg, pos, h, ts)
				if err != nil || off >= 0 {
					return off, t, err
				}
			}
			pos += int64(h.size())
		}
		if limit < seg.size {
			break
		}
	}
	return -1, -1, nil
}

// firstAtOrAfter finds the first record of the batch at pos with
// timestamp >= ts and offset >= the log start.
func (l *Log) firstAtOrAfter(seg *segment, pos int64, h batchHeader, ts int64) (int64, int64, error) {
	if h.compression() != 0 || h.attributes&attrLogAppendTime != 0 {
		return max(h.baseOffset, l.logStart), h.maxTimestamp, nil
	}
	buf := make([]byte, h.size())
	if _, err := seg.f.ReadAt(buf, pos); err != nil {
		return -1, -1, fmt.Errorf("%w: read batch: %w", ErrStorage, err)
	}
	off, at := int64(-1), int64(-1)
	ok := recordTimes(buf, h, func(d int32, rts int64) bool {
		if o := h.baseOffset + int64(d); rts >= ts && o >= l.logStart {
			off, at = o, rts
			return false
		}
		return true
	})
	if !ok {
		return max(h.baseOffset, l.logStart), h.maxTimestamp, nil
	}
	return off, at, nil
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (ListOffsets -3, KIP-734), or -1, -1. For a compressed
// batch the offset is the batch's last (records are not decompressed).
func (l *Log) MaxTimestamp() (int64, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	off, ts := int64(-1), int64(-1)
	for _, s := range l.segs {
		if s.maxTs > ts && s.maxTsOff >= l.logStart {
			off, ts = s.maxTsOff, s.maxTs
		}
	}
	return off, ts
}
