package storage

import (
	"bytes"
	"testing"
)

// FuzzCleanerRecordCopy feeds arbitrary bytes to the record walker as a
// stored (possibly compacted) batch's uncompressed records, and re-encodes
// every record it accepts with the cleaner's appendRecord. Invariants: no
// panic; the re-encoded records walk again to the same records (so a
// cleaner rewrite of a kept record is lossless); a compacted log's produce
// check refuses any keyless record.
func FuzzCleanerRecordCopy(f *testing.F) {
	good := makeKeyed(f, plainKeyed(), kvs("a", "1", "b", "2"))
	f.Add(good[batchHeaderSize:], int32(2), int32(1))
	f.Add(good[batchHeaderSize:], int32(2), int32(5))
	f.Add([]byte{0x02, 0x00}, int32(1), int32(0))
	f.Add(bytes.Repeat([]byte{0xff}, 20), int32(3), int32(3))
	f.Fuzz(func(t *testing.T, payload []byte, n, lastDelta int32) {
		n, lastDelta = n%1000, lastDelta%1000
		h := batchHeader{numRecords: n, lastOffsetDelta: lastDelta}
		var recs []Record
		var enc []byte
		err := walkSource(&sliceSource{b: payload}, &h, true, func(r Record) error {
			recs = append(recs, r)
			enc = appendRecord(enc, &r)
			return nil
		})
		if err != nil {
			return
		}
		i := 0
		if err := walkSource(&sliceSource{b: enc}, &h, true, func(r Record) error {
			w := recs[i]
			i++
			if !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) || !bytes.Equal(r.Value, w.Value) ||
				(r.Value == nil) != (w.Value == nil) || r.HeaderCount != w.HeaderCount || !bytes.Equal(r.Headers, w.Headers) ||
				r.OffsetDelta != w.OffsetDelta || r.TimestampDelta != w.TimestampDelta || r.Attributes != w.Attributes {
				t.Fatalf("record %d does not survive re-encoding: %+v -> %+v", i, w, r)
			}
			return nil
		}); err != nil || i != len(recs) {
			t.Fatalf("re-encoded records do not walk: %v (%d of %d)", err, i, len(recs))
		}
		check := keyCheck(&LogConfig{Compact: true})
		for _, r := range recs {
			if r.Key == nil && check(r) == nil {
				t.Fatal("the compacted produce check accepted a keyless record")
			}
		}
	})
}

// FuzzSwapManifest: recovery parses the cleaner's swap manifest; it must
// never panic, and whatever it accepts encodes back to the same groups.
func FuzzSwapManifest(f *testing.F) {
	f.Add(encodeSwap([]*swapGroup{{base: 0, olds: []int64{0, 10, 20}}, {base: 30, olds: []int64{30}}}, 40, 0))
	f.Add([]byte(swapMagic + "\n1 2\n"))
	f.Add([]byte(swapMagic + "\n1 2\n5 4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		groups, fd, hz, err := decodeSwap(b)
		if err != nil {
			return
		}
		g2, fd2, hz2, err := decodeSwap(encodeSwap(groups, fd, hz))
		if err != nil || fd2 != fd || hz2 != hz || len(g2) != len(groups) {
			t.Fatalf("manifest does not survive re-encoding: %v", err)
		}
		for i := range groups {
			if groups[i].base != groups[i].olds[0] {
				t.Fatal("accepted a group whose base is not its first old segment")
			}
		}
	})
}
