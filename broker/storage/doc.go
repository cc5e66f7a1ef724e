// Package storage is the durable partition log of tollgate's built-in
// broker.
//
// The wire format is the storage format: record batches (magic 2) are
// written exactly as a producer sent them, with only BaseOffset (bytes
// 0-7) and PartitionLeaderEpoch (bytes 12-15) assigned in place -- the
// CRC-32C starts at byte 21, so it stays valid. Compressed batches stay
// compressed. Fetch is served from the segment files with sendfile(2)
// (ReadResult.WriteTo), never through the Go heap. The one exception is a
// LogAppendTime topic, whose batches get the timestamp attribute and
// MaxTimestamp set and their CRC recomputed, as Kafka does, and batches the
// log cleaner rewrites on a compacted log (cleaner.go).
//
// Layout of a partition directory (the broker names it <topic>-<partition>):
//
//	00000000000000000000.log        segments named by base offset, append-only
//	00000000000000000000.index      sparse offset index (see segment.go)
//	00000000000000000000.timeindex  sparse time index
//	log-start-offset                persisted log start (DeleteRecords, retention)
//	recovery-checkpoint             last fsynced point + producer state (recover.go)
//	cleaner-offset                  compacted logs: end of the last cleaning (cleaner.go)
//	cleaner-swap                    only while cleaned segments are swapped in (cleanswap.go)
//
// Small files are replaced with write-temp, fsync, rename, fsync(dir).
//
// Durability is chosen per Syncer with FsyncPolicy (see its doc for what
// each policy survives). Nothing acknowledged is lost within the policy's
// promise; recovery cuts a torn tail and keeps everything before it, and
// reads only what was written after the last checkpoint.
//
// Reads and retention: a ReadResult references the segments it covers;
// retention and DeleteRecords unlink segment files at once and the
// descriptor closes with the last reference (unlink-while-open), so a
// fetch in flight is never cut short.
package storage
