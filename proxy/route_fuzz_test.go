package proxy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/rewrite"
)

// fuzzTunnel is a tunnel with an empty cluster view and no session, for
// the merge code (which needs neither sockets nor a session).
func fuzzTunnel() *tunnel {
	return &tunnel{view: newClusterView(&Server{nodes: newNodeRegistry()}), virtual: 5, adv: fixedMapper{}}
}

// fixedMapper advertises every endpoint at gateway:9092.
type fixedMapper struct{}

func (fixedMapper) Advertise(rewrite.EndpointKind, int32, string, int32) (string, int32, bool) {
	return "gateway", 9092, true
}

// fuzzFetchRequest asks for partitions 0-3 of "a" and 0-1 of "b".
func fuzzFetchRequest(version int16) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.SetVersion(version)
	for name, n := range map[string]int32{"a": 4, "b": 2} {
		tp := kmsg.NewFetchRequestTopic()
		tp.Topic = name
		for p := range n {
			pp := kmsg.NewFetchRequestTopicPartition()
			pp.Partition = p
			tp.Partitions = append(tp.Partitions, pp)
		}
		r.Topics = append(r.Topics, tp)
	}
	return r
}

// FuzzSinglePortMergeFetch: two upstream answers (bytes as a broker would
// send after the correlation id) for parts of one Fetch. A malformed
// answer is an error, never a panic; a decoded one merges into an answer
// that lists every requested partition exactly once or more (a broker may
// repeat one), names only the virtual node, and has session id 0.
func FuzzSinglePortMergeFetch(f *testing.F) {
	good := kmsg.NewPtrFetchResponse()
	good.SetVersion(11)
	tp := kmsg.NewFetchResponseTopic()
	tp.Topic = "a"
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition, p.PreferredReadReplica = 1, 2
	tp.Partitions = append(tp.Partitions, p)
	good.Topics = append(good.Topics, tp)
	good.SessionID = 99
	f.Add(good.AppendTo(nil), []byte{})
	f.Add([]byte{0, 0, 0, 0}, good.AppendTo(nil))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		req := fuzzFetchRequest(11)
		parts := map[int32]kmsg.Response{}
		for i, body := range [][]byte{a, b} {
			resp, err := decodePartResponse(req, body)
			if err != nil {
				return
			}
			parts[int32(i)] = resp
		}
		out := fuzzTunnel().mergeFetch(req, parts)
		if out.SessionID != 0 {
			t.Fatalf("session id %d", out.SessionID)
		}
		have := map[string]map[int32]bool{}
		for _, tp := range out.Topics {
			if have[tp.Topic] == nil {
				have[tp.Topic] = map[int32]bool{}
			}
			for _, p := range tp.Partitions {
				have[tp.Topic][p.Partition] = true
				_ = p
				if p.PreferredReadReplica != -1 || (p.CurrentLeader.LeaderID >= 0 && p.CurrentLeader.LeaderID != 5) {
					t.Fatalf("partition %s[%d] names node %d / %d", tp.Topic, p.Partition, p.PreferredReadReplica, p.CurrentLeader.LeaderID)
				}
			}
		}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				if !have[rt.Topic][rp.Partition] {
					t.Fatalf("merged answer lacks %s[%d]", rt.Topic, rp.Partition)
				}
			}
		}
		for _, b := range out.Brokers {
			if b.NodeID != 5 || b.Host != "gateway" || b.Port != 9092 {
				t.Fatalf("endpoint %+v", b)
			}
		}
		out.AppendTo(nil) // the merged answer encodes
	})
}

// FuzzSinglePortMergeProduce: the same for Produce.
func FuzzSinglePortMergeProduce(f *testing.F) {
	good := kmsg.NewPtrProduceResponse()
	good.SetVersion(9)
	tp := kmsg.NewProduceResponseTopic()
	tp.Topic = "a"
	p := kmsg.NewProduceResponseTopicPartition()
	p.Partition = 0
	tp.Partitions = append(tp.Partitions, p)
	good.Topics = append(good.Topics, tp)
	body := good.AppendTo(nil)
	f.Add(body, body)
	f.Add([]byte{0xff}, body)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "a"
		for i := range int32(3) {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = i
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		parts := map[int32]kmsg.Response{}
		for i, body := range [][]byte{a, b} {
			resp, err := decodePartResponse(req, body)
			if err != nil {
				return
			}
			parts[int32(i)] = resp
		}
		out := fuzzTunnel().mergeProduce(req, parts)
		have := map[int32]bool{}
		for _, tp := range out.Topics {
			for _, p := range tp.Partitions {
				if tp.Topic == "a" {
					have[p.Partition] = true
				}
				if id := p.CurrentLeader.LeaderID; id >= 0 && id != 5 {
					t.Fatalf("leader %d", id)
				}
			}
		}
		for i := range int32(3) {
			if !have[i] {
				t.Fatalf("merged answer lacks a[%d]", i)
			}
		}
		out.AppendTo(nil)
	})
}

// TestMergeThrottle: a merged answer's throttle is the largest part's.
func TestMergeThrottle(t *testing.T) {
	req := fuzzFetchRequest(11)
	parts := map[int32]kmsg.Response{}
	for i, ms := range []int32{10, 30, 20} {
		r := kmsg.NewPtrFetchResponse()
		r.SetVersion(11)
		r.ThrottleMillis = ms
		parts[int32(i)] = r
	}
	if got := fuzzTunnel().mergeFetch(req, parts).ThrottleMillis; got != 30 {
		t.Errorf("fetch throttle %d, want 30", got)
	}
	preq := kmsg.NewPtrProduceRequest()
	pparts := map[int32]kmsg.Response{}
	for i, ms := range []int32{5, 50} {
		r := kmsg.NewPtrProduceResponse()
		r.ThrottleMillis = ms
		pparts[int32(i)] = r
	}
	if got := fuzzTunnel().mergeProduce(preq, pparts).ThrottleMillis; got != 50 {
		t.Errorf("produce throttle %d, want 50", got)
	}
}

// TestIntersectVersions: a key every broker offers survives at the
// versions all serve; a key one broker lacks, or whose ranges do not
// meet, is dropped; keys single-port does not serve are dropped.
func TestIntersectVersions(t *testing.T) {
	mk := func(keys ...[3]int16) *kmsg.ApiVersionsResponse {
		r := kmsg.NewPtrApiVersionsResponse()
		for _, k := range keys {
			r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k[0], MinVersion: k[1], MaxVersion: k[2]})
		}
		return r
	}
	out := intersectVersions(map[int32]kmsg.Response{
		0: mk([3]int16{0, 3, 11}, [3]int16{1, 4, 16}, [3]int16{3, 0, 12}, [3]int16{4, 0, 7}),
		1: mk([3]int16{0, 3, 9}, [3]int16{1, 4, 13}, [3]int16{4, 0, 7}),
		2: mk([3]int16{0, 5, 12}, [3]int16{1, 14, 17}, [3]int16{3, 1, 12}, [3]int16{4, 0, 7}),
	})
	got := map[int16][2]int16{}
	for _, k := range out.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	want := map[int16][2]int16{0: {5, 9}} // Fetch 14-13 empty; Metadata missing on 1; LeaderAndIsr internal
	if len(got) != len(want) || got[0] != want[0] {
		t.Errorf("intersection %v, want %v", got, want)
	}
}
