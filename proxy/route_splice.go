package proxy

import (
	"encoding/binary"
	"errors"
	"io"
	"iter"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record bytes are written as they are, never copied by an encoder: a
// single-port Produce part sent upstream and a merged Fetch answer sent
// to the client are encoded by kmsg with every records field null (a few
// bytes a partition), and the frame is written as that encoding cut at
// each records field, with the field's length and its record bytes (the
// client's Produce frame, or the parts' Fetch answers as read) spliced
// in. The result is byte for byte what kmsg's own encoding of the
// request or answer is (route_splice_test.go), without the copy of every
// record through the encoder (a third of the single-port gateway's CPU
// in the profile of 2026-12-06, and a buffer the size of the largest
// request or answer kept per connection).

// spliceMin is the shortest records field spliced; shorter ones are
// copied into the encoded bytes (fewer, larger iovecs).
const spliceMin = 1 << 10

// splicedFrame is an encoding with record bytes spliced in: head holds
// everything but the spliced records, cut at cuts (offsets into head)
// where recs[i] goes, or, where pipes[i] is set, the records it holds
// (pipe_records.go; recs[i] is then its placeholder).
type splicedFrame struct {
	head  []byte
	cuts  []int
	recs  [][]byte
	pipes []*pipedRecords
	piped bool // some pipes[i] is set
}

// size is the frame's length.
func (f *splicedFrame) size() int {
	n := len(f.head)
	for i, r := range f.recs {
		if p := f.pipes[i]; p != nil {
			n += p.size()
		} else {
			n += len(r)
		}
	}
	return n
}

// buffers appends the frame's pieces, in order, to bufs. A frame with
// piped records is written by fetchAnswer.writePiped instead.
func (f *splicedFrame) buffers(bufs net.Buffers) net.Buffers {
	prev := 0
	for i, c := range f.cuts {
		if c > prev {
			bufs = append(bufs, f.head[prev:c])
		}
		bufs = append(bufs, f.recs[i])
		prev = c
	}
	if prev < len(f.head) {
		bufs = append(bufs, f.head[prev:])
	}
	return bufs
}

// splice builds f from enc, an encoding with every records field null,
// whose null markers are at marks (one per records field, in encoding
// order), and recs, the fields' real values in the same order (nil:
// null). piped (nil: none) names the values that are placeholders of
// piped records. head is appended to f.head[:0] (reused).
func (f *splicedFrame) splice(enc []byte, marks []int, recs [][]byte, flexible bool, piped func([]byte) *pipedRecords) {
	f.head, f.cuts, f.recs, f.pipes, f.piped = f.head[:0], f.cuts[:0], f.recs[:0], f.pipes[:0], false
	marker := 4 // int32 -1
	if flexible {
		marker = 1 // uvarint 0
	}
	prev := 0
	for i, m := range marks {
		r := recs[i]
		if r == nil {
			continue
		}
		var p *pipedRecords
		if piped != nil {
			p = piped(r)
		}
		n := len(r)
		if p != nil {
			n = p.size()
		}
		f.head = append(f.head, enc[prev:m]...)
		if flexible {
			f.head = binary.AppendUvarint(f.head, uint64(n)+1)
		} else {
			f.head = binary.BigEndian.AppendUint32(f.head, uint32(n))
		}
		if p == nil && n < spliceMin {
			f.head = append(f.head, r...)
		} else {
			f.cuts = append(f.cuts, len(f.head))
			f.recs = append(f.recs, r)
			f.pipes = append(f.pipes, p)
			f.piped = f.piped || p != nil
		}
		prev = m + marker
	}
	f.head = append(f.head, enc[prev:]...)
}

var errSpliceWalk = errors.New("internal: records walk does not match the encoding")

// walker reads the encodings kmsg wrote, for the offsets of their
// records fields; it only has to skip, and it stops at the first error.
type walker struct {
	b    []byte
	off  int
	flex bool
	err  error
}

func (w *walker) skip(n int) {
	if w.err == nil && (n < 0 || n > len(w.b)-w.off) {
		w.err = errSpliceWalk
	}
	if w.err == nil {
		w.off += n
	}
}

func (w *walker) uvarint() uint64 {
	if w.err != nil {
		return 0
	}
	v, n := binary.Uvarint(w.b[w.off:])
	if n <= 0 {
		w.err = errSpliceWalk
		return 0
	}
	w.off += n
	return v
}

func (w *walker) int16() int16 {
	if w.skip(2); w.err != nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(w.b[w.off-2:]))
}

