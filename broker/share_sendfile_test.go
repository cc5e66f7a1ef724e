package broker

import (
	"bytes"
	"hash/crc32"
	"io"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareFetchBytes sends req on c and returns the answer's raw body and
// its decoding.
func shareFetchBytes(t *testing.T, c *Conn, req *kmsg.ShareFetchRequest) ([]byte, *kmsg.ShareFetchResponse) {
	t.Helper()
	body, err := call(c, req)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(bodyReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != body.Len() {
		t.Fatalf("body wrote %d bytes, Len %d", len(raw), body.Len())
	}
	resp := kmsg.NewPtrShareFetchResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(raw); err != nil {
		t.Fatalf("decode ShareFetch: %v", err)
	}
	return raw, resp
}

// batchesOf decodes the record batches of a partition answer (the CRC is
// checked, so a batch cut short or spliced wrong fails) and returns every
// offset each batch holds, in order.
func batchesOf(t *testing.T, recs []byte) [][2]int64 {
	t.Helper()
	var out [][2]int64
	for len(recs) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(recs); err != nil {
			t.Fatalf("decode batch: %v", err)
		}
		n := 12 + int(rb.Length)
		raw := recs[:n]
		recs = recs[n:]
		// kmsg checks nothing; recompute the CRC over the batch after it.
		if got := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); got != uint32(rb.CRC) {
			t.Fatalf("batch at %d: crc %x, header says %x", rb.FirstOffset, got, uint32(rb.CRC))
		}
		out = append(out, [2]int64{rb.FirstOffset, rb.FirstOffset + int64(rb.LastOffsetDelta)})
	}
	return out
}

// checkCovers fails unless the batches hold every acquired offset, each
// batch at most once, in order, and the first batch holds the first
// acquired offset (Kafka may send more offsets than acquired, never fewer).
func checkCovers(t *testing.T, bs [][2]int64, acq []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord) {
	t.Helper()
	for i := 1; i < len(bs); i++ {
		if bs[i][0] <= bs[i-1][1] {
			t.Fatalf("batches out of order or repeated: %v", bs)
		}
	}
	for _, a := range acq {
		for o := a.FirstOffset; o <= a.LastOffset; o++ {
			found := false
			for _, b := range bs {
				if o >= b[0] && o <= b[1] {
					found = true
				}
			}
			if !found {
				t.Fatalf("acquired offset %d is in none of the batches %v (acquired %v)", o, bs, acq)
			}
		}
	}
	if len(acq) > 0 && (len(bs) == 0 || bs[0][0] > acq[0].FirstOffset || bs[0][1] < acq[0].FirstOffset) {
		t.Fatalf("first batch %v does not hold the first acquired offset %d", bs, acq[0].FirstOffset)
	}
}

// TestShareFetchBatchesFromSegments: ShareFetch answers, now written from
// the segment files, are byte for byte what kmsg encodes for the same
// fields; with compressed batches of 10 records, a RECORD_LIMIT fetch of
// 15 acquires [0, 14] and sends the two batches holding it, the next
// fetch, releasing 12-14, gets them back with delivery count 2 and new
// records 15-21 from the batch straddling both (10-19, sent once) and
// 20-29; released records come back in their batch followed by whole new
// batches, and no batch past what was acquired is sent.
func TestShareFetchBatchesFromSegments(t *testing.T) {
	b, srv := newBroker(t)
	createTopic(t, srv.addr(), "sf", 1, nil)
	setGroupConfigs(t, newClient(t, srv.addr()), "sfg", "share.auto.offset.reset", "earliest")
	prod := newClient(t, srv.addr(), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	for batch := range 5 {
		var recs []*kgo.Record
		for i := range 10 {
			recs = append(recs, &kgo.Record{Topic: "sf", Value: bytes.Repeat([]byte(strconv.Itoa(batch*10+i)), 50)})
		}
		// One ProduceSync per batch: kgo sends the 10 records in one batch.
		if err := prod.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c := b.NewConn("test")
	defer c.Close()
	tid := b.lookup("sf").id
	epoch := int32(0)
	fetch := func(maxRecs int32, strict bool, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) kmsg.ShareFetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrShareFetchRequest()
		req.Version = 2
		req.GroupID, req.MemberID = kmsg.StringPtr("sfg"), kmsg.StringPtr("member-0000000000000000000000000001")
		req.ShareSessionEpoch = epoch
		req.MaxRecords, req.BatchSize, req.MaxBytes = maxRecs, maxRecs, 1<<20
		if strict {
			req.ShareAcquireMode = 1
		}
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = tid
		rt.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}
		req.Topics = append(req.Topics, rt)
		raw, resp := shareFetchBytes(t, c, req)
		if want := resp.AppendTo(nil); !bytes.Equal(raw, want) {
			t.Fatalf("answer differs from kmsg's encoding:\n got %x\nwant %x", raw, want)
		}
		epoch++
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("answer %+v (%v)", resp, kerr.ErrorForCode(resp.ErrorCode))
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 {
			t.Fatalf("partition error %v, ack error %v", kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(p.AcknowledgeErrorCode))
		}
		checkCovers(t, batchesOf(t, p.Records), p.AcquiredRecords)
		return p
	}
	want := func(p kmsg.ShareFetchResponseTopicPartition, ranges ...[3]int64) {
		t.Helper()
		var got [][3]int64
		for _, a := range p.AcquiredRecords {
			got = append(got, [3]int64{a.FirstOffset, a.LastOffset, int64(a.DeliveryCount)})
		}
		if len(got) != len(ranges) {
			t.Fatalf("acquired %v, want %v", got, ranges)
		}
		for i := range got {
			if got[i] != ranges[i] {
				t.Fatalf("acquired %v, want %v", got, ranges)
			}
		}
	}
	p := fetch(15, true)
	want(p, [3]int64{0, 14, 1})
	if bs := batchesOf(t, p.Records); len(bs) != 2 || bs[0] != [2]int64{0, 9} || bs[1] != [2]int64{10, 19} {
		t.Fatalf("batches %v, want [0 9] [10 19]", bs)
	}
	ack := func(first, last int64, typ int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
		return kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{typ}}
	}
	// 12-14 released: redelivered (count 2) from the straddling batch
	// 10-19, which also holds the first new records, and is sent once.
	p = fetch(10, true, ack(0, 11, ackAccept), ack(12, 14, ackRelease))
	want(p, [3]int64{12, 14, 2}, [3]int64{15, 21, 1})
	if bs := batchesOf(t, p.Records); len(bs) != 2 || bs[0] != [2]int64{10, 19} || bs[1] != [2]int64{20, 29} {
		t.Fatalf("batches %v, want [10 19] [20 29]", bs)
	}
	p = fetch(8, false, ack(12, 21, ackAccept))
	want(p, [3]int64{22, 29, 1})
	if bs := batchesOf(t, p.Records); len(bs) != 1 || bs[0] != [2]int64{20, 29} {
		t.Fatalf("batches %v, want [20 29]", bs)
	}
	// 22-23 released: redelivered in batch 20-29, then the whole next
	// batch (BATCH_OPTIMIZED), and nothing past it.
	p = fetch(12, false, ack(22, 23, ackRelease), ack(24, 29, ackAccept))
	want(p, [3]int64{22, 23, 2}, [3]int64{30, 39, 1})
	if bs := batchesOf(t, p.Records); len(bs) != 2 || bs[0] != [2]int64{20, 29} || bs[1] != [2]int64{30, 39} {
		t.Fatalf("batches %v, want [20 29] [30 39]", bs)
	}
}
