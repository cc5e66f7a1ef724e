package proxy

import (
	"bytes"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// spliceRecs is a records field: null, empty, short (copied) or long
// (spliced), with distinct bytes so a misplaced field shows.
func spliceRecs(rng *rand.Rand) []byte {
	switch rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		n := 1 + rng.IntN(spliceMin-1)
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	b := make([]byte, spliceMin+rng.IntN(200<<10))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func joinBuffers(bufs net.Buffers) []byte {
	var out []byte
	for _, b := range bufs {
		out = append(out, b...)
	}
	return out
}

func randomFetchResponse(rng *rand.Rand, version int16) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version = version
	r.ThrottleMillis, r.ErrorCode, r.SessionID = rng.Int32N(100), int16(rng.IntN(2)), rng.Int32()
	for range rng.IntN(4) {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = string(rune('a'+rng.IntN(26))) + "topic"
		t.TopicID[0], t.TopicID[15] = byte(rng.Uint32()), byte(rng.Uint32())
		for i := range rng.IntN(5) {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.HighWatermark, p.LastStableOffset, p.LogStartOffset = int32(i), rng.Int64(), rng.Int64(), rng.Int64()
			if rng.IntN(2) == 0 {
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 7, FirstOffset: 9}}
			}
			if rng.IntN(3) == 0 {
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 3, 42
			}
			if rng.IntN(3) == 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 1, 5
			}
			if rng.IntN(4) == 0 {
				p.SnapshotID.EndOffset, p.SnapshotID.Epoch = 11, 2
			}
			p.PreferredReadReplica = -1
			p.RecordBatches = spliceRecs(rng)
			t.Partitions = append(t.Partitions, p)
		}
		r.Topics = append(r.Topics, t)
	}
	if rng.IntN(2) == 0 {
		r.Brokers = []kmsg.FetchResponseBroker{{NodeID: 0, Host: "127.0.0.1", Port: 9092}}
	}
	return r
}

// TestSinglePortSpliceFetch: a merged Fetch answer written from its
// pieces is byte for byte kmsg's encoding of it, at every version, and
// decodes to the same records; the response is left as it was.
func TestSinglePortSpliceFetch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for v := int16(0); v <= kmsg.NewPtrFetchResponse().MaxVersion(); v++ {
		for range 30 {
			r := randomFetchResponse(rng, v)
			want := r.AppendTo(nil)
			a := &fetchAnswer{}
			if err := spliceFetch(r, &a.frame, nil); err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			got := joinBuffers(a.buffers(nil))
			if a.Len() != len(got) {
				t.Fatalf("v%d: Len %d, wrote %d", v, a.Len(), len(got))
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("v%d: spliced answer differs from kmsg's encoding (%d vs %d bytes)", v, len(got), len(want))
			}
			if !bytes.Equal(r.AppendTo(nil), want) {
				t.Fatalf("v%d: spliceFetch changed the response", v)
			}
			d := kmsg.NewPtrFetchResponse()
			d.Version = v
			if err := d.ReadFrom(got); err != nil {
				t.Fatalf("v%d: decode: %v", v, err)
			}
			for i := range r.Topics {
				for j := range r.Topics[i].Partitions {
					w, g := r.Topics[i].Partitions[j].RecordBatches, d.Topics[i].Partitions[j].RecordBatches
					if !bytes.Equal(w, g) || (w == nil) != (g == nil) {
						t.Fatalf("v%d: topic %d partition %d: records differ", v, i, j)
					}
				}
			}
			if !bytes.HasPrefix(want, a.start()) {
				t.Fatalf("v%d: start is not the answer's beginning", v)
			}
		}
	}
}

// TestSinglePortSpliceProduce: a Produce part written with the client's
// records spliced is byte for byte the frame kmsg's formatter writes, at
// every version, and decodes to the same records.
func TestSinglePortSpliceProduce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var ps produceSplicer
	for v := int16(0); v <= kmsg.NewPtrProduceRequest().MaxVersion(); v++ {
		for i := range 30 {
			r := kmsg.NewPtrProduceRequest()
			r.Version, r.Acks, r.TimeoutMillis = v, -1, 30000
			if rng.IntN(2) == 0 {
				id := "txn"
				r.TransactionID = &id
			}
			for range rng.IntN(4) {
				tp := kmsg.NewProduceRequestTopic()
				tp.Topic = "topic-" + string(rune('a'+rng.IntN(26)))
				tp.TopicID[3] = byte(rng.Uint32())
				for p := range rng.IntN(5) {
					pp := kmsg.NewProduceRequestTopicPartition()
					pp.Partition, pp.Records = int32(p), spliceRecs(rng)
					tp.Partitions = append(tp.Partitions, pp)
				}
				r.Topics = append(r.Topics, tp)
			}
			clientID := []string{"", "client-1", "a-longer-client-id"}[i%3]
			fm := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
			want := fm.AppendRequest(nil, r, int32(i))
			bufs, err := ps.appendProduce(fm, r, int32(i))
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			got := joinBuffers(bufs)
			ps.written()
			if !bytes.Equal(got, want) {
				t.Fatalf("v%d: spliced request differs from kmsg's (%d vs %d bytes)", v, len(got), len(want))
			}
			if !bytes.Equal(fm.AppendRequest(nil, r, int32(i)), want) {
				t.Fatalf("v%d: appendProduce changed the request", v)
			}
			// The body, decoded, has the records as sent.
			d := kmsg.NewPtrProduceRequest()
			d.Version = v
			hdr := 4 + 8 + 2 + len(clientID)
			if r.IsFlexible() {
				hdr++
			}
			if err := d.ReadFrom(got[hdr:]); err != nil {
				t.Fatalf("v%d: decode: %v", v, err)
			}
			for ti := range r.Topics {
				for pi := range r.Topics[ti].Partitions {
					w, g := r.Topics[ti].Partitions[pi].Records, d.Topics[ti].Partitions[pi].Records
					if !bytes.Equal(w, g) || (w == nil) != (g == nil) {
						t.Fatalf("v%d: topic %d partition %d: records differ", v, ti, pi)
					}
				}
			}
		}
	}
}
