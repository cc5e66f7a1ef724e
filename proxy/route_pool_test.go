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
