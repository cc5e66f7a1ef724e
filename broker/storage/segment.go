package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
)

// Sparse index entries. Both indexes are append-only files of fixed-size
// big-endian entries, written with pwrite as batches are appended:
//
//	.index      relOffset uint32, position uint32
//	            (relOffset = BaseOffset of the batch at position - segment base)
//	.timeindex  timestamp int64, relOffset uint32, position uint32
//	            timestamp is the largest MaxTimestamp of all batches before
//	            position, relOffset the record that carries it; entries are
//	            added only when that maximum grows. A segment's last entry,
//	            written when it rolls, has position = segment size, so it
//	            holds the segment's largest timestamp and its offset.
//
// Entries are added when more than IndexIntervalBytes were appended since
// the last one (Kafka's index.interval.bytes), so lookups find a batch
// boundary at or before the target and scan forward from there.
const (
	indexEntrySize = 8
	timeEntrySize  = 16
)

type indexEntry struct{ rel, pos uint32 }

type timeEntry struct {
	ts       int64
	rel, pos uint32
}

// segment is one <base>.log file with its indexes. Fields other than refs,
// and the index slices of the active segment, are guarded by Log.mu. The
// indexes of a sealed segment are read from disk on first use (loadMu), so
// start-up does not read them.
type segment struct {
	base    int64
	dir     string
	f       *os.File
	fd      int
	refs    atomic.Int32 // 1 held by the log, +1 per ReadResult section
	deleted bool         // unlinked; the fd closes when refs reach 0

	size   int64 // bytes of valid batches
	synced int64 // bytes known to be on disk
	next   int64 // offset after the last batch

	idxF, timeF *os.File // open while the segment is active

	loadMu      sync.Mutex
	loaded      bool
	index       []indexEntry
	times       []timeEntry
	idxWritten  int // entries of index already in the file
	timeWritten int
	sinceIndex  int64

	maxTs    int64 // largest batch MaxTimestamp, -1 if none
	maxTsOff int64
	firstTs  int64 // MaxTimestamp of the first batch (segment.ms), -1 if empty
}

func segName(dir string, base int64, ext string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, ext))
}

func (s *segment) logPath() string { return segName(s.dir, s.base, ".log") }

// openSegment opens (creating if asked) the data file of a segment.
func openSegment(dir string, base int64, create bool) (*segment, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	path := segName(dir, base, ".log")
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", path, err)
	}
	s := &segment{base: base, dir: dir, f: f, fd: int(f.Fd()), next: base, maxTs: -1, maxTsOff: -1, firstTs: -1}
	s.refs.Store(1)
	return s, nil
}

func (s *segment) fileSize() (int64, error) {
	fi, err := s.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat segment %s: %w", s.logPath(), err)
	}
	return fi.Size(), nil
}

func (s *segment) ref() { s.refs.Add(1) }
func (s *segment) unref() {
	if s.refs.Add(-1) == 0 {
		s.closeFiles()
	}
}

func (s *segment) closeFiles() {
	s.f.Close()
	if s.idxF != nil {
		s.idxF.Close()
		s.idxF = nil
	}
	if s.timeF != nil {
		s.timeF.Close()
		s.timeF = nil
	}
}

// openIndexes opens the index files for appending (active segment). The
// in-memory entries must already be loaded; the files are truncated to them.
func (s *segment) openIndexes() error {
	var err error
	if s.idxF, err = os.OpenFile(segName(s.dir, s.base, ".index"), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return fmt.Errorf("open index: %w", err)
	}
	if s.timeF, err = os.OpenFile(segName(s.dir, s.base, ".timeindex"), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return fmt.Errorf("open time index: %w", err)
	}
	s.idxWritten, s.timeWritten = 0, 0
	if err := s.idxF.Truncate(0); err != nil {
		return fmt.Errorf("truncate index: %w", err)
	}
	if err := s.timeF.Truncate(0); err != nil {
		return fmt.Errorf("truncate time index: %w", err)
	}
	return s.writeIndexes()
}

