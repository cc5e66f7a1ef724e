package proxy

// Test hooks for the external test package.
var SASLUserForTest = saslUser

// BudgetForTest reports the shared request budget's available bytes and
// how many reads wait on it.
func BudgetForTest(s *Server) (avail int64, waiting int) {
	s.budget.mu.Lock()
	defer s.budget.mu.Unlock()
	return s.budget.avail, s.budget.waiting
}

// CoordCacheForTest reports how many coordinators the single-port
// cluster view caches, and its bound.
func CoordCacheForTest(s *Server) (cached, bound int) {
	v := s.clusterView()
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.coords.len(), coordCacheSize
}

// SetIdleHookForTest sets the hook nextPending runs between its empty
// queue and its wait on the upstream; nil removes it.
func SetIdleHookForTest(f func()) {
	if f == nil {
		idleHook.Store(nil)
		return
	}
	idleHook.Store(&f)
}

// PipeStatsForTest reports the record sets moved through pipes so far,
// those that spilled into memory, and the pipes in use now
// (pipe_records.go).
func PipeStatsForTest() (piped, spilled int64, inUse int) {
	return pipeStats.piped.Load(), pipeStats.spilled.Load(), recordPipesInUse()
}

// HoldRecordPipesForTest takes every record pipe that may be made, so
// single-port Fetch parts are read into memory until the returned func
// gives them back.
func HoldRecordPipesForTest() func() {
	var held []*recordPipe
	for p := getRecordPipe(); p != nil; p = getRecordPipe() {
		held = append(held, p)
	}
	return func() {
		for _, p := range held {
			putRecordPipe(p, true)
		}
	}
}

// FramesOffHeapForTest maps large request frames outside the Go heap
// (frame_mem.go) even under the race detector, where they are not by
// default, and returns how many were mapped so far and the restore.
// Call before starting a gateway and restore after it stopped.
func FramesOffHeapForTest() (mapped func() int64, restore func()) {
	was := framesOffHeap
	framesOffHeap = mapsFrames
	return framesMapped.Load, func() { framesOffHeap = was }
}

// MapsFramesForTest: this platform can map frames outside the heap.
const MapsFramesForTest = mapsFrames

// MappedFramesOutForTest is how many frames mapped outside the heap are
// neither unmapped nor free in the large-frame list: frames some holder
// has not released.
func MappedFramesOutForTest() int64 {
	bigFrames.mu.Lock()
	var free int64
	for _, f := range bigFrames.free {
		if f.mem != nil {
			free++
		}
	}
	bigFrames.mu.Unlock()
	return framesMapped.Load() - framesUnmapped.Load() - free
}
