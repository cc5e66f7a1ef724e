package rewrite

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchFetch is a Fetch v17 response of 4 topics x 8 partitions with 1 KiB
// of records each, like a consumer's steady-state fetch.
func benchFetch(endpoints bool) []byte {
	r := kmsg.NewPtrFetchResponse()
	r.Version = 17
	records := make([]byte, 1024)
	for t := range 4 {
		topic := kmsg.FetchResponseTopic{TopicID: [16]byte{byte(t + 1)}}
		for p := range 8 {
			part := kmsg.NewFetchResponseTopicPartition()
			part.Partition = int32(p)
			part.HighWatermark = 1 << 20
			part.RecordBatches = records
			topic.Partitions = append(topic.Partitions, part)
		}
		r.Topics = append(r.Topics, topic)
	}
	if endpoints {
		r.Topics[0].Partitions[0].ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER
		r.Brokers = []kmsg.FetchResponseBroker{{NodeID: 2, Host: upstreamHost(2), Port: upstreamPort(2)}}
	}
	return r.AppendTo(nil)
}

// benchProduce is a Produce v11 response for 4 topics x 8 partitions.
func benchProduce() []byte {
	r := kmsg.NewPtrProduceResponse()
	r.Version = 11
	for t := range 4 {
		topic := kmsg.ProduceResponseTopic{Topic: fmt.Sprintf("topic-%d", t)}
		for p := range 8 {
			part := kmsg.NewProduceResponseTopicPartition()
			part.Partition = int32(p)
			part.BaseOffset = 12345
			topic.Partitions = append(topic.Partitions, part)
		}
		r.Topics = append(r.Topics, topic)
	}
	return r.AppendTo(nil)
}

func benchResponse(b *testing.B, key, version int16, body []byte, wantChanged bool) {
	m := &benchMapper{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		_, changed, err := Response(key, version, body, m)
		if err != nil || changed != wantChanged {
			b.Fatalf("changed=%v err=%v", changed, err)
		}
	}
}

// benchMapper maps without recording, so the benchmark measures the rewriter.
type benchMapper struct{}

func (benchMapper) Advertise(_ EndpointKind, node int32, _ string, _ int32) (string, int32, bool) {
	return "gw.tollgate.test", 9092 + node, true
}

func BenchmarkResponseFetchNoEndpoints(b *testing.B) {
	benchResponse(b, 1, 17, benchFetch(false), false)
}

// BenchmarkKmsgDecodeFetchNoEndpoints is what deciding by a kmsg decode
// would cost instead of the pre-check (the baseline for the one above).
func BenchmarkKmsgDecodeFetchNoEndpoints(b *testing.B) {
	body := benchFetch(false)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := kmsg.NewPtrFetchResponse()
		r.Version = 17
		if err := r.UnsafeReadFrom(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResponseFetchWithEndpoints(b *testing.B) {
	benchResponse(b, 1, 17, benchFetch(true), true)
}

func BenchmarkResponseProduceNoEndpoints(b *testing.B) {
	benchResponse(b, 0, 11, benchProduce(), false)
}

func BenchmarkKmsgDecodeProduceNoEndpoints(b *testing.B) {
	body := benchProduce()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := kmsg.NewPtrProduceResponse()
		r.Version = 11
		if err := r.UnsafeReadFrom(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResponseMetadata: 6 brokers, 50 topics of 6 partitions.
func BenchmarkResponseMetadata(b *testing.B) {
	r := kmsg.NewPtrMetadataResponse()
	r.Version = 12
	for n := range int32(6) {
		r.Brokers = append(r.Brokers, kmsg.MetadataResponseBroker{NodeID: n, Host: upstreamHost(n), Port: upstreamPort(n)})
	}
	for t := range 50 {
		topic := kmsg.NewMetadataResponseTopic()
		name := fmt.Sprintf("topic-%d", t)
		topic.Topic = &name
		for p := range int32(6) {
			part := kmsg.NewMetadataResponseTopicPartition()
			part.Partition, part.Leader = p, p
			part.Replicas, part.ISR = []int32{p, (p + 1) % 6, (p + 2) % 6}, []int32{p, (p + 1) % 6}
			topic.Partitions = append(topic.Partitions, part)
		}
		r.Topics = append(r.Topics, topic)
	}
	benchResponse(b, 3, 12, r.AppendTo(nil), true)
}

func BenchmarkNeeds(b *testing.B) {
	b.ReportAllocs()
	var n int
	for b.Loop() {
		if Needs(1, 17) {
			n++
		}
	}
	if n == 0 {
		b.Fatal("Needs(1, 17) = false")
	}
}
