package proxy

import "testing"

// TestCoordCacheEvictsLeastRecentlyUsed: the coordinator cache keeps at
// most its bound, evicting the entry used least recently (a get counts
// as a use), and forget drops an entry.
func TestCoordCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newCoordCache(2)
	a, b, d := coordKey{groupKey, "a"}, coordKey{groupKey, "b"}, coordKey{txnKey, "a"}
	c.put(a, 1)
	c.put(b, 2)
	if n, ok := c.get(a); !ok || n != 1 { // a is now the most recent
		t.Fatalf("get a: %d %v", n, ok)
	}
	c.put(d, 3) // evicts b
	if _, ok := c.get(b); ok {
		t.Error("b, the least recently used, was kept over the bound")
	}
	if n, ok := c.get(d); !ok || n != 3 {
		t.Errorf("get the transaction key a: %d %v (kinds must not collide)", n, ok)
	}
	if c.len() != 2 {
		t.Errorf("len %d, want the bound 2", c.len())
	}
	c.put(a, 4)
	if n, _ := c.get(a); n != 4 {
		t.Errorf("a after an update: %d, want 4", n)
	}
	c.forget(a)
	if _, ok := c.get(a); ok || c.len() != 1 {
		t.Errorf("a after forget: present %v, len %d", ok, c.len())
	}
}
