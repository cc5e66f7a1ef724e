package proxy

import "sync"

// freeList is a free list of buffers bounded by the bytes they hold, for
// buffers too large for a sync.Pool: a sync.Pool keeps one per P (and a
// second generation across a GC), all of it live heap, where a list
// bounded by bytes keeps a known amount. A put that would take the list
// past limit drops the buffer for the garbage collector.
// Ownership: a buffer taken belongs to its taker until it is put back.
type freeList[T any] struct {
	mu    sync.Mutex
	free  []T
	bytes int // the free buffers' size
	limit int
	size  func(T) int
}

// take removes and returns the most recently put buffer that fits.
func (l *freeList[T]) take(fits func(T) bool) (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.free) - 1; i >= 0; i-- {
		if x := l.free[i]; fits(x) {
			var zero T
			l.free[i] = l.free[len(l.free)-1]
			l.free[len(l.free)-1] = zero
			l.free = l.free[:len(l.free)-1]
			l.bytes -= l.size(x)
			return x, true
		}
	}
	var zero T
	return zero, false
}

// put keeps x unless that would take the list past its limit.
func (l *freeList[T]) put(x T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.size(x); l.bytes+n <= l.limit {
		l.free = append(l.free, x)
		l.bytes += n
	}
}

// held reports the buffers kept and their bytes.
func (l *freeList[T]) held() (n, bytes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.free), l.bytes
}
