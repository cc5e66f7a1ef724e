package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawBatch frames records (already encoded, and compressed with codec)
// as a producer would, byte by byte, with a correct CRC-32C: whatever is
// wrong with it is past the CRC.
func rawBatch(codec int, numRecords, lastOffsetDelta int32, records []byte) []byte {
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(records))
	be := binary.BigEndian
	be.PutUint32(b[offLength:], uint32(batchHeaderSize-lengthPrefix+len(records)))
	be.PutUint32(b[offLeaderEpoch:], math.MaxUint32) // -1
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], uint16(codec))
	be.PutUint32(b[offLastOffsetDelta:], uint32(lastOffsetDelta))
	be.PutUint64(b[offBaseTimestamp:], 1_700_000_000_000)
	be.PutUint64(b[offMaxTimestamp:], 1_700_000_000_000)
	be.PutUint64(b[offProducerID:], math.MaxUint64) // -1
	be.PutUint16(b[offProducerEpoch:], math.MaxUint16)
	be.PutUint32(b[offBaseSequence:], math.MaxUint32)
	be.PutUint32(b[offNumRecords:], uint32(numRecords))
	b = append(b, records...)
	be.PutUint32(b[offCRC:], crc32c(b[offAttributes:]))
	return b
}

// recs encodes n well-formed records with consecutive offset deltas.
func recs(n int) []byte {
	var out []byte
	for i := range n {
		r := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: []byte(fmt.Sprintf("k%d", i)),
			Value: []byte("value"), Headers: []kmsg.Header{{Key: "h", Value: []byte("v")}}}
		out = append(out, encodeRecord(r)...)
	}
	return out
}

// compress encodes p with codec as the Kafka clients do.
func compress(t testing.TB, codec int, p []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch codec {
	case codecNone:
		return p
	case codecGzip:
		w := gzip.NewWriter(&buf)
		w.Write(p)
		w.Close()
	case codecSnappy: // xerial framing, two blocks
		buf.Write(xerialMagic)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		for _, part := range [][]byte{p[:len(p)/2], p[len(p)/2:]} {
			blk := s2.EncodeSnappy(nil, part)
			binary.Write(&buf, binary.BigEndian, int32(len(blk)))
			buf.Write(blk)
		}
	case codecLz4:
		w := lz4.NewWriter(&buf)
		w.Write(p)
		w.Close()
	case codecZstd:
		w, _ := zstd.NewWriter(&buf)
		w.Write(p)
		w.Close()
	}
	return buf.Bytes()
}

func TestValidateBatchAcceptsEveryCodec(t *testing.T) {
	for codec := codecNone; codec <= codecZstd; codec++ {
		t.Run(codecName(codec), func(t *testing.T) {
			b := rawBatch(codec, 3, 2, compress(t, codec, recs(3)))
			info, err := ValidateBatch(b)
			if err != nil {
				t.Fatalf("valid batch refused: %v", err)
			}
			if info.NumRecords != 3 || info.Size != len(b) || info.Compression != codec {
				t.Fatalf("info %+v", info)
			}
			var keys []string
			err = EachRecord(b, func(r Record) error {
				keys = append(keys, string(r.Key))
				if string(r.Value) != "value" || r.HeaderCount != 1 || !bytes.Equal(r.Headers, []byte{2, 'h', 2, 'v'}) {
					return fmt.Errorf("record %d: %+v", r.OffsetDelta, r)
				}
				return nil
			})
			if err != nil || fmt.Sprint(keys) != "[k0 k1 k2]" {
				t.Fatalf("EachRecord: %v %v", keys, err)
			}
		})
	}
	raw := rawBatch(codecSnappy, 2, 1, s2.EncodeSnappy(nil, recs(2))) // unframed snappy
	if _, err := ValidateBatch(raw); err != nil {
		t.Fatalf("raw snappy block refused: %v", err)
	}
}

