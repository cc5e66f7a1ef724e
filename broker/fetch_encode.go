package broker

import (
	"encoding/binary"
	"io"
	"sync"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/tollgate-kafka/tollgate/wire"
)

// The Fetch response is encoded by hand so that record data goes from the
// segment files to the socket without passing through the heap: the body
// is a list of segments, encoded bytes alternating with storage read
// results, and WriteTo hands each read result its writer (sendfile when the
// writer is a TCP connection). The layout follows kmsg's
// FetchResponse.AppendTo field for field; fetch_encode_test.go compares the
// two byte for byte for every version.
//
// NOTE: a field added to FetchResponse in a new kmsg version must be added
// here too, and the Fetch max version in 01_fetch.go raised only then.

// fetchBody is a Fetch response body. WriteTo releases the read results;
// a body that is never written must be released with Release.
type fetchBody struct {
	segs    []fetchSeg
	n       int
	fetched []wire.FetchedPartition // per partition served, for audit (wire.FetchSummary)

	mu       sync.Mutex
	released bool
}

// fetchSeg is either encoded bytes or a read result.
type fetchSeg struct {
	b  []byte
	rr *storage.ReadResult
}

var (
	_ wire.Body         = (*fetchBody)(nil)
	_ wire.FetchSummary = (*fetchBody)(nil)
)

// Fetched reports what each partition returned.
func (f *fetchBody) Fetched() []wire.FetchedPartition { return f.fetched }

// Len is the exact body length.
func (f *fetchBody) Len() int { return f.n }

// WriteTo writes the body and releases its read results.
func (f *fetchBody) WriteTo(w io.Writer) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.released {
		return 0, errFetchBodyReleased
	}
	defer f.releaseLocked()
	var n int64
	for _, s := range f.segs {
		if s.rr != nil {
			m, err := s.rr.WriteTo(w)
			n += m
			if err != nil {
				return n, err
			}
			continue
		}
		m, err := w.Write(s.b)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Release frees the read results of a body that will not be written.
func (f *fetchBody) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseLocked()
}

func (f *fetchBody) releaseLocked() {
	if f.released {
		return
	}
	f.released = true
	for _, s := range f.segs {
		if s.rr != nil {
			s.rr.Release()
		}
	}
}

// fetchEncoder appends to the current byte segment.
type fetchEncoder struct {
	body *fetchBody
	cur  []byte
	flex bool
}

func (e *fetchEncoder) i16(v int16) { e.cur = binary.BigEndian.AppendUint16(e.cur, uint16(v)) }
func (e *fetchEncoder) i32(v int32) { e.cur = binary.BigEndian.AppendUint32(e.cur, uint32(v)) }
func (e *fetchEncoder) i64(v int64) { e.cur = binary.BigEndian.AppendUint64(e.cur, uint64(v)) }
func (e *fetchEncoder) uvarint(v uint64) {
	e.cur = binary.AppendUvarint(e.cur, v)
}

// arrayLen writes an array length (compact in flexible versions).
func (e *fetchEncoder) arrayLen(n int) {
	if e.flex {
		e.uvarint(uint64(n) + 1)
		return
	}
	e.i32(int32(n))
}

// nullArray writes a null array.
func (e *fetchEncoder) nullArray() {
	if e.flex {
		e.uvarint(0)
		return
	}
	e.i32(-1)
}

func (e *fetchEncoder) str(s string) {
	if e.flex {
		e.uvarint(uint64(len(s)) + 1)
	} else {
		e.i16(int16(len(s)))
	}
	e.cur = append(e.cur, s...)
}

// emptyTags writes an empty tagged-field section.
func (e *fetchEncoder) emptyTags() {
	if e.flex {
		e.uvarint(0)
	}
}

// records writes the records length and then the read result (or nothing).
func (e *fetchEncoder) records(rr *storage.ReadResult) {
	size := 0
	if rr != nil {
		size = rr.Size
	}
	if e.flex {
		e.uvarint(uint64(size) + 1)
	} else {
		e.i32(int32(size))
	}
	if size == 0 {
		return
	}
	e.flush()
	e.body.segs = append(e.body.segs, fetchSeg{rr: rr})
	e.body.n += size
}

func (e *fetchEncoder) flush() {
	if len(e.cur) == 0 {
		return
	}
	e.body.segs = append(e.body.segs, fetchSeg{b: e.cur})
	e.body.n += len(e.cur)
	e.cur = nil
}

// encode builds the response body; read results move into the body.
func (f *fetch) encode() *fetchBody {
	v := f.req.Version
	e := &fetchEncoder{body: &fetchBody{}, flex: v >= 12}
	e.cur = make([]byte, 0, 256)
	if v >= 1 {
		e.i32(0) // ThrottleMillis
	}
	if v >= 7 {
		e.i16(f.sessionCode)
		e.i32(f.sessionID)
	}
	if f.sessionCode != 0 {
		e.arrayLen(0)
		e.emptyTags()
		e.flush()
		return e.body
	}
	f.settleSession()
	served := 0
	nt := 0
	for ti := range f.topics {
		if f.topics[ti].included() > 0 {
			nt++
		}
	}
	e.arrayLen(nt)
	for ti := range f.topics {
		ft := &f.topics[ti]
		if ft.included() == 0 {
			continue
		}
		if v <= 12 {
			e.str(ft.name)
		} else {
			e.cur = append(e.cur, ft.id[:]...)
		}
		e.arrayLen(ft.included())
		for pi := range ft.parts {
			fp := &ft.parts[pi]
			if fp.skip {
				continue
			}
			hw, lso, start := fp.hw, fp.lso, fp.start
			if fp.code != 0 || fp.p == nil {
				hw, lso, start = -1, -1, -1
			}
			e.i32(fp.partition)
			e.i16(fp.code)
			e.i64(hw)
			if v >= 4 {
				e.i64(lso)
			}
			if v >= 5 {
				e.i64(start)
			}
			if v >= 4 {
				// Kafka sends null aborted transactions at read_uncommitted
				// and a list (possibly empty) at read_committed.
				if f.req.IsolationLevel == 1 {
					e.arrayLen(len(fp.aborted))
					for _, a := range fp.aborted {
						e.i64(a.ProducerID)
						e.i64(a.FirstOffset)
						e.emptyTags()
					}
				} else {
					e.nullArray()
				}
			}
			if v >= 11 {
				e.i32(-1) // PreferredReadReplica
			}
			if fp.rr != nil {
				served += fp.rr.Size
			}
			e.body.fetched = append(e.body.fetched, fetchedOf(ft, fp))
			e.records(fp.rr)
			fp.rr = nil // owned by the body now
			e.emptyTags()
		}
		e.emptyTags()
	}
	e.emptyTags()
	e.flush()
	f.c.b.observeBytes(0, served)
	return e.body
}

// fetchedOf summarises one partition of the response; records are those
// at or after the fetch offset (the batches' offsets up to the next batch).
func fetchedOf(ft *fetchTopic, fp *fetchPart) wire.FetchedPartition {
	out := wire.FetchedPartition{Topic: ft.name, TopicID: ft.id, Partition: fp.partition, ErrorCode: fp.code}
	if fp.rr != nil && fp.rr.Size > 0 {
		out.Bytes = fp.rr.Size
		out.Records = int(max(fp.rr.NextOffset-fp.offset, 0))
	}
	return out
}

// included is how many of the topic's partitions the response carries.
func (ft *fetchTopic) included() int {
	n := 0
	for i := range ft.parts {
		if !ft.parts[i].skip {
			n++
		}
	}
	return n
}
