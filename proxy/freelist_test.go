package proxy

import (
	"runtime"
	"testing"
	"time"
)

// TestFreeListAges: a buffer left in the list across two garbage
// collections is dropped; one taken and put back between them stays;
// take and put keep the old and new buffers apart whatever the order.
func TestFreeListAges(t *testing.T) {
	l := &freeList[*[]byte]{limit: 1 << 20, size: func(b *[]byte) int { return cap(*b) }}
	buf := func(n int) *[]byte { b := make([]byte, n); return &b }
	ages := func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.ages }
	// collect runs collections until the list aged once more.
	collect := func() {
		t.Helper()
		before := ages()
		deadline := time.Now().Add(10 * time.Second)
		for ages() == before {
			if time.Now().After(deadline) {
				t.Fatal("the list did not age within 10s of collections")
			}
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	}

	idle, busy := buf(100), buf(200)
	l.put(idle)
	l.put(busy)
	collect() // both old now
	if n, _ := l.held(); n != 2 {
		t.Fatalf("after one collection %d buffers held, want 2", n)
	}
	got, ok := l.take(func(b *[]byte) bool { return cap(*b) == 200 })
	if !ok || got != busy {
		t.Fatal("the busy buffer was not found")
	}
	l.put(busy) // back since the collection: new again
	l.put(buf(300))
	collect()
	n, bytes := l.held()
	if n != 2 || bytes != 500 {
		t.Fatalf("after two collections: %d buffers, %d bytes held; want the busy one and the 300-byte one (2, 500)", n, bytes)
	}
	if _, ok := l.take(func(b *[]byte) bool { return b == idle }); ok {
		t.Fatal("the idle buffer survived two collections")
	}
	collect()
	collect()
	if n, bytes := l.held(); n != 0 || bytes != 0 {
		t.Fatalf("after the workload stopped: %d buffers, %d bytes held, want none", n, bytes)
	}
}
