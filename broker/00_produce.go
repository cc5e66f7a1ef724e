package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce: v3-13 served, v0-13 advertised
//
// Behavior:
// * v0-2 (message sets, magic 0/1) close the connection, as Kafka 4.0 and
//   kfake do (docs/protocol.md §7.2), although ApiVersions advertises min 0
//   so that librdkafka keeps compression (KAFKA-18659).
// * Internal topics (internal_topics.go) refuse appends with
//   INVALID_TOPIC_EXCEPTION, as Kafka does for clients.
// * Each partition must carry exactly one magic-2 batch (Kafka's
//   ProduceRequest.validateRecords): a record set too short or whose length
//   field overruns is CORRUPT_MESSAGE; magic != 2 or more than one batch is
//   INVALID_RECORD. Storage checks the CRC (CORRUPT_MESSAGE), record counts,
//   every record inside, decompressed when compressed (storage.ValidateBatch:
//   INVALID_RECORD, or CORRUPT_MESSAGE for a payload that does not
//   decompress), control batches (INVALID_RECORD), max.message.bytes
//   (MESSAGE_TOO_LARGE) and producer sequences (OUT_OF_ORDER_SEQUENCE_NUMBER,
//   INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID; duplicates succeed with the
//   original offset). Nothing is appended for a partition that errors.
// * Appends happen in Handle, in request order, so a pipelining idempotent
//   producer's batches land in sequence order.
// * acks 1 and -1 answer once the batches are durable per the fsync policy
//   (single node: "all" replicas is us); a durability failure is
//   KAFKA_STORAGE_ERROR. acks 0 gets no response; any partition error closes
//   the connection so the producer refreshes metadata (KafkaApis
//   handleProduceRequest); a batch that does not parse closes it as a
//   malformed request (the gateway counts it as the client's). Other acks values get INVALID_REQUIRED_ACKS.
// * Transactional produce (TransactionID set, transactions v1): the batch
//   must be transactional, its producer id must own the transactional id
//   (else INVALID_PRODUCER_ID_MAPPING), an older epoch is
//   INVALID_PRODUCER_EPOCH, and the partition must have been added to the
//   ongoing transaction (else INVALID_TXN_STATE). See txns.go.
//
// Version notes:
// * v5: LogStartOffset; v8: ErrorMessage (every refusal), ErrorRecords
//   (KIP-467; filled for keyless records on a compacted topic, as Kafka)
// * v9: flexible; v10+: CurrentLeader/NodeEndpoints only on
//   NOT_LEADER_OR_FOLLOWER, which a single node never answers
// * v13: topic ids (unknown id: UNKNOWN_TOPIC_ID)

func init() { regKey(0, 0, 13, handleProduce) }

// produceWait is one appended partition waiting to be durable: its slot
// in the response (topic and partition index) and the durability channel.
type produceWait struct {
	ti, pi  int
	durable <-chan error
}