func (w *walker) int32() int32 {
	if w.skip(4); w.err != nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(w.b[w.off-4:]))
}

// arrayLen is an array's (or nullable array's) element count, 0 for null.
func (w *walker) arrayLen() int {
	if w.flex {
		return int(w.uvarint()) - 1
	}
	return int(w.int32())
}

// str skips a (nullable) string.
func (w *walker) str() {
	if w.flex {
		if n := w.uvarint(); n > 0 { // 0: null
			w.skip(int(n - 1))
		}
		return
	}
	w.skip(max(int(w.int16()), 0))
}

// tags skips a tagged-field section.
func (w *walker) tags() {
	if !w.flex {
		return
	}
	for n := w.uvarint(); n > 0 && w.err == nil; n-- {
		w.uvarint()
		w.skip(int(w.uvarint()))
	}
}

// nullRecords notes the offset of a null records field and skips it.
func (w *walker) nullRecords(marks []int) []int {
	marks = append(marks, w.off)
	if w.flex {
		if w.uvarint() != 0 {
			w.err = errSpliceWalk
		}
	} else if w.int32() != -1 {
		w.err = errSpliceWalk
	}
	return marks
}

// fetchRecordMarks returns the offsets of the (null) records fields of
// a Fetch response body kmsg encoded at version.
func fetchRecordMarks(b []byte, version int16, marks []int) ([]int, error) {
	w := &walker{b: b, flex: version >= 12}
	if version >= 1 {
		w.skip(4)
	}
	if version >= 7 {
		w.skip(6)
	}
	for range max(w.arrayLen(), 0) {
		if version <= 12 {
			w.str()
		} else {
			w.skip(16)
		}
		for range max(w.arrayLen(), 0) {
			w.skip(4 + 2 + 8)
			if version >= 4 {
				w.skip(8)
			}
			if version >= 5 {
				w.skip(8)
			}
			if version >= 4 {
				for range max(w.arrayLen(), 0) {
					w.skip(16)
					w.tags()
				}
			}
			if version >= 11 {
				w.skip(4)
			}
			marks = w.nullRecords(marks)
			w.tags()
			if w.err != nil {
				return nil, w.err
			}
		}
		w.tags()
	}
	return w.end(marks)
}

// produceRecordMarks returns the offsets of the (null) records fields
// of a Produce request body kmsg encoded at version, from off.
func produceRecordMarks(b []byte, off int, version int16, marks []int) ([]int, error) {
	w := &walker{b: b, off: off, flex: version >= 9}
	if version >= 3 {
		w.str()
	}
	w.skip(2 + 4)
	for range max(w.arrayLen(), 0) {
		if version <= 12 {
			w.str()
		} else {
			w.skip(16)
		}
		for range max(w.arrayLen(), 0) {
			w.skip(4)
			marks = w.nullRecords(marks)
			w.tags()
			if w.err != nil {
				return nil, w.err
			}
		}
		w.tags()
	}
	return w.end(marks)
}

// end reads a message's closing tags and checks the walk reached the
// end of the bytes; it returns marks, or the walk's error.
func (w *walker) end(marks []int) ([]int, error) {
	w.tags()
	if w.err == nil && w.off != len(w.b) {
		w.err = errSpliceWalk
	}
	return marks, w.err
}

// fetchRecordFields and produceRecordFields yield a message's records
// fields in encoding order, for takeRecords and putRecords.
func fetchRecordFields(r *kmsg.FetchResponse) iter.Seq[*[]byte] {
	return func(yield func(*[]byte) bool) {
		for i := range r.Topics {
			ps := r.Topics[i].Partitions
			for j := range ps {
				if !yield(&ps[j].RecordBatches) {
					return
				}
			}
		}
	}
}

func produceRecordFields(r *kmsg.ProduceRequest) iter.Seq[*[]byte] {
	return func(yield func(*[]byte) bool) {
		for i := range r.Topics {
			ps := r.Topics[i].Partitions
			for j := range ps {
				if !yield(&ps[j].Records) {
					return
				}
			}
		}
	}
}

// takeRecords nulls the fields, appending their bytes to recs in order
// (putRecords puts them back).
func takeRecords(fields iter.Seq[*[]byte], recs [][]byte) [][]byte {
	for f := range fields {
		recs = append(recs, *f)
		*f = nil
	}
	return recs
}

