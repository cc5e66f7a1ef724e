package proxy

import (
	"runtime"
	"sync"
)

// freeList is a free list of buffers bounded by the bytes they hold, for
// buffers too large for a sync.Pool: a sync.Pool keeps one per P (and a
// second generation across a GC), all of it live heap, where a list
// bounded by bytes keeps a known amount. A put that would take the list
// past limit drops the buffer (to drop, if set, else to the garbage
// collector).
//
// Like a sync.Pool, the list lets go of what sits idle: a buffer put
// before the last garbage collection and not taken since is dropped at
// the next one (age). A busy list keeps its buffers, since each goes out
// and comes back between collections; one whose workload stopped (the
// Produce frames once a single-port gateway only serves Fetches) stops
// adding to the live heap, which sets the next collection's goal and so
// the process's peak memory.
// Ownership: a buffer taken belongs to its taker until it is put back.
type freeList[T any] struct {
	mu    sync.Mutex
	free  []T
	old   int // free[:old] were there at the last collection
	ages  int // collections seen (age calls)
	bytes int // the free buffers' size
	limit int
	size  func(T) int
	drop  func(T) // if set, called (outside the lock) for each buffer the list lets go

	register sync.Once
}

// take removes and returns a buffer that fits, searching from the end of
// the list (recently put ones, mostly: removals swap).
func (l *freeList[T]) take(fits func(T) bool) (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.free) - 1; i >= 0; i-- {
		if x := l.free[i]; fits(x) {
			l.remove(i)
			return x, true
		}
	}
	var zero T
	return zero, false
}

// remove deletes free[i], keeping free[:old] the old buffers. l.mu held.
func (l *freeList[T]) remove(i int) {
	x := l.free[i]
	if i < l.old {
		l.old--
		l.free[i] = l.free[l.old]
		i = l.old
	}
	last := len(l.free) - 1
	l.free[i] = l.free[last]
	var zero T
	l.free[last] = zero
	l.free = l.free[:last]
	l.bytes -= l.size(x)
}

// put keeps x unless that would take the list past its limit.
func (l *freeList[T]) put(x T) {
	l.register.Do(func() { onCollection(l.age) })
	l.mu.Lock()
	n := l.size(x)
	kept := l.bytes+n <= l.limit
	if kept {
		l.free = append(l.free, x)
		l.bytes += n
	}
	l.mu.Unlock()
	if !kept && l.drop != nil {
		l.drop(x)
	}
}

// age drops the buffers that were already free at the previous
// collection and marks the rest old.
func (l *freeList[T]) age() {
	l.mu.Lock()
	var gone []T
	for l.old > 0 {
		if l.drop != nil {
			gone = append(gone, l.free[0])
		}
		l.remove(0)
	}
	l.old = len(l.free)
	l.ages++
	l.mu.Unlock()
	for _, x := range gone {
		l.drop(x)
	}
}

// held reports the buffers kept and their bytes.
func (l *freeList[T]) held() (n, bytes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.free), l.bytes
}

// onCollection calls f after each garbage collection, from then on: a
// cleanup (runtime.AddCleanup) on an object nothing references runs once
// a collection found it unreachable, and each run arms the next.
func onCollection(f func()) {
	type sentinel struct{ _ [32]byte } // over the tiny allocator's 16 bytes, so it is freed alone
	var arm func()
	arm = func() { runtime.AddCleanup(new(sentinel), func(struct{}) { f(); arm() }, struct{}{}) }
	arm()
}
