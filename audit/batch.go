package audit

import "encoding/binary"

// Offsets into a record batch (magic 2) header, from Kafka's
// DefaultRecordBatch: baseOffset int64, batchLength int32,
// partitionLeaderEpoch int32, magic int8, crc uint32, attributes int16,
// lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
// producerId int64, producerEpoch int16, baseSequence int32,
// recordsCount int32 — 61 bytes in all.
//
// A message set (magic 0 and 1) has the same first 12 bytes (offset int64,
// messageSize int32) and the magic byte at the same place (offset 16), so
// one walk handles both.
const (
	batchLengthOff  = 8
	batchMagicOff   = 16
	batchCountOff   = 57
	batchHeaderSize = 61
	logOverhead     = 12 // offset + length, before every batch or message
)

// countRecords counts the records in a produce or fetch payload by reading
// batch headers only: nothing is decompressed or CRC-checked. For magic 2
// batches the count is the header's recordsCount. A magic 0/1 message
// counts as one record even when it is a compressed wrapper (its inner
// messages are only reachable by decompressing). A truncated trailing
// batch, which a fetch response may legally end with (KIP-74), is not
// counted.
func countRecords(b []byte) int {
	n := 0
	for len(b) >= logOverhead {
		size := int64(int32(binary.BigEndian.Uint32(b[batchLengthOff:])))
		if size <= 0 || int64(len(b)-logOverhead) < size {
			return n
		}
		if len(b) > batchMagicOff && b[batchMagicOff] >= 2 {
			if len(b) < batchHeaderSize || size < batchHeaderSize-logOverhead {
				return n
			}
			if c := int32(binary.BigEndian.Uint32(b[batchCountOff:])); c > 0 {
				n += int(c)
			}
		} else {
			n++
		}
		b = b[logOverhead+int(size):]
	}
	return n
}
