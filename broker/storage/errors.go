package storage

import (
	"errors"
	"fmt"
)

// Sentinel errors. Append and Read wrap them with detail; callers branch with
// errors.Is and map them to Kafka error codes (noted on each).
var (
	// ErrCorruptMessage: a CRC mismatch, a length field that disagrees with
	// the bytes, a truncated batch, or a compressed payload that does not
	// decompress. Kafka: CORRUPT_MESSAGE (2).
	ErrCorruptMessage = errors.New("storage: record batch is corrupt")
	// ErrInvalidRecord: magic other than 2, LastOffsetDelta+1 != NumRecords,
	// no records, an unknown compression codec, a control batch sent by a
	// client, or records that disagree with the header or do not parse (a
	// bad length or varint, a count other than NumRecords, bytes after the
	// last record, a batch that decompresses past MaxDecompressedBytes).
	// Kafka: INVALID_RECORD (87).
	ErrInvalidRecord = errors.New("storage: record batch is invalid")
	// ErrMessageTooLarge: a batch larger than max.message.bytes.
	// Kafka: MESSAGE_TOO_LARGE (10).
	ErrMessageTooLarge = errors.New("storage: record batch is larger than max.message.bytes")
	// ErrOutOfOrderSequence: an idempotent batch whose first sequence does not
	// follow the producer's last one. Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER (45).
	ErrOutOfOrderSequence = errors.New("storage: out of order sequence number")
	// ErrInvalidProducerEpoch: a batch from an older producer epoch than the
	// log has seen. Kafka: INVALID_PRODUCER_EPOCH (47).
	ErrInvalidProducerEpoch = errors.New("storage: producer epoch is older than the current one")
	// ErrUnknownProducerID: Kafka: UNKNOWN_PRODUCER_ID (59). Append follows
	// Kafka 2.5+ (KIP-360), which no longer returns it on produce: a producer
	// the log has no state for may start at any sequence (its state may have
	// been removed with the log prefix), except on a partition that has never
	// held a record (KAFKA-15591), which gets ErrOutOfOrderSequence. The
	// sentinel exists so the broker's error mapping is complete.
	ErrUnknownProducerID = errors.New("storage: unknown producer id")
	// ErrOffsetOutOfRange: a read or DeleteRecords offset outside
	// [log start, log end]. Kafka: OFFSET_OUT_OF_RANGE (1).
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrStorage: an I/O error (disk full, EIO, a failed fsync) or a closed
	// log. Kafka: KAFKA_STORAGE_ERROR (56).
	ErrStorage = errors.New("storage: log storage error")
	// ErrKeyless: a record without a key produced to a compacted log
	// (Kafka's LogValidator.validateKey). It is an ErrInvalidRecord:
	// INVALID_RECORD (87).
	ErrKeyless = fmt.Errorf("%w: Compacted topic cannot accept message without key", ErrInvalidRecord)
)