func putRecords(fields iter.Seq[*[]byte], recs [][]byte) {
	k := 0
	for f := range fields {
		*f = recs[k]
		k++
	}
}

// spliceFetch encodes r (a Fetch response body, no header) into f with
// its record bytes spliced. r is left as it was.
func spliceFetch(r *kmsg.FetchResponse, f *splicedFrame, piped func([]byte) *pipedRecords) error {
	recs := takeRecords(fetchRecordFields(r), nil)
	enc := r.AppendTo(make([]byte, 0, 256+64*len(recs)))
	putRecords(fetchRecordFields(r), recs)
	marks, err := fetchRecordMarks(enc, r.Version, make([]int, 0, len(recs)))
	if err != nil || len(marks) != len(recs) {
		return errSpliceWalk
	}
	f.splice(enc, marks, recs, r.Version >= 12, piped)
	return nil
}

// produceSplicer encodes Produce frames for one upstream connection,
// reusing its buffers. Ownership: the connection's writer (the read loop).
type produceSplicer struct {
	enc   []byte
	marks []int
	recs  [][]byte
	frame splicedFrame
	bufs  net.Buffers
}

// appendProduce encodes r as a request frame (size, header, body) with
// fm and corr, and returns it as buffers to write: the client's record
// bytes are spliced, not copied. r is left as it was. The buffers are
// valid until the next call.
func (p *produceSplicer) appendProduce(fm *kmsg.RequestFormatter, r *kmsg.ProduceRequest, corr int32) (net.Buffers, error) {
	p.recs = takeRecords(produceRecordFields(r), p.recs[:0])
	p.enc = fm.AppendRequest(p.enc[:0], r, corr)
	putRecords(produceRecordFields(r), p.recs)
	// The header: size, key, version, correlation id, client id (a
	// nullable int16 string), and a flexible request's empty tags.
	w := &walker{b: p.enc}
	w.skip(4 + 2 + 2 + 4)
	w.skip(max(int(w.int16()), 0))
	if r.IsFlexible() {
		w.flex = true
		w.tags()
	}
	if w.err != nil {
		return nil, w.err
	}
	var err error
	p.marks, err = produceRecordMarks(p.enc, w.off, r.Version, p.marks[:0])
	if err != nil || len(p.marks) != len(p.recs) {
		return nil, errSpliceWalk
	}
	p.frame.splice(p.enc, p.marks, p.recs, r.Version >= 9, nil)
	binary.BigEndian.PutUint32(p.frame.head, uint32(p.frame.size()-4))
	clear(p.recs)
	p.bufs = p.frame.buffers(p.bufs[:0])
	return p.bufs, nil
}

// written drops the references to the client's frame once the buffers
// are written.
func (p *produceSplicer) written() {
	clear(p.frame.recs)
	clear(p.bufs[:cap(p.bufs)])
}

// fetchAnswer is a merged single-port Fetch answer (a wire.Body): its
// fields' encoding with the record bytes spliced from parts, the pooled
// frames of the parts' answers, which go back to the pool once it is
// written or dropped (Release).
// Ownership: made by encodeAnswer, then the write loop's.
type fetchAnswer struct {
	frame splicedFrame
	parts []*partBody
}

func (a *fetchAnswer) Len() int { return a.frame.size() }

// buffers is the answer as pieces to write, after bufs.
func (a *fetchAnswer) buffers(bufs net.Buffers) net.Buffers { return a.frame.buffers(bufs) }

// start is the answer's first bytes (its top-level fields).
func (a *fetchAnswer) start() []byte {
	if len(a.frame.cuts) > 0 {
		return a.frame.head[:a.frame.cuts[0]]
	}
	return a.frame.head
}

// WriteTo writes the answer and releases it. The session writes an
// answer with piped records straight to its socket (writeFetchAnswer);
// through WriteTo (an answer rewritten or audited whole, materialize)
// the piped records are read out of their pipes.
func (a *fetchAnswer) WriteTo(w io.Writer) (int64, error) {
	if a.frame.piped {
		n, err := a.copyPiped(w)
		a.Release()
		return n, err
	}
	bufs := a.buffers(nil)
	n, err := bufs.WriteTo(w)
	a.Release()
	return n, err
}

// Release returns the parts' frames; nothing reads the answer after.
func (a *fetchAnswer) Release() {
	for _, b := range a.parts {
		b.release()
	}
	a.parts, a.frame.recs, a.frame.pipes = nil, nil, nil
}
