package proxy

import "sync/atomic"

// Large request frames (over 512 KiB: the ones in bigFrames) are mapped
// outside the Go heap where the platform allows (frame_mem_unix.go). They
// already have an owner count and are released explicitly (frameBuf,
// putFrame), so the collector has nothing to find; in its heap, a
// single-port session's whole-request Produce frames (a little over
// 3 MiB for kgo's three 1 MiB partitions) counted twice in the process's
// peak memory, once live and once more in the heap goal (GOGC=100).
//
// A frame is unmapped only when the free list lets it go (over its byte
// limit, or idle across two collections); until then it is reused, as a
// heap frame was. Under the race detector frames stay in the heap so that
// it still watches their bytes (race.go, norace.go).
var framesOffHeap = mapsFrames && !raceEnabled

// framesMapped and framesUnmapped count the frames mapped and unmapped
// so far (tests read them: a mapped frame never released is memory lost
// for good, where a heap frame would have been collected);
// framesMappedBytes is what is mapped now.
var framesMapped, framesUnmapped, framesMappedBytes atomic.Int64

// RequestFrameStats reports the bytes of large request frames mapped
// outside the heap now (in use or free), which Go's heap metrics do not
// show, and the bytes of large frames (mapped or not) kept free for
// reuse, for the metrics (tollgate_request_frames_mapped_bytes and
// tollgate_request_frames_free_bytes).
func RequestFrameStats() (mapped, free int64) {
	_, b := bigFrames.held()
	return framesMappedBytes.Load(), int64(b)
}
