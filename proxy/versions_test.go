package proxy_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn is a hand-driven Kafka connection for sending one request at an
// exact version and reading the raw response bytes.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	corr int32
	f    *kmsg.RequestFormatter
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("versions-test"))}
}

// roundTrip sends req at its set version and returns the raw response body
// and the decoded response; ok=false if the connection was closed instead.
func (r *rawConn) roundTrip(req kmsg.Request) (raw []byte, resp kmsg.Response, ok bool) {
	r.t.Helper()
	r.corr++
	r.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.c.Write(r.f.AppendRequest(nil, req, r.corr)); err != nil {
		return nil, nil, false
	}
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		return nil, nil, false
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.c, frame); err != nil {
		r.t.Fatalf("%s v%d: truncated response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != r.corr {
		r.t.Fatalf("correlation id %d, want %d", got, r.corr)
	}
	body := frame[4:]
	if req.IsFlexible() && req.Key() != 18 {
		body = body[1:] // empty header tags
	}
	resp = req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("%s v%d: decode response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return frame, resp, true
}

// upstreamVersions asks the upstream directly which versions it serves.
func upstreamVersions(t testing.TB, c *kfake.Cluster) map[int16][2]int16 {
	rc := dialRaw(t, c.ListenAddrs()[0])
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
	_, resp, ok := rc.roundTrip(req)
	if !ok {
		t.Fatal("upstream ApiVersions failed")
	}
	out := map[int16][2]int16{}
	for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return out
}

// testBatch is a one-record, uncompressed v2 record batch with a valid CRC.
func testBatch() []byte { return testBatchOf([]byte("v")) }

// testBatchOf is testBatch with value as its record's value.
func testBatchOf(value []byte) []byte {
	rec := kmsg.Record{Value: value}
	recBytes := rec.AppendTo(nil)
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: 0,
		FirstTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli(),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: recBytes,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// TestNoUpstreamAddressAnyVersion sends every address-bearing request at
// every version both kmsg and the upstream serve, through the gateway, and
// fails if any response byte names an upstream host. Produce and Fetch go
// to a broker that does not lead the partition, so the upstream fills the
// KIP-951 endpoints the gateway must rewrite.
func TestNoUpstreamAddressAnyVersion(t *testing.T) {
	c := startUpstream(t, 3, kfake.SeedTopics(1, "lead"))
	srv := startGateway(t, c)
	versions := upstreamVersions(t, c)
	leader := c.LeaderFor("lead", 0)
	var other int32 = -1
	for n := range int32(3) {
		if n != leader {
			other = n
		}
	}
	otherAddr, ok := srv.BrokerAddr(0, other)
	if !ok {
		t.Fatalf("no gateway port for node %d after discovery", other)
	}
	topicID := c.TopicInfo("lead").TopicID

	requests := map[int16]func(v int16) kmsg.Request{
		3: func(v int16) kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			if v == 0 {
				r.Topics = []kmsg.MetadataRequestTopic{}
			}
			return r
		},
		10: func(v int16) kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKey, r.CoordinatorKeys = "group-a", []string{"group-a", "group-b"}
			return r
		},
		60: func(int16) kmsg.Request { return kmsg.NewPtrDescribeClusterRequest() },
		0: func(v int16) kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Acks, r.TimeoutMillis = -1, 5000
			tp := kmsg.NewProduceRequestTopic()
			tp.Topic, tp.TopicID = "lead", topicID
			p := kmsg.NewProduceRequestTopicPartition()
			p.Records = testBatch()
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		},
		1: func(v int16) kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.MaxWaitMillis, r.MaxBytes, r.SessionEpoch = 10, 1<<20, -1
			tp := kmsg.NewFetchRequestTopic()
			tp.Topic, tp.TopicID = "lead", topicID
			p := kmsg.NewFetchRequestTopicPartition()
			p.PartitionMaxBytes, p.CurrentLeaderEpoch = 1<<20, -1
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		},
	}
	endpointsSeen := map[string]int{}
	for key, mk := range requests {
		vr, ok := versions[key]
		if !ok {
			continue
		}
		maxV := min(vr[1], kmsg.RequestForKey(key).MaxVersion())
		for v := vr[0]; v <= maxV; v++ {
			name := fmt.Sprintf("%s_v%d", kmsg.NameForKey(key), v)
			req := mk(v)
			req.SetVersion(v)
			addr := srv.Addr(0).String()
			if key == 0 || key == 1 {
				addr = otherAddr.String()
			}
			raw, resp, ok := dialRaw(t, addr).roundTrip(req)
			if !ok {
				t.Errorf("%s: connection closed instead of a response", name)
				continue
			}
			if bytes.Contains(raw, []byte(upstreamHost)) {
				t.Errorf("%s: response names the upstream host", name)
			}
			for _, ep := range endpoints(resp) {
				endpointsSeen[kmsg.NameForKey(key)]++
				if ep.host != "127.0.0.1" {
					t.Errorf("%s: endpoint %s:%d", name, ep.host, ep.port)
				}
				if a, ok := srv.BrokerAddr(0, ep.node); !ok || a.(*net.TCPAddr).Port != int(ep.port) {
					t.Errorf("%s: node %d at port %d, the gateway serves it at %v", name, ep.node, ep.port, a)
				}
			}
		}
	}
	t.Logf("endpoints checked per API: %v", endpointsSeen)
	// The test proves nothing unless the upstream actually sent endpoints
	// in every kind of response.
	for _, api := range []string{"Metadata", "FindCoordinator", "DescribeCluster", "Produce", "Fetch"} {
		if endpointsSeen[api] == 0 {
			t.Errorf("no %s response carried an endpoint; the check is vacuous", api)
		}
	}
}

