package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Record-level decoding and encoding of v2 batches (KIP-98 record format,
// DefaultRecord.java): the log cleaner rewrites batches record by record
// and a compacted topic's produce checks that every record has a key.
//
// NOTE: this is one of two record walkers in this package's history (the
// produce validator added for record-level checks is the other); they
// should be unified so that produce and cleaning agree on what a valid
// record is.
//
// A record is: length varint, attributes int8, timestampDelta varlong,
// offsetDelta varint, keyLength varint (-1: null), key, valueLength varint
// (-1: null), value, header count varint, headers. Varints are zigzag, as
// encoding/binary's Varint.

// maxDecompressed bounds what one stored or produced batch may decompress
// to, so a compression bomb cannot make the broker allocate without limit.
const maxDecompressed = 256 << 20

// Compression codecs (the batch attributes' low three bits).
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLz4    = 3
	codecZstd   = 4
)

// Record is one decoded record. Key, Value and Headers alias the buffer
// the record was decoded from; a nil Key or Value is null (a nil Value is a
// tombstone). Headers are kept raw (count varint and headers), since the
// cleaner copies them unchanged.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     []byte
	Headers        []byte
}

// errRecord wraps a malformed-record reason as ErrCorruptMessage.
func errRecord(format string, args ...any) error {
	return fmt.Errorf("%w: record: %s", ErrCorruptMessage, fmt.Sprintf(format, args...))
}

// decodeRecord decodes the length-prefixed record at the start of b and
// returns it with the bytes it took.
func decodeRecord(b []byte) (Record, int, error) {
	l, n := binary.Varint(b)
	if n <= 0 || l < 1 || l > int64(len(b)-n) {
		return Record{}, 0, errRecord("length field runs past the records")
	}
	body := b[n : n+int(l)]
	var r Record
	r.Attributes = int8(body[0])
	p := 1
	ts, m := binary.Varint(body[p:])
	if m <= 0 {
		return Record{}, 0, errRecord("bad timestamp delta")
	}
	r.TimestampDelta, p = ts, p+m
	od, m := binary.Varint(body[p:])
	if m <= 0 || od < 0 || od > math.MaxInt32 {
		return Record{}, 0, errRecord("bad offset delta")
	}
	r.OffsetDelta, p = int32(od), p+m
	var err error
	if r.Key, p, err = decodeBytes(body, p, "key"); err != nil {
		return Record{}, 0, err
	}
	if r.Value, p, err = decodeBytes(body, p, "value"); err != nil {
		return Record{}, 0, err
	}
	if hc, m := binary.Varint(body[p:]); m <= 0 || hc < 0 {
		return Record{}, 0, errRecord("bad header count")
	}
	r.Headers = body[p:]
	return r, n + int(l), nil
}

// decodeBytes reads a varint-length byte field (-1: nil) at p of body.
func decodeBytes(body []byte, p int, what string) ([]byte, int, error) {
	l, m := binary.Varint(body[p:])
	if m <= 0 || l < -1 || l > int64(len(body)-p-m) {
		return nil, 0, errRecord("bad %s length", what)
	}
	p += m
	if l < 0 {
		return nil, p, nil
	}
	return body[p : p+int(l) : p+int(l)], p + int(l), nil
}

// appendRecord appends r, length-prefixed, to dst.
func appendRecord(dst []byte, r *Record) []byte {
	n := 1 + varintLen(r.TimestampDelta) + varintLen(int64(r.OffsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + len(r.Headers)
	dst = binary.AppendVarint(dst, int64(n))
	dst = append(dst, byte(r.Attributes))
	dst = binary.AppendVarint(dst, r.TimestampDelta)
	dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	return append(dst, r.Headers...)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func bytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

func varintLen(v int64) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutVarint(tmp[:], v)
}

// walkRecords calls fn for each of the n records in recs (uncompressed)
// and checks that exactly n records fill recs.
func walkRecords(recs []byte, n int32, fn func(*Record) error) error {
	for i := int32(0); i < n; i++ {
		if len(recs) == 0 {
			return errRecord("batch says %d records, holds %d", n, i)
		}
		r, used, err := decodeRecord(recs)
		if err != nil {
			return err
		}
		if err := fn(&r); err != nil {
			return err
		}
		recs = recs[used:]
	}
	if len(recs) != 0 {
		return errRecord("%d bytes after the last of %d records", len(recs), n)
	}
	return nil
}

// batchRecords returns the uncompressed record bytes of batch (the whole
// batch's bytes, header included).
func batchRecords(batch []byte, h batchHeader) ([]byte, error) {
	src := batch[batchHeaderSize:h.size()]
	out, err := decompress(h.compression(), src)
	if err != nil {
		return nil, fmt.Errorf("%w: batch at offset %d: %w", ErrCorruptMessage, h.baseOffset, err)
	}
	return out, nil
}

// xerialMagic prefixes snappy data framed by the Java snappy-java library
// (SnappyOutputStream): 8 magic bytes, two int32 versions, then blocks of
// int32 length + raw snappy.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func decompress(codec int, src []byte) ([]byte, error) {
	return decompressInto(nil, codec, src)
}

// decompressInto decodes src into dst's capacity where it can (dst[:0]
// is overwritten), allocating otherwise. For codecNone it returns src.
func decompressInto(dst []byte, codec int, src []byte) ([]byte, error) {
	switch codec {
	case codecNone:
		return src, nil
	case codecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return readBounded(dst, zr, "gzip")
	case codecSnappy:
		return decodeSnappy(dst[:0], src)
	case codecLz4:
		return readBounded(dst, lz4.NewReader(bytes.NewReader(src)), "lz4")
	case codecZstd:
		zd, ok := zstdDecoders.Get().(*zstd.Decoder)
		if !ok {
			return nil, fmt.Errorf("zstd: no decoder")
		}
		defer zstdDecoders.Put(zd)
		out, err := zd.DecodeAll(src, dst[:0])
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

// Pooled zstd codecs: building one allocates its tables. DecodeAll and
// EncodeAll on a pooled one are stateless between calls. A nil entry
// (construction failed) makes the caller report an error.
var (
	zstdDecoders = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressed))
		if err != nil {
			return nil
		}
		return d
	}}
	zstdEncoders = sync.Pool{New: func() any {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil
		}
		return e
	}}
)