// TestValidateBatchRefusesPoisonPills covers the batches that passed the
// header checks and stuck every consumer (issue 15), and their relatives.
func TestValidateBatchRefusesPoisonPills(t *testing.T) {
	one := recs(1)
	lying := append(binary.AppendVarint(nil, 5000), one[1:]...)
	extra := append(recs(2), 0)
	swapped := append(recs(2)[len(recs(1)):], recs(1)...) // offset deltas 1, 0
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"length varint 5000 with 5 bytes", rawBatch(codecNone, 1, 0, lying), ErrInvalidRecord},
		{"one record claimed, no bytes", rawBatch(codecNone, 1, 0, nil), ErrInvalidRecord},
		{"five claimed, one inside", rawBatch(codecNone, 5, 4, one), ErrInvalidRecord},
		{"2^31-1 claimed, one inside", rawBatch(codecNone, math.MaxInt32, math.MaxInt32-1, one), ErrInvalidRecord},
		{"gzip attribute on plain bytes", rawBatch(codecGzip, 1, 0, one), ErrCorruptMessage},
		{"lz4 attribute on plain bytes", rawBatch(codecLz4, 1, 0, one), ErrCorruptMessage},
		{"zstd attribute on plain bytes", rawBatch(codecZstd, 1, 0, one), ErrCorruptMessage},
		{"snappy attribute on plain bytes", rawBatch(codecSnappy, 1, 0, one), ErrCorruptMessage},
		{"trailing byte", rawBatch(codecNone, 2, 1, extra), ErrInvalidRecord},
		{"trailing byte compressed", rawBatch(codecZstd, 2, 1, compress(t, codecZstd, extra)), ErrInvalidRecord},
		{"offset deltas out of order", rawBatch(codecNone, 2, 1, swapped), ErrInvalidRecord},
		{"five claimed, one compressed", rawBatch(codecGzip, 5, 4, compress(t, codecGzip, one)), ErrInvalidRecord},
		{"truncated gzip", rawBatch(codecGzip, 1, 0, compress(t, codecGzip, one)[:20]), ErrInvalidRecord},
		{"negative header count", rawBatch(codecNone, 1, 0, recordWith(t, func(b []byte) []byte { return append(b, 1) })), ErrInvalidRecord},
		{"null header key", rawBatch(codecNone, 1, 0, recordWith(t, func(b []byte) []byte { return append(b, 2, 1, 0) })), ErrInvalidRecord},
		{"key longer than record", rawBatch(codecNone, 1, 0, rawRecord(0, 0, binary.AppendVarint(nil, 100))), ErrInvalidRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ValidateBatch(c.b)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			l := openTest(t, t.TempDir(), smallConfig(), nil)
			if _, _, err := l.Append(c.b, AppendOptions{}); !errors.Is(err, c.want) {
				t.Fatalf("Append: got %v, want %v", err, c.want)
			}
			if l.LogEndOffset() != 0 {
				t.Fatalf("log end moved to %d", l.LogEndOffset())
			}
		})
	}
}

// rawRecord frames a record body made of the given fields after the
// attributes, timestamp delta and offset delta.
func rawRecord(tsDelta int64, offDelta int32, rest []byte) []byte {
	body := []byte{0}
	body = binary.AppendVarint(body, tsDelta)
	body = binary.AppendVarint(body, int64(offDelta))
	body = append(body, rest...)
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// recordWith builds a record with a null key and value and the headers
// section headers(nil) returns.
func recordWith(t *testing.T, headers func([]byte) []byte) []byte {
	t.Helper()
	rest := binary.AppendVarint(nil, -1)
	rest = binary.AppendVarint(rest, -1)
	return rawRecord(0, 0, headers(rest))
}

// TestValidateBatchRefusesBomb: a small zstd batch that expands past
// MaxDecompressedBytes is refused after the budget, not expanded.
func TestValidateBatchRefusesBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("decompresses 256 MiB")
	}
	var buf bytes.Buffer
	w, _ := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedFastest))
	// One record whose value claims MaxDecompressedBytes: the record's
	// fields are legal, only its size is not.
	val := int64(MaxDecompressedBytes)
	rest := binary.AppendVarint(binary.AppendVarint(nil, -1), val)
	body := append(append([]byte{0}, binary.AppendVarint(binary.AppendVarint(nil, 0), 0)...), rest...)
	w.Write(binary.AppendVarint(nil, int64(len(body))+val+1))
	w.Write(body)
	io.CopyN(w, zeroReader{}, val)
	w.Write([]byte{0})
	w.Close()
	if buf.Len() > 1<<20 {
		t.Fatalf("bomb is %d bytes", buf.Len())
	}
	_, err := ValidateBatch(rawBatch(codecZstd, 1, 0, buf.Bytes()))
	if !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("bomb: %v", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// FuzzValidateBatch frames arbitrary record bytes (and header counts) as a
// batch with a correct CRC-32C, so the fuzzer works past the CRC.
// Invariants: ValidateBatch never panics; what it accepts, EachRecord walks
// with exactly NumRecords records, the last at LastOffsetDelta; and Append
// takes exactly what ValidateBatch takes, moving the log end by NumRecords.
func FuzzValidateBatch(f *testing.F) {
	for codec := codecNone; codec <= codecZstd; codec++ {
		f.Add(uint8(codec), int32(3), int32(2), compress(f, codec, recs(3)))
	}
	f.Add(uint8(0), int32(1), int32(0), append(binary.AppendVarint(nil, 5000), recs(1)[1:]...))
	f.Add(uint8(0), int32(1), int32(0), []byte{})
	f.Add(uint8(0), int32(5), int32(4), recs(1))
	f.Add(uint8(1), int32(1), int32(0), recs(1))
	f.Fuzz(func(t *testing.T, codec uint8, n, lod int32, records []byte) {
		b := rawBatch(int(codec%8), n, lod, records)
		info, err := ValidateBatch(b)
		l := openTest(t, t.TempDir(), smallConfig(), nil)
		res, _, aerr := l.Append(b, AppendOptions{})
		if (err == nil) != (aerr == nil) {
			t.Fatalf("ValidateBatch %v, Append %v", err, aerr)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidRecord) && !errors.Is(err, ErrCorruptMessage) {
				t.Fatalf("unclassified error %v", err)
			}
			if l.LogEndOffset() != 0 {
				t.Fatal("refused batch moved the log end")
			}
			return
		}
		count, last := int32(0), int32(-1)
		if err := EachRecord(b, func(r Record) error { count++; last = r.OffsetDelta; return nil }); err != nil {
			t.Fatalf("accepted batch does not walk: %v", err)
		}
		if count != info.NumRecords || last != info.LastOffsetDelta {
			t.Fatalf("walked %d records to %d, header says %d to %d", count, last, info.NumRecords, info.LastOffsetDelta)
		}
		if l.LogEndOffset() != int64(n) || res.BaseOffset != 0 {
			t.Fatalf("log end %d after %d records", l.LogEndOffset(), n)
		}
	})
}