// writeIndexes appends the entries not yet in the index files.
func (s *segment) writeIndexes() error {
	if s.idxF == nil {
		return nil
	}
	if n := len(s.index) - s.idxWritten; n > 0 {
		b := make([]byte, 0, n*indexEntrySize)
		for _, e := range s.index[s.idxWritten:] {
			b = binary.BigEndian.AppendUint32(b, e.rel)
			b = binary.BigEndian.AppendUint32(b, e.pos)
		}
		if _, err := s.idxF.WriteAt(b, int64(s.idxWritten)*indexEntrySize); err != nil {
			return fmt.Errorf("write index of segment %d: %w", s.base, err)
		}
		s.idxWritten = len(s.index)
	}
	if n := len(s.times) - s.timeWritten; n > 0 {
		b := make([]byte, 0, n*timeEntrySize)
		for _, e := range s.times[s.timeWritten:] {
			b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
			b = binary.BigEndian.AppendUint32(b, e.rel)
			b = binary.BigEndian.AppendUint32(b, e.pos)
		}
		if _, err := s.timeF.WriteAt(b, int64(s.timeWritten)*timeEntrySize); err != nil {
			return fmt.Errorf("write time index of segment %d: %w", s.base, err)
		}
		s.timeWritten = len(s.times)
	}
	return nil
}

func (s *segment) syncIndexes() error {
	if s.idxF == nil {
		return nil
	}
	if err := fdatasync(s.idxF); err != nil {
		return fmt.Errorf("sync index of segment %d: %w", s.base, err)
	}
	if err := fdatasync(s.timeF); err != nil {
		return fmt.Errorf("sync time index of segment %d: %w", s.base, err)
	}
	return nil
}

// seal writes the final time-index entry and closes the index files; the
// segment takes no more appends.
func (s *segment) seal() error {
	if s.maxTs >= 0 && (len(s.times) == 0 || s.times[len(s.times)-1].ts < s.maxTs) {
		s.times = append(s.times, timeEntry{ts: s.maxTs, rel: uint32(s.maxTsOff - s.base), pos: uint32(s.size)})
	}
	err := s.writeIndexes()
	if err == nil {
		err = s.syncIndexes()
	}
	if s.idxF != nil {
		s.idxF.Close()
		s.timeF.Close()
		s.idxF, s.timeF = nil, nil
	}
	return err
}

// noteBatch records a batch written at pos: sparse index entries, the
// segment's timestamps and its end. buf is the batch's bytes (used only to
// find the record carrying a new maximum timestamp).
func (s *segment) noteBatch(h batchHeader, pos int64, buf []byte, interval int32) {
	if pos > 0 && s.sinceIndex >= int64(interval) {
		s.index = append(s.index, indexEntry{rel: uint32(h.baseOffset - s.base), pos: uint32(pos)})
		if s.maxTs >= 0 && (len(s.times) == 0 || s.times[len(s.times)-1].ts < s.maxTs) {
			s.times = append(s.times, timeEntry{ts: s.maxTs, rel: uint32(s.maxTsOff - s.base), pos: uint32(pos)})
		}
		s.sinceIndex = 0
	}
	s.sinceIndex += int64(h.size())
	if h.maxTimestamp > s.maxTs {
		s.maxTs = h.maxTimestamp
		s.maxTsOff = offsetOfMax(buf, h)
	}
	if s.firstTs < 0 && pos == 0 {
		s.firstTs = h.maxTimestamp
	}
	s.size = pos + int64(h.size())
	s.next = h.lastOffset() + 1
}

// offsetOfMax is the offset of the first record carrying the batch's
// MaxTimestamp (KIP-734). Records of a compressed batch are not decoded, so
// its last offset stands in (what Kafka did before KAFKA-16310).
func offsetOfMax(buf []byte, h batchHeader) int64 {
	off := h.lastOffset()
	if buf != nil {
		recordTimes(buf, h, func(d int32, ts int64) bool {
			if ts == h.maxTimestamp {
				off = h.baseOffset + int64(d)
				return false
			}
			return true
		})
	}
	return off
}

