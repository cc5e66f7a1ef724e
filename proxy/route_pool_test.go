package proxy

import (
	"bufio"
	"net"
	"runtime/debug"
	"testing"
	"time"
)

// TestSinglePortPartBodyPool: a pooled Fetch buffer comes back with the
// asked length whether it is reused or not, and one over the pool's cap
// is not kept.
func TestSinglePortPartBodyPool(t *testing.T) {
	b := getPartBody(1000)
	if len(*b) != 1000 {
		t.Fatalf("len %d, want 1000", len(*b))
	}
	putPartBody(b)
	for _, n := range []int{10, 5000, 0} {
		if got := getPartBody(n); len(*got) != n {
			t.Fatalf("len %d, want %d", len(*got), n)
		}
	}
	putPartBody(nil) // ignored
	big := make([]byte, maxPooledPartBody+1)
	putPartBody(&big)
	if got := getPartBody(1); cap(*got) > maxPooledPartBody {
		t.Fatalf("a buffer over maxPooledPartBody (cap %d) was pooled", cap(*got))
	}
}

// TestSinglePortPoolsBoundedByBytes: the part-answer free list and the
// large request frames' free list keep at most their byte limits,
// however many buffers come back.
func TestSinglePortPoolsBoundedByBytes(t *testing.T) {
	p := newBodyPool(3 << 20)
	var bs []*[]byte
	for range 10 {
		bs = append(bs, p.get(1<<20))
	}
	for _, b := range bs {
		p.put(b)
	}
	if n, bytes := p.list.held(); bytes > p.list.limit || n != 3 {
		t.Fatalf("pool holds %d buffers, %d bytes; limit %d", n, bytes, p.list.limit)
	}
	if b := p.get(900 << 10); cap(*b) != 1<<20 || len(*b) != 900<<10 {
		t.Fatalf("a free buffer big enough was not reused (cap %d, len %d)", cap(*b), len(*b))
	}

	var fs []*frameBuf
	for range 10 {
		fs = append(fs, getFrame(3<<20+1))
	}
	for _, f := range fs {
		putFrame(f)
	}
	if _, held := bigFrames.held(); held > bigFramesLimit {
		t.Fatalf("large frames kept: %d bytes, limit %d", held, bigFramesLimit)
	}
}

// TestFrameSizes: request frames up to 1 MiB come in powers of two, larger
// ones in bigFrameGrain steps (a 3 MiB Produce no longer takes 4 MiB), and
// a free large frame is reused only for a request it fits without more
// than bigFrameSlack to spare.
func TestFrameSizes(t *testing.T) {
	for _, c := range []struct{ n, cap int }{
		{0, 1}, {1, 1}, {100, 128}, {64 << 10, 64 << 10}, {600 << 10, 1 << 20}, {1 << 20, 1 << 20},
		{1<<20 + 1, 1<<20 + bigFrameGrain}, {3<<20 + 5000, 3<<20 + bigFrameGrain}, {16 << 20, 16 << 20},
		{16<<20 + 1, 16<<20 + 1},
	} {
		f := getFrame(c.n)
		if len(f.b) != c.n || cap(f.b) != c.cap {
			t.Errorf("getFrame(%d): len %d cap %d, want cap %d", c.n, len(f.b), cap(f.b), c.cap)
		}
		putFrame(f)
	}

	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection ages the list meanwhile (freelist.go)
	for {                                            // start from an empty list
		if _, ok := bigFrames.take(func(*frameBuf) bool { return true }); !ok {
			break
		}
	}
	big := getFrame(5 << 20)
	putFrame(big)
	if f := getFrame(2 << 20); f == big {
		t.Errorf("a free 5 MiB frame served a 2 MiB request")
	} else {
		putFrame(f)
	}
	if f := getFrame(5<<20 - 100<<10); f != big {
		t.Errorf("a free 5 MiB frame was not reused for a request of 4.9 MiB")
	}
}

// TestMappedFrames: a large frame mapped outside the heap is whole and
// writable, comes back for the next request of its size, and is unmapped
// once the free list lets it go.
func TestMappedFrames(t *testing.T) {
	withMappedFrames(t)

	mappedBefore, _ := RequestFrameStats()
	f := getFrame(3<<20 + 1)
	if m, _ := RequestFrameStats(); m != mappedBefore+3<<20+bigFrameGrain {
		t.Errorf("mapped bytes %d after mapping a frame, want %d", m, mappedBefore+3<<20+bigFrameGrain)
	}
	if f.mem == nil || cap(f.b) != 3<<20+bigFrameGrain || len(f.b) != 3<<20+1 {
		t.Fatalf("frame: mapped %v, len %d, cap %d", f.mem != nil, len(f.b), cap(f.b))
	}
	for i := range f.b {
		f.b[i] = byte(i)
	}
	putFrame(f)
	g := getFrame(3 << 20)
	if g != f || len(g.b) != 3<<20 || g.b[1<<20+7] != 7 {
		t.Fatal("the mapped frame was not reused")
	}
	putFrame(g)
	bigFrames.age()
	bigFrames.age()
	if n, _ := bigFrames.held(); n != 0 || f.mem != nil || f.b != nil {
		t.Fatalf("after two idle collections: %d frames held, frame still mapped: %v", n, f.mem != nil)
	}
	if m, free := RequestFrameStats(); m != mappedBefore || free != 0 {
		t.Errorf("after the frame was let go: %d bytes mapped (want %d), %d free (want 0)", m, mappedBefore, free)
	}
}

// TestOwnedBodyInHeap: a body handed over for good (ownedBody: the
// built-in broker's requests, SASL tokens) is read into the heap even
// where large frames are mapped, and does not take a mapped frame from
// the free list: nothing would ever unmap it.
func TestOwnedBodyInHeap(t *testing.T) {
	withMappedFrames(t)
	const n = 3 << 20
	putFrame(getFrame(n)) // a mapped frame free for a body of n
	mapped := framesMapped.Load()

	c, peer := net.Pipe()
	defer c.Close()
	defer peer.Close()
	go peer.Write(make([]byte, n))
	srv := &Server{opts: Options{FrameTimeout: time.Minute}}
	srv.budget = newByteBudget(64<<20, noHooks{})
	s := &session{srv: srv, client: c, closed: make(chan struct{}), cr: bufio.NewReader(c)}
	b, err := s.ownedBody(n)
	if err != nil || len(b) != n {
		t.Fatalf("ownedBody: %d bytes, %v", len(b), err)
	}
	s.releaseHeld()
	if framesMapped.Load() != mapped {
		t.Error("an owned body was mapped outside the heap")
	}
	if f, ok := bigFrames.take(func(f *frameBuf) bool { return f.mem != nil }); !ok {
		t.Error("an owned body took the free mapped frame")
	} else {
		putFrame(f)
	}
}

// withMappedFrames maps large frames for the rest of the test (even under
// -race, where they are not by default), stops collections from ageing
// the free list (the test ages it itself), and empties the list; all
// undone when the test ends. It skips where frames cannot be mapped.
func withMappedFrames(t *testing.T) {
	t.Helper()
	if !mapsFrames {
		t.Skip("this platform maps no frames")
	}
	gc := debug.SetGCPercent(-1)
	was := framesOffHeap
	framesOffHeap = true
	t.Cleanup(func() { framesOffHeap = was; debug.SetGCPercent(gc) })
	bigFrames.age()
	bigFrames.age() // empty: every frame was old at the second
}
