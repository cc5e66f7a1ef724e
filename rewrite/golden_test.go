package rewrite

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden from the builders in golden_test.go")

// A golden file holds one transform: "# " comment lines (the first names
// the call: "# Response key=K version=V" or "# ApiVersions version=V"), the
// input body in hex, a line "---", and the expected output in hex. The test
// reads the input from the file, so a golden file keeps checking the
// transform even if the builders below change.
type goldenCase struct {
	file  string
	about string
	key   int16 // 18 runs ApiVersions, anything else Response
	ver   int16
	build func() []byte
}

func goldenCases() []goldenCase {
	str := func(s string) *string { return &s }
	return []goldenCase{
		{"metadata_v12.golden", "two brokers and a topic led by broker 2", 3, 12, func() []byte {
			r := kmsg.NewPtrMetadataResponse()
			r.Version = 12
			r.Brokers = []kmsg.MetadataResponseBroker{
				{NodeID: 1, Host: upstreamHost(1), Port: upstreamPort(1), Rack: str("rack-a")},
				{NodeID: 2, Host: upstreamHost(2), Port: upstreamPort(2)},
			}
			r.ClusterID, r.ControllerID = str("cluster-1"), 2
			t := kmsg.NewMetadataResponseTopic()
			t.Topic = str("orders")
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Leader, p.Replicas, p.ISR = 2, []int32{2, 1}, []int32{2, 1}
			t.Partitions = append(t.Partitions, p)
			r.Topics = append(r.Topics, t)
			return r.AppendTo(nil)
		}},
		{"findcoordinator_v4.golden", "one coordinator found, one COORDINATOR_NOT_AVAILABLE entry left untouched", 10, 4, func() []byte {
			r := kmsg.NewPtrFindCoordinatorResponse()
			r.Version = 4
			r.Coordinators = []kmsg.FindCoordinatorResponseCoordinator{
				{Key: "group-a", NodeID: 3, Host: upstreamHost(3), Port: upstreamPort(3)},
				{Key: "group-b", NodeID: -1, Host: "", Port: -1, ErrorCode: 15},
			}
			return r.AppendTo(nil)
		}},
		{"fetch_v16_endpoints.golden", "NOT_LEADER_OR_FOLLOWER with the new leader's KIP-951 endpoint (tag 0)", 1, 16, func() []byte {
			r := kmsg.NewPtrFetchResponse()
			r.Version = 16
			p := kmsg.NewFetchResponseTopicPartition()
			p.ErrorCode = 6
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 2, 7
			r.Topics = []kmsg.FetchResponseTopic{{TopicID: [16]byte{0xab, 1}, Partitions: []kmsg.FetchResponseTopicPartition{p}}}
			r.Brokers = []kmsg.FetchResponseBroker{{NodeID: 2, Host: upstreamHost(2), Port: upstreamPort(2)}}
			return r.AppendTo(nil)
		}},
		{"describequorum_v2.golden", "controller listeners; the mapper hides node 3, whose listener is removed", 55, 2, func() []byte {
			r := kmsg.NewPtrDescribeQuorumResponse()
			r.Version = 2
			r.Nodes = []kmsg.DescribeQuorumResponseNode{
				{NodeID: 1, Listeners: []kmsg.DescribeQuorumResponseNodeListener{{Name: "CONTROLLER", Host: upstreamHost(1), Port: uint16(upstreamPort(1))}}},
				{NodeID: 3, Listeners: []kmsg.DescribeQuorumResponseNodeListener{{Name: "CONTROLLER", Host: upstreamHost(3), Port: uint16(upstreamPort(3))}}},
			}
			return r.AppendTo(nil)
		}},
		{"apiversions_v3.golden", "Produce min 3 -> 0, Fetch max 99 -> kmsg max, SaslHandshake 3 -> 1, ApiVersions 5 -> 4, key 300 untouched", 18, 3, func() []byte {
			return apiVersionsBody(3, []keyRange{{0, 3, 13}, {1, 4, 99}, {17, 0, 3}, {18, 0, 5}, {300, 0, 2}}, nil)
		}},
	}
}

// goldenMapper hides controller 3, as the describequorum case says.
func goldenMapper() *testMapper {
	return &testMapper{hide: map[EndpointKind]map[int32]bool{Controller: {3: true}}}
}

func (g goldenCase) run(in []byte) ([]byte, error) {
	if g.key == 18 {
		return ApiVersions(g.ver, in, nil)
	}
	out, _, err := Response(g.key, g.ver, in, goldenMapper())
	return out, err
}

func TestGolden(t *testing.T) {
	for _, g := range goldenCases() {
		t.Run(g.file, func(t *testing.T) {
			path := filepath.Join("testdata", g.file)
			if *updateGolden {
				in := g.build()
				out, err := g.run(in)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, formatGolden(g, in, out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (regenerate with -update): %v", err)
			}
			in, want, err := parseGolden(raw)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			got, err := g.run(in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s\n got: %x\nwant: %x", path, got, want)
			}
			if g.key != 18 {
				assertNoLeak(t, got)
			}
		})
	}
}

func formatGolden(g goldenCase, in, out []byte) []byte {
	var b bytes.Buffer
	call := fmt.Sprintf("Response key=%d version=%d", g.key, g.ver)
	if g.key == 18 {
		call = fmt.Sprintf("ApiVersions version=%d", g.ver)
	}
	fmt.Fprintf(&b, "# %s\n# %s\n", call, g.about)
	fmt.Fprintf(&b, "# upstream hosts end in %q; node n maps to %s:%d style addresses\n", leakMarker, gwHost(0), gwPort(0))
	if r, err := decode(g.key, g.ver, out); err == nil {
		j, _ := json.Marshal(r)
		fmt.Fprintf(&b, "# output decoded: %s\n", j)
	}
	writeHex(&b, in)
	b.WriteString("---\n")
	writeHex(&b, out)
	return b.Bytes()
}

func writeHex(b *bytes.Buffer, p []byte) {
	for len(p) > 0 {
		n := min(32, len(p))
		b.WriteString(hex.EncodeToString(p[:n]))
		b.WriteByte('\n')
		p = p[n:]
	}
}

func parseGolden(raw []byte) (in, out []byte, err error) {
	var parts [2]strings.Builder
	part := 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case line == "---":
			part++
		case part < 2:
			parts[part].WriteString(line)
		}
	}
	if part != 1 {
		return nil, nil, fmt.Errorf("want one --- separator, found %d", part)
	}
	if in, err = hex.DecodeString(parts[0].String()); err != nil {
		return nil, nil, fmt.Errorf("input: %w", err)
	}
	if out, err = hex.DecodeString(parts[1].String()); err != nil {
		return nil, nil, fmt.Errorf("output: %w", err)
	}
	return in, out, nil
}
