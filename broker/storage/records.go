package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// The record walker: the one place that reads the records inside a v2
// batch. Produce (ValidateBatch through Append), crash recovery (the
// unverified tail) and anything that needs the records themselves (log
// compaction) use it, so they agree on what a well-formed record is.
//
// A record (DefaultRecord.java, KIP-98) is
//
//	length varint | attributes int8 | timestampDelta varlong |
//	offsetDelta varint | keyLength varint | key | valueLength varint |
//	value | headerCount varint | headers
//
// and a header is keyLength varint | key | valueLength varint | value.
// Kafka's LogValidator reads every record of an uncompressed batch and
// decompresses compressed ones; a record that does not parse, that does not
// fill exactly its length, or a batch whose records do not match its
// NumRecords or run past them, throws InvalidRecordException:
// INVALID_RECORD (87), ErrInvalidRecord here. A compressed payload that does
// not decompress is CORRUPT_MESSAGE (2), ErrCorruptMessage.

// MaxDecompressedBytes bounds the bytes a compressed batch may expand to.
// Validation streams the decompressed records and keeps none of them, so
// the bound limits CPU, not memory: a decompression bomb is refused after
// this many bytes instead of being expanded without end. Producers
// compress batches of about a MiB (kgo's ProducerBatchMaxBytes, the Java
// producer's batch.size), so the bound leaves two orders of magnitude.
const MaxDecompressedBytes = 256 << 20

// Record is one record of a batch. Key, Value and Headers alias the
// batch's bytes (uncompressed) or the walker's scratch buffer
// (compressed): they are valid only during the callback that receives
// them.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte // nil for a null key
	Value          []byte // nil for a null value (a tombstone)
	HeaderCount    int
	Headers        []byte // the encoded headers, HeaderCount of them
}

// BatchInfo is what ValidateBatch learned about a batch.
type BatchInfo struct {
	Size            int   // bytes of the batch, header included
	NumRecords      int32 // as checked against the records
	LastOffsetDelta int32
	Compression     int // 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
	Control         bool
	Transactional   bool
}

// ValidateBatch checks the batch at the start of b as the produce path
// does: framing, magic, CRC-32C, header counts, and every record (after
// decompressing, within MaxDecompressedBytes). Errors wrap
// ErrCorruptMessage or ErrInvalidRecord.
func ValidateBatch(b []byte) (BatchInfo, error) {
	h, err := checkBatch(b)
	if err != nil {
		return BatchInfo{}, err
	}
	if err := walkRecords(b[:h.size()], &h, nil); err != nil {
		return BatchInfo{}, err
	}
	return BatchInfo{Size: h.size(), NumRecords: h.numRecords, LastOffsetDelta: h.lastOffsetDelta,
		Compression: h.compression(), Control: h.isControl(), Transactional: h.isTxn()}, nil
}

// EachRecord calls fn for every record of the batch at the start of b,
// which must pass ValidateBatch's header checks; it stops at fn's first
// error and returns it.
func EachRecord(b []byte, fn func(Record) error) error {
	h, err := checkBatch(b)
	if err != nil {
		return err
	}
	return walkRecords(b[:h.size()], &h, fn)
}

// walkRecords reads every record of batch (exactly one batch, its header
// already checked) and checks them against h. With fn nil, keys, values
// and headers are skipped, not copied.
func walkRecords(batch []byte, h *batchHeader, fn func(Record) error) error {
	return walkRecordsAs(batch, h, false, fn)
}

// walkRecordsAs is walkRecords; compacted accepts what log compaction
// leaves in a stored batch (cleaner.go): fewer records than offsets, the
// last record's delta below LastOffsetDelta, or no records at all.
func walkRecordsAs(batch []byte, h *batchHeader, compacted bool, fn func(Record) error) error {
	payload := batch[batchHeaderSize:h.size()]
	if h.compression() == 0 {
		src := &sliceSource{b: payload}
		if err := walkSource(src, h, compacted, fn); err != nil {
			return err
		}
		if src.left() > 0 {
			return fmt.Errorf("%w: %d bytes follow the batch's %d records", ErrInvalidRecord, src.left(), h.numRecords)
		}
		return nil
	}
	return walkStream(bytes.NewReader(payload), h, compacted, fn)
}

