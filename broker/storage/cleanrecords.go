package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Record and batch encoding for the log cleaner, the writing half of the
// record walker in records.go (which reads, for produce, recovery and the
// cleaner alike), and the produce-time key check of compacted logs.

// keyCheck is the record callback of a compacted log's produce: a record
// without a key is refused (Kafka's LogValidator.validateKey: "Compacted
// topic cannot accept message without key", INVALID_RECORD). Other logs
// get nil (records are only validated).
func keyCheck(cfg *LogConfig) func(Record) error {
	if !cfg.Compact {
		return nil
	}
	return func(r Record) error {
		if r.Key == nil {
			return fmt.Errorf("%w (record at offset delta %d)", ErrKeyless, r.OffsetDelta)
		}
		return nil
	}
}

// appendRecord appends r, length-prefixed, to dst (DefaultRecord layout;
// see records.go).
func appendRecord(dst []byte, r *Record) []byte {
	n := 1 + varintLen(r.TimestampDelta) + varintLen(int64(r.OffsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(r.HeaderCount)) + len(r.Headers)
	dst = binary.AppendVarint(dst, int64(n))
	dst = append(dst, byte(r.Attributes))
	dst = binary.AppendVarint(dst, r.TimestampDelta)
	dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(r.HeaderCount))
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

// zstdEncoders are pooled: building one allocates its tables; EncodeAll
// on a pooled one is stateless between calls. A nil entry (construction
// failed) makes compress report an error.
var zstdEncoders = sync.Pool{New: func() any {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil
	}
	return e
}}

// compressRecords encodes recs with codec, as a Kafka producer of that codec
// would (snappy: one raw block, which Kafka and every client read).
func compressRecords(codec int, recs []byte) ([]byte, error) {
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
// LastOffsetDelta, producer fields) holding the n encoded records recs,
// compressed with attrs' codec; attrs, baseTs and maxTs replace h's.
// LastOffsetDelta is kept even when records were removed, so the batch's
// last sequence survives (Kafka's overrideLastOffset).
func newBatch(h batchHeader, attrs int16, baseTs, maxTs int64, recs []byte, n int32) ([]byte, error) {
	body, err := compressRecords(int(attrs&attrCompressionMask), recs)
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
