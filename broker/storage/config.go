package storage

import (
	"fmt"
	"math"
	"strings"
)

// FsyncPolicy says when appended data is forced to disk, and so what a crash
// can take away. Kafka semantics for what "acknowledged" means are kept: an
// acknowledged record is one whose Append durable channel has closed.
//
//   - FsyncAlways ("always"): a produce is acknowledged only after fdatasync
//     of the segment file. Survives kill -9 and power loss. fsyncs are
//     shared across all partitions (group commit, see Syncer), so concurrent
//     producers pay for one fsync per round, not one each. The high
//     watermark moves only once data is durable, so consumers never see
//     records a crash could take away.
//   - FsyncInterval ("interval"): data is written to the page cache at once
//     and fsynced every interval. Survives kill -9 of the process (the
//     kernel still holds the pages), but a power loss or OS crash may lose
//     up to the last interval of acknowledged data.
//   - FsyncNever ("never", Kafka's default): page cache only; the kernel
//     writes back when it likes. Survives kill -9 of the process but not an
//     OS crash or power loss. Closed segments are still fsynced when they
//     roll and everything is fsynced on clean close, so recovery after a
//     crash verifies at most the active segment.
type FsyncPolicy int

const (
	FsyncAlways FsyncPolicy = iota
	FsyncInterval
	FsyncNever
)

func (p FsyncPolicy) String() string {
	switch p {
	case FsyncAlways:
		return "always"
	case FsyncInterval:
		return "interval"
	case FsyncNever:
		return "never"
	}
	return fmt.Sprintf("FsyncPolicy(%d)", int(p))
}

// ParseFsyncPolicy parses "always", "interval" or "never" (case-insensitive).
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "always":
		return FsyncAlways, nil
	case "interval":
		return FsyncInterval, nil
	case "never":
		return FsyncNever, nil
	}
	return 0, fmt.Errorf("unknown fsync policy %q (want always, interval or never)", s)
}

// LogConfig is the per-partition configuration, mirroring Kafka topic
// configs. Zero SegmentBytes, SegmentMs, MaxMessageBytes and
// IndexIntervalBytes take their defaults; RetentionMs and RetentionBytes are
// taken as given (-1 = no limit), so start from DefaultLogConfig.
type LogConfig struct {
	SegmentBytes       int64 // segment.bytes, default 1 GiB (capped at 2 GiB: index positions are 32 bit)
	SegmentMs          int64 // segment.ms, default 7 days; roll when the active segment's first batch is older
	RetentionMs        int64 // retention.ms, -1 = forever
	RetentionBytes     int64 // retention.bytes, -1 = unlimited
	MaxMessageBytes    int32 // max.message.bytes, default 1048588; a larger batch -> ErrMessageTooLarge
	IndexIntervalBytes int32 // index.interval.bytes, default 4096
	// LogAppendTime is message.timestamp.type=LogAppendTime: the broker sets
	// the timestamp-type attribute and MaxTimestamp and recomputes the CRC,
	// the only case where a stored batch differs from the produced one
	// beyond BaseOffset and PartitionLeaderEpoch.
	LogAppendTime bool

	// Compaction (cleanup.policy containing compact; see cleaner.go).
	// Retention still applies through RetentionMs/RetentionBytes, which the
	// broker sets to -1 unless the policy also contains delete.
	Compact bool
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio (0.5): clean once
	// the dirty bytes are at least this share of the cleanable log.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs is min.compaction.lag.ms (0): a segment holding a
	// record younger than this is not cleaned yet.
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms (MaxInt64): a dirty
	// segment older than this is cleaned whatever the dirty ratio.
	MaxCompactionLagMs int64
	// DeleteRetentionMs is delete.retention.ms (1 day): how long a
	// tombstone (or a transaction marker with nothing left to mark) stays
	// after the cleaning that first found it removable (KIP-534).
	DeleteRetentionMs int64
}

const (
	defaultSegmentBytes  = 1 << 30
	maxSegmentBytes      = 1<<31 - 1
	defaultSegmentMs     = 7 * 24 * 60 * 60 * 1000
	defaultMaxMessage    = 1048588
	defaultIndexInterval = 4096
	defaultDirtyRatio    = 0.5
	defaultDeleteRetain  = 24 * 60 * 60 * 1000
)

// DefaultLogConfig returns Kafka's defaults (retention.ms is Kafka's 7 days).
func DefaultLogConfig() LogConfig {
	return LogConfig{
		SegmentBytes:       defaultSegmentBytes,
		SegmentMs:          defaultSegmentMs,
		RetentionMs:        7 * 24 * 60 * 60 * 1000,
		RetentionBytes:     -1,
		MaxMessageBytes:    defaultMaxMessage,
		IndexIntervalBytes: defaultIndexInterval,

		MinCleanableDirtyRatio: defaultDirtyRatio,
		MaxCompactionLagMs:     math.MaxInt64,
		DeleteRetentionMs:      defaultDeleteRetain,
	}
}

func (c LogConfig) normalized() LogConfig {
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = defaultSegmentBytes
	}
	if c.SegmentBytes > maxSegmentBytes {
		c.SegmentBytes = maxSegmentBytes
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = defaultSegmentMs
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = defaultMaxMessage
	}
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = defaultIndexInterval
	}
	if c.MinCleanableDirtyRatio < 0 || c.MinCleanableDirtyRatio > 1 {
		c.MinCleanableDirtyRatio = defaultDirtyRatio
	}
	if c.MaxCompactionLagMs <= 0 {
		c.MaxCompactionLagMs = math.MaxInt64
	}
	c.MinCompactionLagMs = max(c.MinCompactionLagMs, 0)
	c.DeleteRetentionMs = max(c.DeleteRetentionMs, 0)
	return c
}
