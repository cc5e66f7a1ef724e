package metrics

import "sync"

// other is the label value for everything beyond a bound or outside an
// enum.
const other = "other"

// boundedSet admits the first max distinct values as labels; later ones
// are "other". It guards labels whose values come from configuration
// (listener and rule names) or the cluster (broker ids): bounded in
// practice, capped anyway, so a bug or a hostile cluster cannot grow the
// series count without limit.
type boundedSet struct {
	max  int
	mu   sync.RWMutex
	seen map[string]struct{}
}

func newBoundedSet(max int) *boundedSet {
	return &boundedSet{max: max, seen: make(map[string]struct{})}
}

func (s *boundedSet) label(v string) string {
	if v == "" {
		return "none"
	}
	s.mu.RLock()
	_, ok := s.seen[v]
	n := len(s.seen)
	s.mu.RUnlock()
	if ok {
		return v
	}
	if n >= s.max {
		return other
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[v]; ok {
		return v
	}
	if len(s.seen) >= s.max {
		return other
	}
	s.seen[v] = struct{}{}
	return v
}
