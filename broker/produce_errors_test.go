package broker

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// keyedBatch encodes one uncompressed magic-2 batch of records with the
// given keys (nil: no key) and value "v".
func keyedBatch(keys ...[]byte) []byte {
	var recs []byte
	for i, k := range keys {
		r := kmsg.Record{OffsetDelta: int32(i), Key: k, Value: []byte("v")}
		body := r.AppendTo(nil)[1:] // drop the zero Length varint
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(len(keys) - 1),
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(keys)), Records: recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

// TestProduceKeylessRecordErrors: a batch with keyless records refused by
// a compacted topic says why, as Kafka does (KIP-467, LogValidator): the
// partition's ErrorMessage quotes the record errors and ErrorRecords names
// each keyless record by its index in the batch.
func TestProduceKeylessRecordErrors(t *testing.T) {
	_, srv := newBroker(t)
	compactedTopic(t, srv.addr(), "keys", nil)
	cl := newClient(t, srv.addr())
	ctx := testCtx(t)
	tds, err := kadm.NewClient(cl).ListTopics(ctx, "keys")
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "keys", tds["keys"].ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = keyedBatch([]byte("a"), nil, []byte("b"), nil)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version < 8 {
		t.Fatalf("negotiated Produce v%d, want v8+", resp.Version)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("error code %d, want INVALID_RECORD", sp.ErrorCode)
	}
	const reason = "Compacted topic cannot accept message without key in topic partition keys-0."
	if sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "due to 2 record errors") || !strings.Contains(*sp.ErrorMessage, reason) {
		t.Fatalf("error message %q, want Kafka's with %q", deref(sp.ErrorMessage), reason)
	}
	if len(sp.ErrorRecords) != 2 || sp.ErrorRecords[0].RelativeOffset != 1 || sp.ErrorRecords[1].RelativeOffset != 3 ||
		sp.ErrorRecords[0].ErrorMessage == nil || *sp.ErrorRecords[0].ErrorMessage != reason {
		t.Fatalf("error records %+v, want indexes 1 and 3 with %q", sp.ErrorRecords, reason)
	}
}

// TestKeylessRecordErrorsBounded: a batch of many keyless records gets
// at most maxRecordErrors ErrorRecords, while the message still counts
// every one (the answer does not grow with what a small compressed
// batch can unpack to).
func TestKeylessRecordErrorsBounded(t *testing.T) {
	const n = 5000
	keys := make([][]byte, n)
	msg, recs := keylessErrors(keyedBatch(keys...), "keys-0")
	if len(recs) != maxRecordErrors || recs[maxRecordErrors-1].RelativeOffset != maxRecordErrors-1 {
		t.Fatalf("%d error records (last %+v), want the first %d", len(recs), recs[len(recs)-1], maxRecordErrors)
	}
	if !strings.Contains(msg, "due to 5000 record errors") {
		t.Fatalf("message %q does not count all %d", msg, n)
	}
}