func handleProduce(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.ProduceRequest)
	if req.Version < 3 {
		r(nil, fmt.Errorf("%w: Produce v%d carries magic 0/1 message sets, which the built-in broker does not accept", ErrUnsupportedRequest, req.Version))
		return
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	now := time.Now()
	var waits []produceWait
	anyErr, badRecords := false, false
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var t *topic
		if req.Version >= 13 {
			t = c.b.lookupID(rt.TopicID)
		} else {
			t = c.b.lookup(rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			code, msg, durable := c.produceOne(req, t, rp, &sp, now)
			if code != 0 {
				anyErr = true
				badRecords = badRecords || code == kerr.InvalidRecord.Code || code == kerr.CorruptMessage.Code
				sp.ErrorCode = code
				if req.Version >= 8 && msg != "" {
					sp.ErrorMessage = kmsg.StringPtr(msg)
				}
			}
			if durable != nil {
				waits = append(waits, produceWait{ti: len(resp.Topics), pi: len(st.Partitions), durable: durable})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		if badRecords {
			// The client sent batches that do not parse: its fault, and
			// labelled so by the gateway (wire.ErrMalformedRequest).
			r(nil, fmt.Errorf("%w: acks=0 produce with an invalid record batch; closing the connection", ErrMalformedRequest))
			return
		}
		if anyErr {
			r(nil, fmt.Errorf("acks=0 produce failed for at least one partition; closing the connection so the producer refreshes metadata"))
			return
		}
		r(nil, nil)
		return
	}
	if len(waits) == 0 {
		r(encode(resp), nil)
		return
	}
	// Wait for durability off the read loop; the response is no longer
	// touched by Handle.
	go func() {
		for _, w := range waits {
			if err := <-w.durable; err != nil {
				c.b.log.Error("produce not durable", "err", err)
				sp := &resp.Topics[w.ti].Partitions[w.pi]
				sp.ErrorCode = kerr.KafkaStorageError.Code
				sp.BaseOffset = -1
				if req.Version >= 8 {
					sp.ErrorMessage = kmsg.StringPtr(err.Error())
				}
			}
		}
		r(encode(resp), nil)
	}()
}

// produceOne appends one partition's batch. It returns a Kafka error code
// and message, or the channel that reports durability.
func (c *Conn) produceOne(req *kmsg.ProduceRequest, t *topic, rp kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition, now time.Time) (int16, string, <-chan error) {
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		return kerr.InvalidRequiredAcks.Code, fmt.Sprintf("acks must be -1, 0 or 1, got %d", req.Acks), nil
	case t == nil && req.Version >= 13:
		return kerr.UnknownTopicID.Code, "unknown topic id", nil
	case t == nil:
		return kerr.UnknownTopicOrPartition.Code, "unknown topic", nil
	case isInternalTopic(t.name):
		return kerr.InvalidTopicException.Code, "cannot append to internal topic " + t.name, nil
	}
	p := c.b.partitionOf(t, rp.Partition)
	if p == nil {
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %s has no partition %d", t.name, rp.Partition), nil
	}
	if code, msg := checkOneBatch(rp.Records); code != 0 {
		return code, msg, nil
	}
	if req.TransactionID != nil && *req.TransactionID != "" {
		return c.b.txns.produce(*req.TransactionID, rp.Records, p, func() (int16, string, <-chan error) {
			return c.appendOne(p, rp, sp, now)
		})
	}
	return c.appendOne(p, rp, sp, now)
}

// appendOne appends one partition's checked batch.
func (c *Conn) appendOne(p *partition, rp kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition, now time.Time) (int16, string, <-chan error) {
	res, durable, err := p.log.Append(rp.Records, storageAppend(now))
	if err != nil {
		code := storageCode(err)
		if code == kerr.KafkaStorageError.Code {
			c.b.log.Error("append", "partition", p.dirName(), "err", err)
		}
		if errors.Is(err, storage.ErrKeyless) {
			if c.b.keylessLog.allow(now) {
				c.b.log.Warn("produce without a key to a compacted topic refused (logged at most once a second; counted in tollgate_broker_compacted_keyless_refused_total)",
					"partition", p.dirName(), "client", c.remote)
			}
			msg, recs := keylessErrors(rp.Records, fmt.Sprintf("%s-%d", p.t.name, p.idx))
			sp.ErrorRecords = recs
			return code, msg, nil
		}
		return code, err.Error(), nil
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = res.LogAppendTime
	sp.LogStartOffset = res.LogStartOffset
	if !res.Duplicate {
		c.b.observeBytes(len(rp.Records), 0)
	}
	return 0, "", durable
}

// keylessErrors are the record errors of a batch refused for keyless
// records on a compacted topic, as Kafka answers them (LogValidator:
// validateKey and processRecordErrors; KIP-467): one ErrorRecords entry
// per keyless record, and a partition ErrorMessage that quotes the first
// three. tp is Kafka's TopicPartition string, "topic-partition".
//
// Unlike Kafka, the list stops at maxRecordErrors entries (the message
// still counts them all): a batch of a few compressed kilobytes can
// decompress to millions of empty records, and the answer must not
// grow with them (DESIGN.md, principle 5). Every entry shares one
// message string.
func keylessErrors(batch []byte, tp string) (string, []kmsg.ProduceResponseTopicPartitionErrorRecord) {
	var recs []kmsg.ProduceResponseTopicPartitionErrorRecord
	var quoted []string
	m := kmsg.StringPtr("Compacted topic cannot accept message without key in topic partition " + tp + ".")
	index, total := int32(0), 0
	_ = storage.EachRecord(batch, func(r storage.Record) error {
		if r.Key == nil {
			total++
			if len(recs) < maxRecordErrors {
				er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				er.RelativeOffset, er.ErrorMessage = index, m
				recs = append(recs, er)
			}
			if len(quoted) < 3 {
				quoted = append(quoted, fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", index, *m))
			}
		}
		index++
		return nil
	})
	msg := fmt.Sprintf("One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [%s]",
		total, strings.Join(quoted, ", "))
	return msg, recs
}

// maxRecordErrors bounds the ErrorRecords of one partition's answer.
const maxRecordErrors = 1000

// recordBatchOverhead is the v2 batch header (DefaultRecordBatch
// RECORD_BATCH_OVERHEAD).
const recordBatchOverhead = 61

// checkOneBatch verifies that records is exactly one magic-2 batch.
func checkOneBatch(records []byte) (int16, string) {
	if len(records) < recordBatchOverhead {
		return kerr.CorruptMessage.Code, fmt.Sprintf("record set of %d bytes is shorter than a batch header", len(records))
	}
	if magic := records[16]; magic != 2 {
		return kerr.InvalidRecord.Code, fmt.Sprintf("record batch magic %d: only magic 2 (Kafka 0.11+) batches are accepted", magic)
	}
	n := int64(int32(binary.BigEndian.Uint32(records[8:]))) + 12
	switch {
	case n < recordBatchOverhead || n > int64(len(records)):
		return kerr.CorruptMessage.Code, "record batch length does not match the record set"
	case n < int64(len(records)):
		return kerr.InvalidRecord.Code, "a produce request must carry exactly one record batch per partition"
	}
	return 0, ""
}
