package proxy

import "testing"

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
		fs = append(fs, getFrame(3<<20)) // 4 MiB class
	}
	for _, f := range fs {
		putFrame(f)
	}
	if _, held := bigFrames.held(); held > bigFramesLimit {
		t.Fatalf("large frames kept: %d bytes, limit %d", held, bigFramesLimit)
	}
}
