package proxy_test

import (
	"bytes"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchStreamEveryVersion: the upstream answers every flexible Fetch
// version with a response of every shape the stream walker must step
// through — several topics and partitions, aborted transactions, null and
// empty record sets, record sets small (buffered) and large (spliced),
// per-partition tags, and KIP-951 endpoints — and the client must decode
// exactly that response, with only the endpoints rewritten.
func TestFetchStreamEveryVersion(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "s"))
	srv := startGateway(t, c)
	big := bytes.Repeat([]byte("0123456789abcdef"), 8<<10) // 128 KiB: spliced
	small := []byte("tiny record set")

	var sent *kmsg.FetchResponse
	c.ControlKey(1, func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ThrottleMillis, resp.SessionID = 7, 99
		for ti, name := range []string{"alpha", "beta"} {
			tp := kmsg.NewFetchResponseTopic()
			tp.Topic, tp.TopicID = name, [16]byte{byte(ti + 1)}
			for pi, recs := range [][]byte{big, small, nil, {}} {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition, p.HighWatermark, p.LastStableOffset, p.LogStartOffset = int32(pi), 100, 90, 3
				p.RecordBatches = recs
				if pi == 1 {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID, at.FirstOffset = 5, 40
					p.AbortedTransactions = append(p.AbortedTransactions, at)
				}
				if pi == 2 {
					p.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER
					p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 0, 4
				}
				tp.Partitions = append(tp.Partitions, p)
			}
			resp.Topics = append(resp.Topics, tp)
		}
		if resp.Version >= 16 {
			b := kmsg.NewFetchResponseBroker()
			// Longer than the gateway's host: the rewrite pads the tail.
			b.NodeID, b.Host, b.Port = 0, "broker-0.upstream.example", 1234
			resp.Brokers = append(resp.Brokers, b)
		}
		sent = resp
		return resp, nil, true
	})

	for v := int16(12); v <= kmsg.NewPtrFetchRequest().MaxVersion(); v++ {
		rc := dialRaw(t, srv.Addr(0).String())
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		raw, resp, ok := rc.roundTrip(req)
		if !ok {
			t.Fatalf("v%d: connection closed", v)
		}
		if bytes.Contains(raw, []byte("upstream.example")) {
			t.Fatalf("v%d: upstream host reached the client", v)
		}
		got := resp.(*kmsg.FetchResponse)
		if v >= 16 {
			if len(got.Brokers) != 1 || got.Brokers[0].Host != "127.0.0.1" {
				t.Fatalf("v%d: endpoints %+v", v, got.Brokers)
			}
			port, _ := srv.BrokerAddr(0, 0)
			if int(got.Brokers[0].Port) != port.(*net.TCPAddr).Port {
				t.Fatalf("v%d: endpoint port %d, gateway serves node 0 at %v", v, got.Brokers[0].Port, port)
			}
			got.Brokers, sent.Brokers = nil, nil
			if got.UnknownTags.Len() != 1 {
				t.Fatalf("v%d: want the one padding tag, got %d unknown tags", v, got.UnknownTags.Len())
			}
			got.UnknownTags = kmsg.Tags{}
		}
		want := sent.AppendTo(nil)
		if !bytes.Equal(got.AppendTo(nil), want) {
			t.Fatalf("v%d: the client decoded a different response", v)
		}
	}
}

// TestFetchStreamLastRecordsTail: a response whose last partition has a
// large (spliced) record set ends either with three empty tag sections,
// which go out with the records, or with tags the gateway must rewrite
// (a partition's current leader, KIP-951 endpoints), which it must still
// read and rewrite. The client must decode exactly what was sent, with
// only the endpoints changed, and never see the upstream's host.
func TestFetchStreamLastRecordsTail(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "s"))
	srv := startGateway(t, c)
	big := bytes.Repeat([]byte("fedcba9876543210"), 8<<10) // 128 KiB: spliced

	var (
		sent   *kmsg.FetchResponse
		leader bool // the last partition carries a CurrentLeader tag
		nodes  bool // the response carries KIP-951 endpoints (v16+)
	)
	c.ControlKey(1, func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		tp := kmsg.NewFetchResponseTopic()
		tp.Topic, tp.TopicID = "gamma", [16]byte{9}
		p := kmsg.NewFetchResponseTopicPartition()
		p.HighWatermark, p.LastStableOffset, p.LogStartOffset = 10, 10, 0
		p.RecordBatches = big
		if leader {
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 0, 2
		}
		tp.Partitions = append(tp.Partitions, p)
		resp.Topics = append(resp.Topics, tp)
		if nodes && resp.Version >= 16 {
			b := kmsg.NewFetchResponseBroker()
			b.NodeID, b.Host, b.Port = 0, "broker-0.upstream.example", 1234
			resp.Brokers = append(resp.Brokers, b)
		}
		sent = resp
		return resp, nil, true
	})

	for _, tc := range []struct {
		name          string
		leader, nodes bool
	}{{"empty tail", false, false}, {"leader tag", true, false}, {"endpoints", false, true}} {
		leader, nodes = tc.leader, tc.nodes
		for v := int16(12); v <= kmsg.NewPtrFetchRequest().MaxVersion(); v++ {
			rc := dialRaw(t, srv.Addr(0).String())
			req := kmsg.NewPtrFetchRequest()
			req.SetVersion(v)
			raw, resp, ok := rc.roundTrip(req)
			if !ok {
				t.Fatalf("%s v%d: connection closed", tc.name, v)
			}
			if bytes.Contains(raw, []byte("upstream.example")) {
				t.Fatalf("%s v%d: upstream host reached the client", tc.name, v)
			}
			got := resp.(*kmsg.FetchResponse)
			if len(sent.Brokers) > 0 {
				if len(got.Brokers) != 1 || got.Brokers[0].Host != "127.0.0.1" {
					t.Fatalf("%s v%d: endpoints %+v", tc.name, v, got.Brokers)
				}
				got.Brokers, sent.Brokers = nil, nil
				got.UnknownTags = kmsg.Tags{} // the rewrite's padding
			}
			if !bytes.Equal(got.AppendTo(nil), sent.AppendTo(nil)) {
				t.Fatalf("%s v%d: the client decoded a different response", tc.name, v)
			}
		}
	}
}
