package storage

import (
	"fmt"
	"testing"
)

func TestOffsetMapBoundedAndLatest(t *testing.T) {
	budget := int64(64 << 10)
	m := newOffsetMap(budget, 1<<30) // wants far more than the budget allows
	if m.bytes() > budget {
		t.Fatalf("map takes %d bytes, budget %d", m.bytes(), budget)
	}
	small := newOffsetMap(budget, 10)
	if small.bytes() != minMapSlots*mapSlotSize {
		t.Fatalf("a 10-key map takes %d bytes, want the minimum %d", small.bytes(), minMapSlots*mapSlotSize)
	}
	n := 0
	for ; !m.full(); n++ {
		m.put([]byte(fmt.Sprint("key-", n)), int64(n))
	}
	if n != m.limit || n > len(m.slots) {
		t.Fatalf("filled %d keys, limit %d of %d slots", n, m.limit, len(m.slots))
	}
	// Overwriting an existing key does not take a slot; lookups find the
	// latest offset; unknown keys are -1.
	m.put([]byte("key-7"), 1_000_000)
	if m.n != n || m.get([]byte("key-7")) != 1_000_000 || m.get([]byte("key-8")) != 8 || m.get([]byte("absent")) != -1 {
		t.Fatalf("n %d, key-7 %d, key-8 %d, absent %d", m.n, m.get([]byte("key-7")), m.get([]byte("key-8")), m.get([]byte("absent")))
	}
	if m.latest != 1_000_000 {
		t.Fatalf("latest %d", m.latest)
	}
	// A nil key and an empty key are different records but hash alike;
	// the cleaner never maps a nil key.
	m2 := newOffsetMap(budget, 1)
	m2.put([]byte{}, 3)
	if m2.get([]byte{}) != 3 {
		t.Fatal("empty key not found")
	}
}