// TestRecoveryDropsPoisonTail: a batch with a correct CRC but records that
// disagree with its header, found in the unverified tail after a crash,
// ends the log there, as a torn batch does.
func TestRecoveryDropsPoisonTail(t *testing.T) {
	// Batches over scanWholeLimit are walked streaming from the file.
	big := bytes.Repeat([]byte("v"), scanWholeLimit+1000)
	bigRecord := rawRecord(0, 0, append(append(binary.AppendVarint(nil, -1), binary.AppendVarint(nil, int64(len(big)))...), append(big, 0)...))
	for _, bad := range [][]byte{
		rawBatch(codecNone, 5, 4, recs(1)),
		rawBatch(codecGzip, 1, 0, recs(1)),
		rawBatch(codecNone, 2, 1, bigRecord), // large: two claimed, one inside
	} {
		dir := t.TempDir()
		l, err := OpenLog(dir, smallConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, makeBatch(t, dataSpec(2)))
		prefix := readAll(t, l, 0)
		crash(l)
		fh, err := os.OpenFile(filepath.Join(dir, "00000000000000000000.log"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		good := rawBatch(codecNone, 1, 0, bigRecord) // large and valid: kept
		binary.BigEndian.PutUint64(good[offBaseOffset:], 2)
		fh.Write(good)
		binary.BigEndian.PutUint64(bad[offBaseOffset:], 3) // where it would have gone
		fh.Write(bad)
		fh.Close()
		l = openTest(t, dir, smallConfig(), nil)
		if l.LogEndOffset() != 3 {
			t.Fatalf("log end %d after recovering past a poison batch, want 3", l.LogEndOffset())
		}
		if got := readAll(t, l, 0); !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], good) {
			t.Fatal("recovery did not keep exactly the valid batches")
		}
	}
}

// BenchmarkValidate compares the header and CRC check produce did before
// (checkBatch) with the full record walk (ValidateBatch), on a 1 MiB batch
// of 1 KiB records, uncompressed and zstd:
//
//	go test -run XXX -bench Validate ./broker/storage/
func BenchmarkValidate(b *testing.B) {
	var raw []byte
	for i := range 1000 {
		r := kmsg.Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte{byte(i)}, 1024)}
		raw = append(raw, encodeRecord(r)...)
	}
	for _, codec := range []int{codecNone, codecZstd} {
		batch := rawBatch(codec, 1000, 999, compress(b, codec, raw))
		b.Run(codecName(codec)+"/crc-only", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for range b.N {
				if _, err := checkBatch(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(codecName(codec)+"/records", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for range b.N {
				if _, err := ValidateBatch(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