// walkStream is walkRecords for a payload read as a stream (a compressed
// payload, or a batch too large for recovery to hold in memory).
func walkStream(payload io.Reader, h *batchHeader, compacted bool, fn func(Record) error) error {
	r := payload
	if h.compression() != codecNone {
		dec, err := newDecompressor(h.compression(), payload)
		if err != nil {
			return fmt.Errorf("%w: %s payload: %v", ErrCorruptMessage, codecName(h.compression()), err)
		}
		defer dec.close()
		r = dec
	}
	src := &streamSource{r: r, left: MaxDecompressedBytes, keep: fn != nil}
	defer src.release()
	if err := walkSource(src, h, compacted, fn); err != nil {
		return err
	}
	switch _, err := src.ReadByte(); {
	case err == nil:
		return fmt.Errorf("%w: bytes follow the batch's %d records", ErrInvalidRecord, h.numRecords)
	case errors.Is(err, io.ErrUnexpectedEOF):
		// Every record was read but the compressed stream stops short of
		// its end (a gzip trailer, an lz4 end mark): the payload is cut.
		return fmt.Errorf("%w: %s payload is truncated after its records", ErrCorruptMessage, codecName(h.compression()))
	case !errors.Is(err, io.EOF):
		return err
	}
	return nil
}

// walkSource reads h.numRecords records from src and checks their offset
// deltas: strictly increasing within [0, LastOffsetDelta], the last one
// equal to it (Kafka's producers number them 0..n-1; a compacted batch
// keeps its LastOffsetDelta with gaps below it).
func walkSource(src recordSource, h *batchHeader, compacted bool, fn func(Record) error) error {
	prev := int32(-1)
	for i := int32(0); i < h.numRecords; i++ {
		r, err := readRecord(src)
		if err != nil {
			return fmt.Errorf("record %d of %d: %w", i, h.numRecords, err)
		}
		if r.OffsetDelta <= prev || r.OffsetDelta > h.lastOffsetDelta {
			return fmt.Errorf("%w: record %d has offset delta %d after %d (LastOffsetDelta %d)", ErrInvalidRecord, i, r.OffsetDelta, prev, h.lastOffsetDelta)
		}
		prev = r.OffsetDelta
		if r.TimestampDelta > 0 && h.baseTimestamp > math.MaxInt64-r.TimestampDelta ||
			r.TimestampDelta < 0 && h.baseTimestamp < math.MinInt64-r.TimestampDelta {
			return fmt.Errorf("%w: record %d timestamp delta %d overflows base timestamp %d", ErrInvalidRecord, i, r.TimestampDelta, h.baseTimestamp)
		}
		if fn != nil {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	if prev != h.lastOffsetDelta && !compacted {
		return fmt.Errorf("%w: last record has offset delta %d, LastOffsetDelta is %d", ErrInvalidRecord, prev, h.lastOffsetDelta)
	}
	return nil
}

// readRecord reads one record; every length is checked against what the
// record's own length leaves before anything is read or skipped.
func readRecord(src recordSource) (Record, error) {
	var r Record
	src.startRecord()
	length, err := readVarint(src, "record length")
	if err != nil {
		return r, err
	}
	if length <= 0 || length > math.MaxInt32 {
		return r, fmt.Errorf("%w: record length %d", ErrInvalidRecord, length)
	}
	rr := &recordReader{src: src, left: length}
	attrs, err := rr.byte()
	if err != nil {
		return r, err
	}
	r.Attributes = int8(attrs)
	if r.TimestampDelta, err = rr.varint("timestamp delta"); err != nil {
		return r, err
	}
	od, err := rr.varint("offset delta")
	if err != nil {
		return r, err
	}
	if od < 0 || od > math.MaxInt32 {
		return r, fmt.Errorf("%w: offset delta %d", ErrInvalidRecord, od)
	}
	r.OffsetDelta = int32(od)
	if r.Key, err = rr.bytes("key", "key length"); err != nil {
		return r, err
	}
	if r.Value, err = rr.bytes("value", "value length"); err != nil {
		return r, err
	}
	if r.HeaderCount, r.Headers, err = rr.headers(); err != nil {
		return r, err
	}
	if rr.left != 0 {
		return r, fmt.Errorf("%w: record length %d, but its fields end %d bytes early", ErrInvalidRecord, length, rr.left)
	}
	return r, nil
}

// recordReader reads the fields of one record, never past its length.
type recordReader struct {
	src  recordSource
	left int64 // bytes of the record not yet read
}

func (rr *recordReader) byte() (byte, error) {
	if rr.left < 1 {
		return 0, fmt.Errorf("%w: record ends inside its attributes", ErrInvalidRecord)
	}
	c, err := rr.src.ReadByte()
	if err != nil {
		return 0, underflow(err, "attributes")
	}
	rr.left--
	return c, nil
}

func (rr *recordReader) varint(what string) (int64, error) {
	before := rr.src.consumed()
	v, err := readVarint(rr.src, what)
	if err != nil {
		return 0, err
	}
	rr.left -= rr.src.consumed() - before
	if rr.left < 0 {
		return 0, fmt.Errorf("%w: record ends inside its %s", ErrInvalidRecord, what)
	}
	return v, nil
}

// bytes reads a varint length (-1: null) and that many bytes. The names
// are for errors (constants: no string is built per record).
func (rr *recordReader) bytes(what, whatLength string) ([]byte, error) {
	n, err := rr.varint(whatLength)
	if err != nil {
		return nil, err
	}
	switch {
	case n == -1:
		return nil, nil
	case n < -1:
		return nil, fmt.Errorf("%w: %s length %d", ErrInvalidRecord, what, n)
	case n > rr.left:
		return nil, fmt.Errorf("%w: %s length %d, but the record has %d bytes left", ErrInvalidRecord, what, n, rr.left)
	}
	rr.left -= n
	b, err := rr.src.take(int(n))
	if err != nil {
		return nil, underflow(err, what)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// headers reads the header count and the headers, returning them encoded.
func (rr *recordReader) headers() (int, []byte, error) {
	n, err := rr.varint("header count")
	if err != nil {
		return 0, nil, err
	}
	if n < 0 || n > rr.left/2 { // a header takes at least two bytes
		return 0, nil, fmt.Errorf("%w: header count %d with %d bytes left", ErrInvalidRecord, n, rr.left)
	}
	start := rr.src.mark()
	for i := int64(0); i < n; i++ {
		k, err := rr.bytes("header key", "header key length")
		if err != nil {
			return 0, nil, err
		}
		if k == nil {
			return 0, nil, fmt.Errorf("%w: header %d has a null key", ErrInvalidRecord, i)
		}
		if _, err := rr.bytes("header value", "header value length"); err != nil {
			return 0, nil, err
		}
	}
	return int(n), rr.src.since(start), nil
}

// readVarint reads a zig-zag varint of at most 10 bytes (Kafka's varlong;
// varint fields are range-checked by their callers).
func readVarint(src recordSource, what string) (int64, error) {
	v, err := binary.ReadVarint(src)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, fmt.Errorf("%w: records end inside a %s", ErrInvalidRecord, what)
		}
		if errors.Is(err, ErrCorruptMessage) || errors.Is(err, ErrInvalidRecord) {
			return 0, err
		}
		return 0, fmt.Errorf("%w: %s: %v", ErrInvalidRecord, what, err)
	}
	return v, nil
}

func underflow(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: records end inside a %s", ErrInvalidRecord, what)
	}
	return err
}

// recordSource is where the walker reads records from: the batch's own
// bytes, or a decompressing stream.
type recordSource interface {
	io.ByteReader
	take(n int) ([]byte, error) // n bytes; nil (not an error) when skipping
	consumed() int64            // bytes read so far
	startRecord()               // a new record begins: earlier takes may be reused
	mark() int64                // a position for since
	since(mark int64) []byte    // the bytes read from mark (nil when skipping)
}

// sliceSource reads an uncompressed payload in place.
type sliceSource struct {
	b   []byte
	off int
}

func (s *sliceSource) left() int { return len(s.b) - s.off }

func (s *sliceSource) ReadByte() (byte, error) {
	if s.off >= len(s.b) {
		return 0, io.EOF
	}
	c := s.b[s.off]
	s.off++
	return c, nil
}

func (s *sliceSource) take(n int) ([]byte, error) {
	if n > s.left() {
		return nil, io.ErrUnexpectedEOF
	}
	out := s.b[s.off : s.off+n : s.off+n]
	s.off += n
	return out, nil
}

func (s *sliceSource) consumed() int64      { return int64(s.off) }
func (s *sliceSource) startRecord()         {}
func (s *sliceSource) mark() int64          { return int64(s.off) }
func (s *sliceSource) since(m int64) []byte { return s.b[m:s.off:s.off] }
