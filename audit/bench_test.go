package audit

import (
	"io"
	"testing"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkLog measures a record's whole trip: Log, the queue, JSON
// encoding and the write, with a sink that discards. Strict mode is used
// so that Log waits for the writer instead of dropping, and the time per
// op is the writer's real throughput.
func BenchmarkLog(b *testing.B) {
	for _, level := range []string{configs.AuditSummary, configs.AuditFull} {
		b.Run(level, func(b *testing.B) {
			h := &countHooks{}
			tr, err := New(auditCfg(level, configs.AuditStrict, 10000), h, WithSink(io.Discard))
			if err != nil {
				b.Fatal(err)
			}
			recs := make([]*Record, 1024)
			for i := range recs {
				recs[i] = reqRecord(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := tr.Log(recs[i%len(recs)]); err != nil {
					b.Fatal(err)
				}
			}
			tr.Close()
			if h.written.Load() != int64(b.N) {
				b.Fatalf("written %d of %d", h.written.Load(), b.N)
			}
		})
	}
}

func produce16() (*kmsg.ProduceRequest, *kmsg.ProduceResponse) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	resp := kmsg.NewPtrProduceResponse()
	t := kmsg.ProduceRequestTopic{Topic: "orders"}
	rt := kmsg.ProduceResponseTopic{Topic: "orders"}
	for p := range int32(16) {
		t.Partitions = append(t.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: makeBatch(10, 100)})
		rt.Partitions = append(rt.Partitions, kmsg.ProduceResponseTopicPartition{Partition: p, BaseOffset: int64(p) * 10})
	}
	req.Topics = []kmsg.ProduceRequestTopic{t}
	resp.Topics = []kmsg.ProduceResponseTopic{rt}
	return req, resp
}

// BenchmarkDescribeProduce16 describes a 16-partition Produce request and
// its response (decoding is the caller's cost and is not included).
func BenchmarkDescribeProduce16(b *testing.B) {
	req, resp := produce16()
	b.ReportAllocs()
	for range b.N {
		rec := Record{}
		Describe(&rec, req, resp, nil)
		if rec.Topics[0].Partitions[15].Records != 10 {
			b.Fatal("wrong count")
		}
	}
}

// BenchmarkAppendJSON encodes a described 16-partition Produce record.
func BenchmarkAppendJSON(b *testing.B) {
	req, resp := produce16()
	rec := reqRecord(1)
	rec.Topics = nil
	Describe(rec, req, resp, nil)
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for range b.N {
		buf = rec.AppendJSON(buf[:0], true)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkDescribeGeneric describes an OffsetCommit through the
// reflective walker.
func BenchmarkDescribeGeneric(b *testing.B) {
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group = "billing"
	t := kmsg.OffsetCommitRequestTopic{Topic: "orders"}
	for p := range int32(16) {
		t.Partitions = append(t.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: 10})
	}
	oc.Topics = []kmsg.OffsetCommitRequestTopic{t}
	b.ReportAllocs()
	for range b.N {
		rec := Record{}
		Describe(&rec, oc, nil, nil)
	}
}

// BenchmarkFullPipeline is the whole per-request cost of audit level
// full for a 16-partition Produce, as the gateway would pay it: decode
// the request and response bodies with kmsg, Describe, build the record
// and Log it (best-effort, sink discarding; the writer's encoding runs on
// its own goroutine).
func BenchmarkFullPipeline(b *testing.B) {
	req, resp := produce16()
	req.SetVersion(9)
	resp.SetVersion(9)
	reqBody, respBody := req.AppendTo(nil), resp.AppendTo(nil)
	tr, err := New(auditCfg(configs.AuditFull, configs.AuditBestEffort, 10000), nil, WithSink(io.Discard))
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	b.SetBytes(int64(len(reqBody)))
	b.ReportAllocs()
	for i := range b.N {
		rq := kmsg.NewPtrProduceRequest()
		rq.SetVersion(9)
		if err := rq.ReadFrom(reqBody); err != nil {
			b.Fatal(err)
		}
		rs := kmsg.NewPtrProduceResponse()
		rs.SetVersion(9)
		if err := rs.ReadFrom(respBody); err != nil {
			b.Fatal(err)
		}
		rec := &Record{Event: EventRequest, Listener: "default", ClientID: "bench", API: "Produce", Key: 0, Version: 9, Correlation: int32(i)}
		Describe(rec, rq, rs, nil)
		tr.Log(rec)
	}
}
