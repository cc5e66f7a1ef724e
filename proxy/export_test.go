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
