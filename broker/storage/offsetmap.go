package storage

import (
	"crypto/md5"
	"encoding/binary"
	"math/bits"
)

// offsetMap is the cleaner's key -> latest offset map, in a fixed memory
// budget as Kafka's SkimpyOffsetMap: an open-addressing table of 24-byte
// slots (the MD5 of the key and the offset), filled to at most
// offsetMapLoad. Keys are never stored, so memory does not depend on key
// size; two keys colliding on all 128 bits of MD5 is not a practical
// concern (Kafka makes the same trade). Owned by one cleaning run.
type offsetMap struct {
	slots  []mapSlot
	mask   uint64
	n      int   // keys present
	limit  int   // most keys allowed (offsetMapLoad of the slots)
	latest int64 // largest offset put, -1 if none
}

type mapSlot struct {
	hash [md5.Size]byte
	off  int64 // offset + 1; 0 is an empty slot
}

const (
	mapSlotSize   = 24
	offsetMapLoad = 0.9 // log.cleaner.io.buffer.load.factor
	// DefaultDedupeBufferBytes is Kafka's log.cleaner.dedupe.buffer.size
	// (128 MiB): the most memory one cleaning's offset map may take.
	DefaultDedupeBufferBytes = 128 << 20
	minMapSlots              = 1 << 10
)

// newOffsetMap sizes a map for about want keys within budget bytes: the
// table is a power of two no larger than budget allows, so a small dirty
// section does not allocate the whole budget.
func newOffsetMap(budget int64, want int64) *offsetMap {
	maxSlots := max(budget/mapSlotSize, minMapSlots)
	slots := int64(minMapSlots)
	for slots < maxSlots && float64(slots)*offsetMapLoad < float64(want) {
		slots <<= 1
	}
	if slots > maxSlots {
		slots = int64(1) << (63 - bits.LeadingZeros64(uint64(maxSlots)))
	}
	return &offsetMap{
		slots:  make([]mapSlot, slots),
		mask:   uint64(slots - 1),
		limit:  int(float64(slots) * offsetMapLoad),
		latest: -1,
	}
}

// full reports whether another new key might not fit.
func (m *offsetMap) full() bool { return m.n >= m.limit }

// put records offset as key's latest; the caller checks full first.
func (m *offsetMap) put(key []byte, offset int64) {
	h := md5.Sum(key)
	for i := binary.BigEndian.Uint64(h[:]) & m.mask; ; i = (i + 1) & m.mask {
		s := &m.slots[i]
		if s.off == 0 {
			s.hash, s.off = h, offset+1
			m.n++
			break
		}
		if s.hash == h {
			s.off = offset + 1
			break
		}
	}
	m.latest = max(m.latest, offset)
}

// get returns key's latest offset, or -1.
func (m *offsetMap) get(key []byte) int64 {
	h := md5.Sum(key)
	for i := binary.BigEndian.Uint64(h[:]) & m.mask; ; i = (i + 1) & m.mask {
		s := &m.slots[i]
		if s.off == 0 {
			return -1
		}
		if s.hash == h {
			return s.off - 1
		}
	}
}

// bytes is the table's memory.
func (m *offsetMap) bytes() int64 { return int64(len(m.slots)) * mapSlotSize }