func readBounded(dst []byte, r io.Reader, codec string) ([]byte, error) {
	out := bytes.NewBuffer(dst[:0])
	n, err := out.ReadFrom(io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", codec, err)
	}
	if n > maxDecompressed {
		return nil, fmt.Errorf("%s: decompresses to more than %d bytes", codec, maxDecompressed)
	}
	return out.Bytes(), nil
}

func decodeSnappy(out, src []byte) ([]byte, error) {
	if len(src) < 16 || !bytes.HasPrefix(src, xerialMagic) {
		return snappyBlock(out, src)
	}
	for b := src[16:]; len(b) > 0; {
		if len(b) < 4 {
			return nil, fmt.Errorf("snappy: truncated xerial block length")
		}
		n := int64(binary.BigEndian.Uint32(b))
		if n > int64(len(b)-4) {
			return nil, fmt.Errorf("snappy: xerial block of %d bytes runs past the data", n)
		}
		var err error
		if out, err = snappyBlock(out, b[4:4+n]); err != nil {
			return nil, err
		}
		b = b[4+n:]
	}
	return out, nil
}

// snappyBlock appends the decoding of one raw snappy block to dst.
func snappyBlock(dst, src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	if n > maxDecompressed-len(dst) {
		return nil, fmt.Errorf("snappy: decompresses to more than %d bytes", maxDecompressed)
	}
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	out, err := s2.Decode(dst[start:], src)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	if len(out) != n || (n > 0 && &out[0] != &dst[start]) {
		return nil, fmt.Errorf("snappy: block decoded to %d bytes, header said %d", len(out), n)
	}
	return dst, nil
}

// compress encodes recs with codec, as a Kafka producer of that codec
// would (snappy: one raw block, which Kafka and every client read).
func compress(codec int, recs []byte) ([]byte, error) {
	switch codec {
	case codecNone:
		return recs, nil
	case codecGzip:
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(recs); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return buf.Bytes(), nil
	case codecSnappy:
		return s2.EncodeSnappy(nil, recs), nil
	case codecLz4:
		var buf bytes.Buffer
		zw := lz4.NewWriter(&buf)
		if _, err := zw.Write(recs); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return buf.Bytes(), nil
	case codecZstd:
		zw, ok := zstdEncoders.Get().(*zstd.Encoder)
		if !ok {
			return nil, fmt.Errorf("zstd: no encoder")
		}
		defer zstdEncoders.Put(zw)
		return zw.EncodeAll(recs, nil), nil
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

// newBatch encodes a batch with h's fixed fields (BaseOffset,
// LastOffsetDelta, producer fields, attributes) holding the n encoded
// records recs, compressed with h's codec; baseTs, maxTs and attrs
// replace h's. LastOffsetDelta is kept even when records were removed, so
// the batch's last sequence survives (Kafka's overrideLastOffset).
func newBatch(h batchHeader, attrs int16, baseTs, maxTs int64, recs []byte, n int32) ([]byte, error) {
	body, err := compress(int(attrs&attrCompressionMask), recs)
	if err != nil {
		return nil, err
	}
	be := binary.BigEndian
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(body))
	be.PutUint64(b[offBaseOffset:], uint64(h.baseOffset))
	be.PutUint32(b[offLength:], uint32(batchHeaderSize-lengthPrefix+len(body)))
	be.PutUint32(b[offLeaderEpoch:], uint32(int32(leaderEpoch)))
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], uint16(attrs))
	be.PutUint32(b[offLastOffsetDelta:], uint32(h.lastOffsetDelta))
	be.PutUint64(b[offBaseTimestamp:], uint64(baseTs))
	be.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	be.PutUint64(b[offProducerID:], uint64(h.producerID))
	be.PutUint16(b[offProducerEpoch:], uint16(h.producerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(h.baseSequence))
	be.PutUint32(b[offNumRecords:], uint32(n))
	b = append(b, body...)
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b, nil
}

// checkBufs are the decompression buffers of produce-time key checks;
// buffers that grew past maxPooledCheck are not kept.
var checkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

const maxPooledCheck = 4 << 20

// checkKeys refuses a batch with a record that has no key, for a
// compacted topic (Kafka's LogValidator.validateKey: INVALID_RECORD).
func checkKeys(batch []byte, h batchHeader) error {
	if h.isControl() {
		return nil
	}
	bp := checkBufs.Get().(*[]byte)
	defer checkBufs.Put(bp)
	recs, err := decompressInto(*bp, h.compression(), batch[batchHeaderSize:h.size()])
	if err != nil {
		return fmt.Errorf("%w: batch at offset %d: %w", ErrInvalidRecord, h.baseOffset, err)
	}
	if h.compression() != codecNone && cap(recs) <= maxPooledCheck {
		*bp = recs[:0]
	}
	return walkRecords(recs, h.numRecords, func(r *Record) error {
		if r.Key == nil {
			return fmt.Errorf("%w: Compacted topic cannot accept message without key (record at offset delta %d)", ErrInvalidRecord, r.OffsetDelta)
		}
		return nil
	})
}
