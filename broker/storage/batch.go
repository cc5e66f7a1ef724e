package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Record batch v2 layout (docs/protocol.md §7.1, DefaultRecordBatch.java). The
// CRC-32C covers bytes 21..end, so BaseOffset (0..7) and
// PartitionLeaderEpoch (12..15) are assigned in place without touching it.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57
	batchHeaderSize    = 61 // RECORD_BATCH_OVERHEAD
	lengthPrefix       = 12 // BaseOffset + Length: bytes not counted by Length

	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20

	// leaderEpoch is what a single-node broker writes as
	// PartitionLeaderEpoch: the leader never changes.
	leaderEpoch = 0
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchHeader is the decoded fixed header of one batch.
type batchHeader struct {
	baseOffset      int64
	length          int32 // bytes after the Length field
	magic           int8
	crc             uint32
	attributes      int16
	lastOffsetDelta int32
	baseTimestamp   int64
	maxTimestamp    int64
	producerID      int64
	producerEpoch   int16
	baseSequence    int32
	numRecords      int32
}

func (h *batchHeader) size() int         { return int(h.length) + lengthPrefix }
func (h *batchHeader) lastOffset() int64 { return h.baseOffset + int64(h.lastOffsetDelta) }
func (h *batchHeader) isControl() bool   { return h.attributes&attrControl != 0 }
func (h *batchHeader) isTxn() bool       { return h.attributes&attrTransactional != 0 }
func (h *batchHeader) compression() int  { return int(h.attributes & attrCompressionMask) }

// lastSequence is BaseSequence + LastOffsetDelta wrapping at MaxInt32
// (DefaultRecordBatch.incrementSequence).
func (h *batchHeader) lastSequence() int32 { return incSeq(h.baseSequence, h.lastOffsetDelta) }

func incSeq(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

// parseHeader decodes the 61-byte header; b must hold at least that much.
func parseHeader(b []byte) batchHeader {
	be := binary.BigEndian
	return batchHeader{
		baseOffset:      int64(be.Uint64(b[offBaseOffset:])),
		length:          int32(be.Uint32(b[offLength:])),
		magic:           int8(b[offMagic]),
		crc:             be.Uint32(b[offCRC:]),
		attributes:      int16(be.Uint16(b[offAttributes:])),
		lastOffsetDelta: int32(be.Uint32(b[offLastOffsetDelta:])),
		baseTimestamp:   int64(be.Uint64(b[offBaseTimestamp:])),
		maxTimestamp:    int64(be.Uint64(b[offMaxTimestamp:])),
		producerID:      int64(be.Uint64(b[offProducerID:])),
		producerEpoch:   int16(be.Uint16(b[offProducerEpoch:])),
		baseSequence:    int32(be.Uint32(b[offBaseSequence:])),
		numRecords:      int32(be.Uint32(b[offNumRecords:])),
	}
}

// checkBatch validates the batch at the start of b as it would be stored:
// length, magic, CRC and record count. It returns the header. Both the
// produce path and recovery use these checks, so they agree on what a valid
// batch is.
func checkBatch(b []byte) (batchHeader, error) {
	if len(b) < batchHeaderSize {
		return batchHeader{}, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptMessage, len(b))
	}
	h := parseHeader(b)
	if err := checkFraming(&h, int64(len(b))); err != nil {
		return h, err
	}
	if got := crc32.Checksum(b[offAttributes:h.size()], castagnoli); got != h.crc {
		return h, fmt.Errorf("%w: CRC-32C is %08x, header says %08x", ErrCorruptMessage, got, h.crc)
	}
	return h, checkCounts(&h)
}

// checkFraming checks the length field against the avail bytes from the
// batch start, and the magic.
func checkFraming(h *batchHeader, avail int64) error {
	if h.length < batchHeaderSize-lengthPrefix {
		return fmt.Errorf("%w: length field %d is shorter than a batch header", ErrCorruptMessage, h.length)
	}
	if int64(h.length)+lengthPrefix > avail {
		return fmt.Errorf("%w: length field %d runs past the %d bytes given", ErrCorruptMessage, h.length, avail)
	}
	if h.magic != 2 {
		// Produce v3+ must carry magic 2 (ProduceRequest.validateRecords:
		// InvalidRecordException -> INVALID_RECORD).
		return fmt.Errorf("%w: magic %d, only magic 2 is accepted", ErrInvalidRecord, h.magic)
	}
	return nil
}

// checkCounts checks the fields covered by the CRC that must agree.
func checkCounts(h *batchHeader) error {
	if h.numRecords <= 0 || h.lastOffsetDelta < 0 || int64(h.lastOffsetDelta)+1 != int64(h.numRecords) {
		return fmt.Errorf("%w: LastOffsetDelta %d does not match NumRecords %d", ErrInvalidRecord, h.lastOffsetDelta, h.numRecords)
	}
	if h.compression() > 4 {
		return fmt.Errorf("%w: unknown compression codec %d", ErrInvalidRecord, h.compression())
	}
	return nil
}

