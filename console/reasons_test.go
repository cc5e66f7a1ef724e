package console

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// frame is a Kafka frame: size, then body.
func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// requestFrame is a request of key/version/correlation with a body.
func requestFrame(req kmsg.Request, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = append(b, 0, 1, 'x') // client id "x"
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return frame(req.AppendTo(b))
}

// responseFrame is a response with correlation corr.
func responseFrame(resp kmsg.Response, corr int32) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if resp.IsFlexible() {
		b = append(b, 0)
	}
	return frame(resp.AppendTo(b))
}

// TestSniffSplitDelivery: the frame followers find a Produce response's
// reason however the bytes are cut into reads and writes, among other
// requests and responses, and an unsniffed response passes unread.
// Invariant: only a response whose correlation id was a Produce request's
// on the same connection is decoded.
func TestSniffSplitDelivery(t *testing.T) {
	for _, ver := range []int16{7, 8, 11} { // v8: messages; v9+: flexible
		meta := kmsg.NewPtrMetadataRequest()
		meta.Version = 9
		prod := kmsg.NewPtrProduceRequest()
		prod.Version = ver
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "keys"
		rt.Partitions = append(rt.Partitions, kmsg.NewProduceRequestTopicPartition())
		prod.Topics = append(prod.Topics, rt)
		writes := append(requestFrame(meta, 1), requestFrame(prod, 2)...)

		metaResp := kmsg.NewPtrMetadataResponse()
		metaResp.Version = 9
		pr := kmsg.NewPtrProduceResponse()
		pr.Version = ver
		st := kmsg.NewProduceResponseTopic()
		st.Topic = "keys"
		sp := kmsg.NewProduceResponseTopicPartition()
		sp.Partition, sp.ErrorCode = 3, kerr.InvalidRecord.Code
		sp.ErrorMessage = kmsg.StringPtr("the partition's message")
		er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
		er.ErrorMessage = kmsg.StringPtr("the record's message")
		sp.ErrorRecords = append(sp.ErrorRecords, er)
		st.Partitions = append(st.Partitions, sp)
		pr.Topics = append(pr.Topics, st)
		reads := append(responseFrame(metaResp, 1), responseFrame(pr, 2)...)

		want := map[int16]string{7: "", 8: "the record's message", 11: "the record's message"}[ver]
		for seed := range uint64(50) {
			rng := rand.New(rand.NewPCG(seed, uint64(ver)))
			pr := newProduceReasons()
			c := &sniffConn{pr: pr}
			feed(rng, writes, c.sawRequest)
			feed(rng, reads, c.sawResponse)
			got := pr.byPart[3]
			if got.msg != want || (want != "" && got.code != kerr.InvalidRecord.Code) {
				t.Fatalf("v%d seed %d: reason %+v, want %q", ver, seed, got, want)
			}
			if len(pr.pending[c]) != 0 {
				t.Fatalf("v%d seed %d: pending after the responses: %v", ver, seed, pr.pending[c])
			}
		}
	}
}

// feed hands b to fn in random chunks of 1 to 16 bytes.
func feed(rng *rand.Rand, b []byte, fn func([]byte)) {
	for len(b) > 0 {
		n := min(1+rng.IntN(16), len(b))
		fn(b[:n])
		b = b[n:]
	}
}