type endpoint struct {
	node int32
	host string
	port int32
}

// endpoints lists every broker endpoint in a decoded response.
func endpoints(resp kmsg.Response) []endpoint {
	var out []endpoint
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for _, b := range r.Brokers {
			out = append(out, endpoint{b.NodeID, b.Host, b.Port})
		}
	case *kmsg.FindCoordinatorResponse:
		if r.Version < 4 && r.ErrorCode == 0 {
			out = append(out, endpoint{r.NodeID, r.Host, r.Port})
		}
		for _, c := range r.Coordinators {
			if c.ErrorCode == 0 {
				out = append(out, endpoint{c.NodeID, c.Host, c.Port})
			}
		}
	case *kmsg.DescribeClusterResponse:
		for _, b := range r.Brokers {
			out = append(out, endpoint{b.NodeID, b.Host, b.Port})
		}
	case *kmsg.ProduceResponse:
		for _, b := range r.Brokers {
			out = append(out, endpoint{b.NodeID, b.Host, b.Port})
		}
	case *kmsg.FetchResponse:
		for _, b := range r.Brokers {
			out = append(out, endpoint{b.NodeID, b.Host, b.Port})
		}
	}
	return out
}

// TestApiVersionsFromTheFuture: a client that opens with an ApiVersions
// version newer than the gateway knows gets UNSUPPORTED_VERSION with the
// range to retry in (KIP-511), and its retry is answered with clamped
// versions — Produce from 0 (librdkafka needs it for compression) and never
// above what the gateway can rewrite.
func TestApiVersionsFromTheFuture(t *testing.T) {
	c := startUpstream(t, 1)
	srv := startGateway(t, c)
	rc := dialRaw(t, srv.Addr(0).String())
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(kmsg.NewPtrApiVersionsRequest().MaxVersion() + 3)
	// kmsg cannot encode an unknown version's body; v3 fields are what a
	// newer client would send first anyway.
	rc.corr++
	frame := append([]byte{0, 18, 0, byte(req.Version), 0, 0, 0, byte(rc.corr), 0, 1, 'x', 0}, 2, 'a', 2, '1', 0)
	rc.c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	io.ReadFull(rc.c, body)
	v0 := kmsg.NewPtrApiVersionsResponse()
	if err := v0.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
	if v0.ErrorCode != 35 || len(v0.ApiKeys) != 1 || v0.ApiKeys[0].ApiKey != 18 {
		t.Fatalf("want UNSUPPORTED_VERSION with the ApiVersions range, got %+v", v0)
	}
	retry := kmsg.NewPtrApiVersionsRequest()
	retry.SetVersion(v0.ApiKeys[0].MaxVersion)
	retry.ClientSoftwareName, retry.ClientSoftwareVersion = "x", "1"
	_, resp, ok := rc.roundTrip(retry)
	if !ok {
		t.Fatal("connection closed on the retry")
	}
	for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == 0 && k.MinVersion != 0 {
			t.Errorf("Produce min version %d, want 0", k.MinVersion)
		}
		if r := kmsg.RequestForKey(k.ApiKey); r != nil && needsRewrite(k.ApiKey) && k.MaxVersion > r.MaxVersion() {
			t.Errorf("key %d offered up to v%d, beyond what the gateway decodes (v%d)", k.ApiKey, k.MaxVersion, r.MaxVersion())
		}
	}
}

func needsRewrite(key int16) bool {
	switch key {
	case 0, 1, 3, 10, 55, 60, 78, 79:
		return true
	}
	return false
}