// checkStoredCounts is checkCounts for a batch read back from a segment;
// cleaned accepts a compacted batch (fewer records than offsets, maybe
// none: cleaner.go).
func checkStoredCounts(h *batchHeader, cleaned bool) error {
	if !cleaned {
		return checkCounts(h)
	}
	if h.numRecords < 0 || h.lastOffsetDelta < 0 || int64(h.numRecords) > int64(h.lastOffsetDelta)+1 {
		return fmt.Errorf("%w: LastOffsetDelta %d with NumRecords %d", ErrInvalidRecord, h.lastOffsetDelta, h.numRecords)
	}
	if h.compression() > 4 {
		return fmt.Errorf("%w: unknown compression codec %d", ErrInvalidRecord, h.compression())
	}
	return nil
}

// incoming is one validated batch of an Append, located in the caller's buffer.
type incoming struct {
	h   batchHeader
	buf []byte // exactly the batch's bytes
}

// splitBatches validates every batch of a produce, its records included
// (records.go), and, for LogAppendTime
// topics, stamps them (the only rewrite that needs a new CRC). It runs
// before the log lock is taken: CRC work is the expensive part of an append.
func splitBatches(b []byte, cfg *LogConfig, o *AppendOptions) ([]incoming, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: no record batches", ErrInvalidRecord)
	}
	var out []incoming
	for len(b) > 0 {
		if len(b) >= lengthPrefix {
			if n := int64(int32(binary.BigEndian.Uint32(b[offLength:]))) + lengthPrefix; n > int64(cfg.MaxMessageBytes) {
				return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrMessageTooLarge, n, cfg.MaxMessageBytes)
			}
		}
		h, err := checkBatch(b)
		if err != nil {
			return nil, err
		}
		if h.isControl() && !o.AllowControl {
			return nil, fmt.Errorf("%w: clients may not send control batches", ErrInvalidRecord)
		}
		if h.isTxn() && h.producerID < 0 {
			return nil, fmt.Errorf("%w: transactional batch without a producer id", ErrInvalidRecord)
		}
		if h.producerID >= 0 && (h.producerEpoch < 0 || (!h.isControl() && h.baseSequence < 0)) {
			return nil, fmt.Errorf("%w: producer id %d with epoch %d and sequence %d", ErrInvalidRecord, h.producerID, h.producerEpoch, h.baseSequence)
		}
		buf := b[:h.size()]
		if err := walkRecords(buf, &h, keyCheck(cfg)); err != nil {
			return nil, err
		}
		if cfg.LogAppendTime {
			stampLogAppendTime(buf, o.Now.UnixMilli())
			h = parseHeader(buf)
		}
		out = append(out, incoming{h: h, buf: buf})
		b = b[h.size():]
	}
	return out, nil
}

// stampLogAppendTime sets the timestamp-type bit and MaxTimestamp and
// recomputes the CRC, as Kafka's setMaxTimestamp(LOG_APPEND_TIME, now) does.
func stampLogAppendTime(b []byte, now int64) {
	be := binary.BigEndian
	attrs := be.Uint16(b[offAttributes:]) | attrLogAppendTime
	be.PutUint16(b[offAttributes:], attrs)
	be.PutUint64(b[offMaxTimestamp:], uint64(now))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// assignOffset writes the broker-owned fields not covered by the CRC.
func assignOffset(b []byte, base int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(int32(leaderEpoch)))
}

// recordTimes calls fn(offsetDelta, timestamp) for each record of an
// uncompressed batch and reports whether it could (false for a compressed
// or malformed batch). Used for timestamp lookups, which Kafka answers per
// record.
func recordTimes(b []byte, h batchHeader, fn func(delta int32, ts int64) bool) bool {
	if h.compression() != 0 {
		return false
	}
	if h.attributes&attrLogAppendTime != 0 {
		// Every record carries the batch's MaxTimestamp.
		for i := int32(0); i < h.numRecords; i++ {
			if !fn(i, h.maxTimestamp) {
				break
			}
		}
		return true
	}
	rec := b[batchHeaderSize:h.size()]
	for i := int32(0); i < h.numRecords && len(rec) > 0; i++ {
		l, n := binary.Varint(rec)
		if n <= 0 || l < 0 || int64(len(rec)-n) < l {
			return false
		}
		body := rec[n : n+int(l)]
		rec = rec[n+int(l):]
		if len(body) < 1 {
			return false
		}
		tsd, m := binary.Varint(body[1:]) // after the attributes byte
		if m <= 0 {
			return false
		}
		od, k := binary.Varint(body[1+m:])
		if k <= 0 {
			return false
		}
		if !fn(int32(od), h.baseTimestamp+tsd) {
			break
		}
	}
	return true
}

// controlType returns the type of a control batch's first record key
// (0 abort, 1 commit; kmsg ControlRecordKey), or -1.
func controlType(b []byte, h batchHeader) int16 {
	if !h.isControl() || h.compression() != 0 {
		return -1
	}
	rec := b[batchHeaderSize:h.size()]
	l, n := binary.Varint(rec)
	if n <= 0 || l < 0 || int64(len(rec)-n) < l {
		return -1
	}
	body := rec[n : n+int(l)]
	p := 1        // attributes
	for range 2 { // timestampDelta, offsetDelta
		_, m := binary.Varint(body[p:])
		if m <= 0 {
			return -1
		}
		p += m
	}
	kl, m := binary.Varint(body[p:])
	if m <= 0 || kl < 4 || int64(len(body)-p-m) < kl {
		return -1
	}
	key := body[p+m:]
	return int16(binary.BigEndian.Uint16(key[2:4]))
}
