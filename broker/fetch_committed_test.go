package broker

import (
	"bytes"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// decodeFetch writes a Fetch body, decodes it with kmsg and checks that
// kmsg re-encodes it to the same bytes (the hand encoder's contract).
func decodeFetch(t *testing.T, body wire.Body, v int16) *kmsg.FetchResponse {
	t.Helper()
	var buf bytes.Buffer
	if n, err := body.WriteTo(&buf); err != nil || int(n) != body.Len() {
		t.Fatalf("v%d: wrote %d of %d: %v", v, n, body.Len(), err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = v
	if err := resp.ReadFrom(buf.Bytes()); err != nil {
		t.Fatalf("v%d: kmsg cannot decode our body: %v", v, err)
	}
	if again := resp.AppendTo(nil); !bytes.Equal(again, buf.Bytes()) {
		t.Fatalf("v%d: kmsg re-encodes differently:\nours % x\nkmsg % x", v, buf.Bytes(), again)
	}
	return resp
}

// batchBases lists the base offsets of the batches in raw.
func batchBases(t *testing.T, raw []byte) []int64 {
	t.Helper()
	var out []int64
	for len(raw) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatalf("record batch: %v", err)
		}
		out = append(out, rb.FirstOffset)
		raw = raw[12+rb.Length:]
	}
	return out
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFetchReadCommitted checks the read_committed Fetch for every served
// version, byte for byte against kmsg: data only below the last stable
// offset, the LSO reported, aborted transactions overlapping what is
// returned; and that a read_committed long poll wakes on the commit marker,
// not on data appended behind the open transaction.
func TestFetchReadCommitted(t *testing.T) {
	b := openBroker(t, t.TempDir())
	c := b.NewConn("test")
	defer c.Close()
	s, err := b.checkCreate("rc", 1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := b.createTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	l := tp.partitions[0].log
	appendB := func(raw []byte, control bool) {
		t.Helper()
		o := storageAppend(time.Now())
		o.AllowControl = control
		_, durable, err := l.Append(raw, o)
		if err != nil {
			t.Fatal(err)
		}
		if durable != nil {
			if err := <-durable; err != nil {
				t.Fatal(err)
			}
		}
	}
	appendB(makeTxnBatch(100, 0, []byte("x0"), []byte("x1")), false) // 0-1: aborted below
	appendB(controlBatch(100, 0, false, time.Now()), true)           // 2: abort marker
	appendB(makeBatch([]byte("p3"), []byte("p4")), false)            // 3-4
	appendB(makeTxnBatch(101, 0, []byte("o5"), []byte("o6")), false) // 5-6: open
	appendB(makeBatch([]byte("p7")), false)                          // 7
	if lso, hw := l.LastStableOffset(), l.HighWatermark(); lso != 5 || hw != 8 {
		t.Fatalf("setup: lso %d hw %d", lso, hw)
	}

	fetchReq := func(v int16, iso int8, offset int64, wait int32) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes, req.IsolationLevel, req.SessionEpoch = v, 1<<20, iso, -1
		req.MaxWaitMillis, req.MinBytes = wait, 1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "rc", tp.id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	for v := int16(4); v <= 18; v++ {
		for _, tc := range []struct {
			iso     int8
			offset  int64
			bases   []int64
			aborted []int64 // producer ids; nil: a null list
		}{
			{0, 0, []int64{0, 2, 3, 5, 7}, nil},
			{1, 0, []int64{0, 2, 3}, []int64{100}},
			{1, 3, []int64{3}, []int64{}},
			{1, 5, nil, []int64{}},
		} {
			body, err := call(c, fetchReq(v, tc.iso, tc.offset, 0))
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			p := decodeFetch(t, body, v).Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.HighWatermark != 8 || p.LastStableOffset != 5 {
				t.Fatalf("v%d iso %d: code %d hw %d lso %d", v, tc.iso, p.ErrorCode, p.HighWatermark, p.LastStableOffset)
			}
			if got := batchBases(t, p.RecordBatches); !equalInts(got, tc.bases) {
				t.Fatalf("v%d iso %d from %d: batches %v, want %v", v, tc.iso, tc.offset, got, tc.bases)
			}
			if (p.AbortedTransactions == nil) != (tc.aborted == nil) || len(p.AbortedTransactions) != len(tc.aborted) {
				t.Fatalf("v%d iso %d from %d: aborted %+v, want %v", v, tc.iso, tc.offset, p.AbortedTransactions, tc.aborted)
			}
			for i, a := range p.AbortedTransactions {
				if a.ProducerID != tc.aborted[i] || a.FirstOffset != 0 {
					t.Fatalf("v%d: aborted %+v", v, p.AbortedTransactions)
				}
			}
		}
	}

	// A read_committed poll at the LSO: a plain append moves the high
	// watermark but not the LSO, so the poll keeps waiting; the commit
	// marker releases it with the committed transaction.
	done := make(chan wire.Body, 1)
	go func() {
		body, err := call(c, fetchReq(12, 1, 5, 10000))
		if err != nil {
			t.Error(err)
		}
		done <- body
	}()
	appendB(makeBatch([]byte("p8")), false) // 8
	select {
	case <-done:
		t.Fatal("read_committed poll answered while the transaction was open")
	case <-time.After(300 * time.Millisecond):
	}
	appendB(controlBatch(101, 0, true, time.Now()), true) // 9: commit
	select {
	case body := <-done:
		p := decodeFetch(t, body, 12).Topics[0].Partitions[0]
		if got := batchBases(t, p.RecordBatches); !equalInts(got, []int64{5, 7, 8, 9}) || p.LastStableOffset != 10 || len(p.AbortedTransactions) != 0 {
			t.Fatalf("woken poll: batches %v lso %d aborted %+v", got, p.LastStableOffset, p.AbortedTransactions)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read_committed poll not woken by the commit marker")
	}
}
