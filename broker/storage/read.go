package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sort"
	"sync"
	"syscall"
)

// Section is a byte range of one segment file: whole batches.
type Section struct {
	seg *segment
	Pos int64 // file position
	Len int64
}

// ReadResult is what a Fetch serves for one partition: whole batches
// starting with the one that contains the fetch offset (as Kafka does, so
// the first batch may hold offsets below it), up to maxBytes but at least
// one batch, never past the high watermark. The bytes stay in the segment
// files until WriteTo.
//
// Retention may delete a segment while a ReadResult holds it: each section
// holds a reference on its segment, whose descriptor stays open until the
// last Release (the file itself is unlinked at once; POSIX keeps an
// unlinked open file readable). Call Release exactly once.
type ReadResult struct {
	HighWatermark, LogStartOffset, LastStableOffset int64
	Size                                            int // total bytes of Sections
	Sections                                        []Section
	// NextOffset is the base offset of the first batch after the returned
	// ones (the read's end when it returned everything there was): the
	// upper bound of the aborted transactions a read_committed Fetch
	// reports, as Kafka's LogSegment.fetchUpperBoundOffset.
	NextOffset int64
}

// Release drops the result's references on its segments.
func (r *ReadResult) Release() {
	for _, s := range r.Sections {
		s.seg.unref()
	}
	r.Sections = nil
}

// Read returns the batches from offset, up to maxBytes (at least one whole
// batch). An offset equal to the high watermark (or between it and the log
// end, while an fsync is pending) yields an empty result.
func (l *Log) Read(offset int64, maxBytes int32) (*ReadResult, error) {
	return l.ReadUpTo(offset, maxBytes, math.MaxInt64)
}

