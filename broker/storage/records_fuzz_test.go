package storage

import (
	"bytes"
	"testing"
)

// FuzzRecordWalk feeds arbitrary bytes to the record decoder as a batch's
// records, raw and as every codec's payload. Invariants: no panic, no
// allocation past maxDecompressed; every record decoded re-encodes to
// exactly the bytes it came from (so a cleaner rewrite of a kept record
// is lossless); a produce check on a compacted log never accepts a
// keyless record.
func FuzzRecordWalk(f *testing.F) {
	good := makeKeyed(f, plainKeyed(), kvs("a", "1", "b", "2"))
	f.Add(good[batchHeaderSize:], int32(2), uint8(0))
	z := plainKeyed()
	z.codec = codecZstd
	f.Add(makeKeyed(f, z, kvs("a", "1"))[batchHeaderSize:], int32(1), uint8(codecZstd))
	f.Add([]byte{0x02, 0x00}, int32(1), uint8(0))
	f.Add(bytes.Repeat([]byte{0xff}, 20), int32(3), uint8(codecSnappy))
	f.Fuzz(func(t *testing.T, payload []byte, n int32, codec uint8) {
		n = n % 1000
		recs, err := decompress(int(codec%5), payload)
		if err != nil {
			return
		}
		err = walkRecords(recs, n, func(r *Record) error {
			var enc []byte
			enc = appendRecord(enc, r)
			back, used, err := decodeRecord(enc)
			if err != nil || used != len(enc) || !bytes.Equal(back.Key, r.Key) || (back.Key == nil) != (r.Key == nil) ||
				!bytes.Equal(back.Value, r.Value) || (back.Value == nil) != (r.Value == nil) || !bytes.Equal(back.Headers, r.Headers) {
				t.Fatalf("record does not survive re-encoding: %+v -> %+v (%v)", r, back, err)
			}
			return nil
		})
		if err == nil && n > 0 {
			walkRecords(recs, n, func(r *Record) error {
				if r.Key == nil {
					h := batchHeader{numRecords: n, attributes: 0}
					b := append(make([]byte, batchHeaderSize), recs...)
					h.length = int32(len(b) - lengthPrefix)
					if checkKeys(b, h) == nil {
						t.Fatal("checkKeys accepted a keyless record")
					}
				}
				return nil
			})
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