// loadIndexes reads the index files of a segment recovery trusts, keeping
// entries below limit that are strictly increasing (a torn or zero-filled
// tail ends the list: fewer entries only make lookups scan further).
func (s *segment) loadIndexes(limit int64) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.loaded {
		return nil
	}
	b, err := os.ReadFile(segName(s.dir, s.base, ".index"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read index of segment %d: %w", s.base, err)
	}
	var idx []indexEntry
	for ; len(b) >= indexEntrySize; b = b[indexEntrySize:] {
		e := indexEntry{rel: binary.BigEndian.Uint32(b), pos: binary.BigEndian.Uint32(b[4:])}
		if int64(e.pos) >= limit || e.pos == 0 || (len(idx) > 0 && (e.rel <= idx[len(idx)-1].rel || e.pos <= idx[len(idx)-1].pos)) {
			break
		}
		idx = append(idx, e)
	}
	b, err = os.ReadFile(segName(s.dir, s.base, ".timeindex"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read time index of segment %d: %w", s.base, err)
	}
	var times []timeEntry
	for ; len(b) >= timeEntrySize; b = b[timeEntrySize:] {
		e := timeEntry{ts: int64(binary.BigEndian.Uint64(b)), rel: binary.BigEndian.Uint32(b[8:]), pos: binary.BigEndian.Uint32(b[12:])}
		if int64(e.pos) > limit || (len(times) > 0 && (e.ts <= times[len(times)-1].ts || e.pos < times[len(times)-1].pos)) {
			break
		}
		times = append(times, e)
	}
	s.index, s.times, s.loaded = idx, times, true
	s.idxWritten, s.timeWritten = len(idx), len(times)
	return nil
}

// readLastTimeEntry reads a sealed segment's largest timestamp from the last
// time-index entry without loading the index.
func (s *segment) readLastTimeEntry() {
	f, err := os.Open(segName(s.dir, s.base, ".timeindex"))
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() < timeEntrySize {
		return
	}
	var b [timeEntrySize]byte
	if _, err := f.ReadAt(b[:], fi.Size()/timeEntrySize*timeEntrySize-timeEntrySize); err != nil {
		return
	}
	s.maxTs = int64(binary.BigEndian.Uint64(b[:]))
	s.maxTsOff = s.base + int64(binary.BigEndian.Uint32(b[8:]))
}

// lookup returns the position of a batch boundary at or before offset.
func (s *segment) lookup(offset int64) int64 {
	rel := offset - s.base
	i := sort.Search(len(s.index), func(i int) bool { return int64(s.index[i].rel) > rel })
	if i == 0 {
		return 0
	}
	return int64(s.index[i-1].pos)
}

// lookupPos returns the last indexed batch boundary at or before pos.
func (s *segment) lookupPos(pos int64) int64 {
	i := sort.Search(len(s.index), func(i int) bool { return int64(s.index[i].pos) > pos })
	if i == 0 {
		return 0
	}
	return int64(s.index[i-1].pos)
}

// lookupTime returns a position such that every batch before it has
// MaxTimestamp < ts.
func (s *segment) lookupTime(ts int64) int64 {
	i := sort.Search(len(s.times), func(i int) bool { return s.times[i].ts >= ts })
	if i == 0 {
		return 0
	}
	return int64(s.times[i-1].pos)
}

// readHeader reads the fixed header of the batch at pos.
func (s *segment) readHeader(pos int64, buf *[batchHeaderSize]byte) (batchHeader, error) {
	if _, err := s.f.ReadAt(buf[:], pos); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return batchHeader{}, fmt.Errorf("read batch header at %s:%d: %w", s.logPath(), pos, err)
	}
	return parseHeader(buf[:]), nil
}

// truncate cuts the data file to size and drops index entries past it.
func (s *segment) truncate(size int64) error {
	if err := s.f.Truncate(size); err != nil {
		return fmt.Errorf("truncate segment %s to %d: %w", s.logPath(), size, err)
	}
	return nil
}

// remove unlinks the segment's files. Readers holding a reference keep
// reading the unlinked file through their open descriptor (POSIX
// unlink-while-open); the descriptor closes with the last reference.
func (s *segment) remove() error {
	s.deleted = true
	var errs []error
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		if err := os.Remove(segName(s.dir, s.base, ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.unref()
	return errors.Join(errs...)
}
