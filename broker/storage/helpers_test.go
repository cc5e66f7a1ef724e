package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// spec describes a test batch. Batches are built with kmsg's RecordBatch
// and Record encoders plus our CRC-32C, as a producer would send them
// (FirstOffset 0, PartitionLeaderEpoch -1).
type spec struct {
	records   int
	valueSize int
	baseTs    int64
	tsStep    int64 // timestamp delta between records
	pid       int64
	epoch     int16
	seq       int32
	zstd      bool
	txn       bool
	control   int16 // -1: data batch; 0 abort, 1 commit marker
}

func dataSpec(records int) spec {
	return spec{records: records, valueSize: 16, baseTs: 1_700_000_000_000, tsStep: 1, pid: -1, epoch: -1, seq: -1, control: -1}
}

func encodeRecord(r kmsg.Record) []byte {
	r.Length = 0
	body := r.AppendTo(nil)[1:] // Length 0 is one varint byte
	r.Length = int32(len(body))
	return r.AppendTo(nil)
}

func makeBatch(t testing.TB, s spec) []byte {
	t.Helper()
	var recs []byte
	maxTs := s.baseTs
	for i := 0; i < s.records; i++ {
		r := kmsg.Record{TimestampDelta64: int64(i) * s.tsStep, OffsetDelta: int32(i)}
		if s.control >= 0 {
			k := kmsg.ControlRecordKey{Type: kmsg.ControlRecordKeyType(s.control)}
			m := kmsg.EndTxnMarker{}
			r.Key, r.Value = k.AppendTo(nil), m.AppendTo(nil)
		} else {
			r.Key = []byte(fmt.Sprintf("k%d", i))
			r.Value = make([]byte, s.valueSize)
			for j := range r.Value {
				r.Value[j] = byte(i + j)
			}
		}
		maxTs = max(maxTs, s.baseTs+int64(i)*s.tsStep)
		recs = append(recs, encodeRecord(r)...)
	}
	var attrs int16
	if s.zstd {
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		recs = enc.EncodeAll(recs, nil)
		enc.Close()
		attrs |= 4
	}
	if s.txn {
		attrs |= attrTransactional
	}
	if s.control >= 0 {
		attrs |= attrControl
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(s.records - 1),
		FirstTimestamp:       s.baseTs,
		MaxTimestamp:         maxTs,
		ProducerID:           s.pid,
		ProducerEpoch:        s.epoch,
		FirstSequence:        s.seq,
		NumRecords:           int32(s.records),
		Records:              recs,
	}
	b.Length = int32(batchHeaderSize - lengthPrefix + len(recs))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return out
}

func openTest(t testing.TB, dir string, cfg LogConfig, s *Syncer) *Log {
	t.Helper()
	l, err := OpenLog(dir, cfg, s)
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func smallConfig() LogConfig {
	c := DefaultLogConfig()
	c.RetentionMs = -1
	return c
}

// mustAppend appends and waits for durability.
func mustAppend(t testing.TB, l *Log, b []byte) AppendResult {
	t.Helper()
	res, durable, err := l.Append(b, AppendOptions{})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	select {
	case err := <-durable:
		if err != nil {
			t.Fatalf("durable: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("append never became durable")
	}
	return res
}

// readAll reads every batch from offset to the high watermark.
func readAll(t testing.TB, l *Log, from int64) []byte {
	t.Helper()
	var out []byte
	for from < l.HighWatermark() {
		r, err := l.Read(from, 64<<10)
		if err != nil {
			t.Fatalf("read %d: %v", from, err)
		}
		b, err := r.AppendTo(nil)
		r.Release()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Fatalf("read %d returned nothing below hw %d", from, l.HighWatermark())
		}
		hs := batchesOfCleaned(t, b) // a compacted log's batches are valid too
		from = hs[len(hs)-1].lastOffset() + 1
		out = append(out, b...)
	}
	return out
}

// batchesOf splits and fully validates stored batches.
func batchesOf(t testing.TB, b []byte) []batchHeader {
	t.Helper()
	var hs []batchHeader
	for len(b) > 0 {
		h, err := checkBatch(b)
		if err != nil {
			t.Fatalf("stored batch invalid: %v", err)
		}
		hs = append(hs, h)
		b = b[h.size():]
	}
	return hs
}

// crash abandons a log the way kill -9 would: no flush, no checkpoint.
func crash(l *Log) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed, l.shut = true, true
	if l.syncer != nil {
		l.syncer.forget(l)
	}
	for _, s := range l.segs {
		s.closeFiles()
	}
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
