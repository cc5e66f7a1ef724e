package rewrite

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// shortMapper advertises a host shorter than any upstream host in the
// tests, and hides the nodes in hide.
type shortMapper struct{ hide map[int32]bool }

func (m shortMapper) Advertise(_ EndpointKind, node int32, _ string, _ int32) (string, int32, bool) {
	return "gw", 7000 + node, !m.hide[node]
}

// longMapper advertises a host longer than any upstream host in the tests.
type longMapper struct{}

func (longMapper) Advertise(_ EndpointKind, node int32, _ string, _ int32) (string, int32, bool) {
	return strings.Repeat("g", 200) + ".tollgate.test", 7000 + node, true
}

// fetchWithEndpoints encodes a Fetch response carrying records and the
// given endpoints, and returns the body split at the top-level tags.
func fetchWithEndpoints(t *testing.T, version int16, nodes ...int32) (prefix, tags []byte, resp *kmsg.FetchResponse) {
	t.Helper()
	resp = kmsg.NewPtrFetchResponse()
	resp.Version = version
	tp := kmsg.NewFetchResponseTopic()
	tp.Topic, tp.TopicID = "t", [16]byte{1}
	p := kmsg.NewFetchResponseTopicPartition()
	p.RecordBatches = bytes.Repeat([]byte{0xab}, 300)
	tp.Partitions = append(tp.Partitions, p)
	resp.Topics = append(resp.Topics, tp)
	bare := resp.AppendTo(nil) // no endpoints: the tag section is one 0x00
	for _, n := range nodes {
		b := kmsg.NewFetchResponseBroker()
		b.NodeID, b.Host, b.Port = n, upstreamHost(n), upstreamPort(n)
		if n%2 == 0 {
			rack := "rack-a"
			b.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, b)
	}
	full := resp.AppendTo(nil)
	prefix = bare[:len(bare)-1]
	if !bytes.Equal(full[:len(prefix)], prefix) {
		t.Fatal("endpoints changed bytes before the top-level tags")
	}
	return prefix, full[len(prefix):], resp
}

func TestFetchTagsKeepsLength(t *testing.T) {
	for v := int16(16); v <= kmsg.NewPtrFetchResponse().MaxVersion(); v++ {
		for _, tc := range []struct {
			name   string
			m      Mapper
			nodes  []int32
			expect string // "mapped" or "dropped"
		}{
			{"shorter host", shortMapper{}, []int32{1, 2, 3}, "mapped"},
			{"one endpoint", shortMapper{}, []int32{4}, "mapped"},
			{"longer host", longMapper{}, []int32{1, 2}, "dropped"},
			{"hidden node", shortMapper{hide: map[int32]bool{2: true}}, []int32{1, 2}, "mapped"},
		} {
			prefix, tags, orig := fetchWithEndpoints(t, v, tc.nodes...)
			out, changed, err := FetchTags(tags, tc.m)
			if err != nil || !changed {
				t.Fatalf("v%d %s: changed=%v err=%v", v, tc.name, changed, err)
			}
			if len(out) != len(tags) {
				t.Fatalf("v%d %s: %d bytes, want %d", v, tc.name, len(out), len(tags))
			}
			body := append(append([]byte{}, prefix...), out...)
			if bytes.Contains(body, []byte(leakMarker)) {
				t.Fatalf("v%d %s: upstream host survived", v, tc.name)
			}
			got := kmsg.NewPtrFetchResponse()
			got.Version = v
			if err := got.ReadFrom(body); err != nil {
				t.Fatalf("v%d %s: kmsg cannot decode the result: %v", v, tc.name, err)
			}
			if !bytes.Equal(got.Topics[0].Partitions[0].RecordBatches, orig.Topics[0].Partitions[0].RecordBatches) {
				t.Fatalf("v%d %s: records changed", v, tc.name)
			}
			switch tc.expect {
			case "dropped":
				if len(got.Brokers) != 0 {
					t.Fatalf("v%d %s: %d endpoints, want them dropped", v, tc.name, len(got.Brokers))
				}
			case "mapped":
				want := 0
				for _, n := range tc.nodes {
					if !tc.m.(shortMapper).hide[n] {
						want++
					}
				}
				if len(got.Brokers) != want {
					t.Fatalf("v%d %s: %d endpoints, want %d", v, tc.name, len(got.Brokers), want)
				}
				for _, b := range got.Brokers {
					if b.Host != "gw" || b.Port != 7000+b.NodeID {
						t.Fatalf("v%d %s: node %d at %s:%d", v, tc.name, b.NodeID, b.Host, b.Port)
					}
				}
			}
		}
	}
}

func TestFetchTagsUnchanged(t *testing.T) {
	_, tags, _ := fetchWithEndpoints(t, 16)
	out, changed, err := FetchTags(tags, &testMapper{})
	if err != nil || changed || &out[0] != &tags[0] {
		t.Fatalf("no endpoints: changed=%v err=%v, want the input back", changed, err)
	}
}

// FuzzFetchTags: any input either errors or comes back the same length with
// no byte of a mapped-away host left in the NodeEndpoints.
func FuzzFetchTags(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{1, 0, 2, 1, 0})
	f.Add([]byte{2, 0, 14, 2, 0, 0, 0, 1, 3, 'a', 'b', 0, 0, 0, 9, 0, 0, 5, 1, 0})
	f.Fuzz(func(t *testing.T, tags []byte) {
		out, changed, err := FetchTags(tags, &testMapper{})
		if err != nil {
			return
		}
		if len(out) != len(tags) {
			t.Fatalf("length %d, want %d", len(out), len(tags))
		}
		if !changed && !bytes.Equal(out, tags) {
			t.Fatal("unchanged but different")
		}
	})
}
