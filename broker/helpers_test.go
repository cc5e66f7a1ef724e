package broker

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/tollgate-kafka/tollgate/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// makeBatch encodes one uncompressed magic-2 batch holding values, as a
// non-idempotent producer would send it.
func makeBatch(values ...[]byte) []byte {
	return makeProducerBatch(-1, -1, -1, values...)
}

// makeTxnBatch encodes a transactional batch of producer pid (epoch 0)
// starting at sequence seq.
func makeTxnBatch(pid int64, seq int32, values ...[]byte) []byte {
	raw := makeProducerBatch(pid, 0, seq, values...)
	binary.BigEndian.PutUint16(raw[21:], 0x10) // transactional
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

func makeProducerBatch(pid int64, epoch int16, seq int32, values ...[]byte) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: v}
		body := r.AppendTo(nil)[1:] // drop the zero Length varint
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2,
		LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp:  now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: int32(len(values)), Records: recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

// call runs one request through Conn.Handle and waits for the answer.
func call(c *Conn, req kmsg.Request) (wire.Body, error) {
	ch := make(chan result, 1)
	c.Handle(&wire.Request{Key: req.Key(), Version: req.GetVersion(), Body: req.AppendTo(nil)},
		func(b wire.Body, err error) { ch <- result{b, err} })
	r := <-ch
	return r.body, r.err
}