// ReadUpTo is Read that also leaves out every batch whose base offset is at
// or past upTo. A read_committed Fetch passes the last stable offset (a
// batch boundary: the first batch of the oldest open transaction), so it
// never sees a transaction that may still abort (KIP-98). An offset at or
// past upTo yields an empty result.
func (l *Log) ReadUpTo(offset int64, maxBytes int32, upTo int64) (*ReadResult, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, fmt.Errorf("%w: log %s is closed", ErrStorage, l.dir)
	}
	if offset < l.logStart || offset > l.leo {
		return nil, fmt.Errorf("%w: offset %d, log has [%d, %d)", ErrOffsetOutOfRange, offset, l.logStart, l.leo)
	}
	r := &ReadResult{HighWatermark: l.hw, LogStartOffset: l.logStart, LastStableOffset: l.lsoLocked(), NextOffset: offset}
	if offset >= l.hw || offset >= upTo {
		return r, nil
	}
	stop, err := l.stopLocked(upTo)
	if err != nil {
		return nil, err
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	if i < 0 {
		i = 0
	}
	seg := l.segs[i]
	if err := seg.loadIndexes(seg.size); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	pos, err := l.findBatch(seg, offset)
	if err != nil {
		return nil, err
	}
	budget := max(int64(maxBytes), 0)
	for {
		limit := stop.limit(seg)
		end := pos
		var next int64 = -1 // base offset of the batch at end, when read
		for end < limit {
			if jp := seg.lookupPos(pos + budget); jp > end && jp <= limit {
				end = jp // indexed boundaries: whole batches that fit
				continue
			}
			var hb [batchHeaderSize]byte
			h, err := seg.readHeader(end, &hb)
			if err != nil {
				r.Release()
				return nil, fmt.Errorf("%w: %w", ErrStorage, err)
			}
			if end-pos+int64(h.size()) > budget && (r.Size > 0 || end > pos) {
				next = h.baseOffset
				break
			}
			end += int64(h.size())
		}
		if end > pos {
			seg.ref()
			r.Sections = append(r.Sections, Section{seg: seg, Pos: pos, Len: end - pos})
			r.Size += int(end - pos)
			budget -= end - pos
		}
		last := seg == stop.seg || i+1 >= len(l.segs)
		if end < limit || last || budget <= 0 {
			switch {
			case end == limit && seg == stop.seg:
				r.NextOffset = stop.offset
			case end == seg.size && !last:
				r.NextOffset = l.segs[i+1].base
			case next >= 0:
				r.NextOffset = next
			case end < seg.size:
				// The index jump stopped at a boundary whose offset we have
				// not read.
				var hb [batchHeaderSize]byte
				h, err := seg.readHeader(end, &hb)
				if err != nil {
					r.Release()
					return nil, fmt.Errorf("%w: %w", ErrStorage, err)
				}
				r.NextOffset = h.baseOffset
			default:
				r.NextOffset = l.leo
			}
			return r, nil
		}
		i++
		seg, pos = l.segs[i], 0
		if err := seg.loadIndexes(seg.size); err != nil {
			r.Release()
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
}

// readStop is where a read ends: at pos of seg, which is offset.
type readStop struct {
	seg    *segment
	pos    int64
	offset int64
}

// limit is how far seg may be read.
func (s readStop) limit(seg *segment) int64 {
	switch {
	case seg == s.seg:
		return s.pos
	case s.seg != nil && seg.base > s.seg.base:
		return 0
	}
	return seg.size
}

// stopLocked finds where a read up to upTo ends: the high watermark, or
// the first batch below it whose base offset is at least upTo. Caller
// holds mu (read).
func (l *Log) stopLocked(upTo int64) (readStop, error) {
	if upTo >= l.hw {
		return readStop{seg: l.hwSeg, pos: l.hwPos, offset: l.hw}, nil
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > upTo }) - 1
	if i < 0 {
		i = 0
	}
	seg := l.segs[i]
	if err := seg.loadIndexes(seg.size); err != nil {
		return readStop{}, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	pos, err := l.findBatch(seg, upTo)
	if err != nil {
		return readStop{}, err
	}
	st := readStop{seg: seg, pos: pos, offset: upTo}
	if pos < seg.size {
		var hb [batchHeaderSize]byte
		h, err := seg.readHeader(pos, &hb)
		if err != nil {
			return readStop{}, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		if h.baseOffset < upTo {
			// upTo falls inside this batch, which starts below it: keep it.
			st.pos, st.offset = pos+int64(h.size()), h.lastOffset()+1
		}
	}
	return st, nil
}

// findBatch returns the position of the batch of seg containing offset.
func (l *Log) findBatch(seg *segment, offset int64) (int64, error) {
	pos := seg.lookup(offset)
	var hb [batchHeaderSize]byte
	for pos < seg.size {
		h, err := seg.readHeader(pos, &hb)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		if h.lastOffset() >= offset {
			return pos, nil
		}
		pos += int64(h.size())
	}
	return pos, nil
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// WriteTo writes the sections to w. When w is a socket that exposes its
// descriptor (*net.TCPConn, *net.UnixConn) the bytes go file to socket with
// sendfile(2), never through the Go heap; each call passes its own file
// offset, so concurrent readers of one segment never share a seek
// position. Write deadlines on the connection apply; when w is also a
// DeadlinePusher, a deadline that passes while bytes still moved is
// pushed and the write goes on. Other writers (TLS) get pread + Write.
func (r *ReadResult) WriteTo(w io.Writer) (int64, error) {
	var total int64
	sc, isSock := w.(syscall.Conn)
	if _, isNet := w.(net.Conn); !isNet {
		isSock = false
	}
	for _, s := range r.Sections {
		var n int64
		var err error
		if isSock {
			n, err = sendfile(sc, s)
		} else {
			n, err = copySection(w, s)
		}
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// DeadlinePusher is a connection whose write deadline bounds a write that
// makes no progress rather than a whole one: PushWriteDeadline sets a new
// deadline, called when one passed while bytes still moved.
type DeadlinePusher interface{ PushWriteDeadline() }

func sendfile(sc syscall.Conn, s Section) (int64, error) {
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("sendfile: %w", err)
	}
	off, remain := s.Pos, s.Len
	var werr error
	write := func(fd uintptr) bool {
		for remain > 0 {
			n, e := syscall.Sendfile(int(fd), s.seg.fd, &off, int(min(remain, 1<<30)))
			if n > 0 {
				remain -= int64(n)
			}
			switch {
			case e == syscall.EAGAIN:
				return false // wait until the socket is writable
			case e == syscall.EINTR:
				continue
			case e != nil:
				werr = e
				return true
			case n == 0:
				werr = io.ErrUnexpectedEOF // the file is shorter than the section
				return true
			}
		}
		return true
	}
	pusher, _ := sc.(DeadlinePusher)
	for {
		before := remain
		err = rc.Write(write)
		if pusher == nil || remain == before || !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		pusher.PushWriteDeadline()
	}
	if err == nil {
		err = werr
	}
	if err != nil {
		return s.Len - remain, fmt.Errorf("sendfile %s: %w", s.seg.logPath(), err)
	}
	return s.Len, nil
}

func copySection(w io.Writer, s Section) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	n, err := io.CopyBuffer(onlyWriter{w}, io.NewSectionReader(s.seg.f, s.Pos, s.Len), *bp)
	if err == nil && n != s.Len {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return n, fmt.Errorf("copy %s: %w", s.seg.logPath(), err)
	}
	return n, nil
}

// onlyWriter hides ReadFrom so io.CopyBuffer uses the given buffer.
type onlyWriter struct{ io.Writer }

// AppendTo appends the sections' bytes to b (for callers that must hold
// the bytes, such as a TLS connection or tests).
func (r *ReadResult) AppendTo(b []byte) ([]byte, error) {
	for _, s := range r.Sections {
		start := len(b)
		b = append(b, make([]byte, s.Len)...)
		if _, err := s.seg.f.ReadAt(b[start:], s.Pos); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return b[:start], fmt.Errorf("read %s: %w", s.seg.logPath(), err)
		}
	}
	return b, nil
}

// limitLocked is how far seg may be read: its end, or the high watermark.
// Caller holds mu.
func (l *Log) limitLocked(seg *segment) int64 {
	return readStop{seg: l.hwSeg, pos: l.hwPos}.limit(seg)
}

// BatchHeader is one batch of a ReadResult as a share-group acquisition
// needs it (offsets and the attributes that decide delivery); Pos and End
// are its byte range within the result (0: the result's first byte).
type BatchHeader struct {
	BaseOffset, LastOffset int64
	ProducerID             int64
	Control, Transactional bool
	Pos, End               int
}

// Headers returns the header of every batch of r in order, one pread of
// the 61-byte fixed header per batch: the records stay in the file.
func (r *ReadResult) Headers() ([]BatchHeader, error) {
	var out []BatchHeader
	base := 0
	var hb [batchHeaderSize]byte
	for _, s := range r.Sections {
		for pos := int64(0); pos < s.Len; {
			h, err := s.seg.readHeader(s.Pos+pos, &hb)
			if err != nil {
				return out, fmt.Errorf("%w: %w", ErrStorage, err)
			}
			size := int64(h.size())
			if size < batchHeaderSize || pos+size > s.Len {
				return out, fmt.Errorf("%w: batch at %s:%d overruns its section", ErrStorage, s.seg.logPath(), s.Pos+pos)
			}
			out = append(out, BatchHeader{BaseOffset: h.baseOffset, LastOffset: h.lastOffset(), ProducerID: h.producerID,
				Control: h.isControl(), Transactional: h.isTxn(), Pos: base + int(pos), End: base + int(pos+size)})
			pos += size
		}
		base += int(s.Len)
	}
	return out, nil
}

// Slice keeps bytes [from, to) of r (batch boundaries, as Headers gives
// them) and releases the segments no longer used. NextOffset is left as
// it was.
func (r *ReadResult) Slice(from, to int) {
	var kept []Section
	base := int64(0)
	f, t := int64(from), int64(to)
	for _, s := range r.Sections {
		lo, hi := max(f, base), min(t, base+s.Len)
		if lo < hi {
			kept = append(kept, Section{seg: s.seg, Pos: s.Pos + (lo - base), Len: hi - lo})
		} else {
			s.seg.unref()
		}
		base += s.Len
	}
	r.Sections = kept
	r.Size = 0
	for _, s := range kept {
		r.Size += int(s.Len)
	}
}
