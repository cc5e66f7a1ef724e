package proxy

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/wire"
)

// FuzzVClusterRewrite feeds arbitrary request bodies to the virtual
// cluster's rewrites: the Produce header walk (vcProduceFrame) must fail
// or give a request kmsg decodes with every topic name and the
// transactional id prefixed; the Fetch id walk and every table row's
// request and answer rewrite, and the in-place Produce v13+ id walk
// (vcProduceIDs), must not panic. The seed corpus is
// testdata/fuzz/FuzzVClusterRewrite (kmsg-encoded requests of the keys
// the table has rows for).
func FuzzVClusterRewrite(f *testing.F) {
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		n := &vcNames{prefix: "team-a.", ids: &topicIDView{m: map[[16]byte]string{}}, mask: [16]byte{1}}
		if key == 0 && version >= 0 && version <= 12 {
			checkProduceRewrite(t, n, version, body)
		}
		if key == 0 && version >= 13 && version <= 13 {
			frame := append(vcHeaderBytes(0, version), body...)
			binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
			vcProduceIDs(vcHeader(t, 0, version), frame, n)
		}
		if key == 1 && version >= 13 && version <= 17 {
			vcFetchIDs(vcHeader(t, key, version), append([]byte(nil), body...), n)
		}
		e := vcTable[key]
		req := kmsg.RequestForKey(key)
		if e == nil || e.req == nil || req == nil || version < 0 || version > req.MaxVersion() {
			return
		}
		req.SetVersion(version)
		if req.ReadFrom(body) == nil && e.req(n, req) == nil {
			req.AppendTo(nil)
		}
		resp := req.ResponseKind()
		resp.SetVersion(version)
		if resp.ReadFrom(body) == nil && e.resp != nil {
			e.resp(n, resp)
			resp.AppendTo(nil)
		}
	})
}

func checkProduceRewrite(t *testing.T, n *vcNames, version int16, body []byte) {
	h := vcHeader(t, 0, version)
	frame := append(vcHeaderBytes(0, version), body...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	out, empty, err := vcProduceFrame(nil, h, frame, n)
	if err != nil || empty {
		return
	}
	in := kmsg.NewPtrProduceRequest()
	in.SetVersion(version)
	if in.ReadFrom(body) != nil {
		return
	}
	oh, err := wire.ParseRequestHeader(out[4:])
	if err != nil {
		t.Fatalf("rewritten header: %v", err)
	}
	got := kmsg.NewPtrProduceRequest()
	got.SetVersion(version)
	if err := got.ReadFrom(out[4+oh.Len:]); err != nil {
		t.Fatalf("rewritten request does not decode: %v", err)
	}
	if len(got.Topics) != len(in.Topics) {
		t.Fatalf("topics %d, want %d", len(got.Topics), len(in.Topics))
	}
	for i := range got.Topics {
		if got.Topics[i].Topic != n.prefix+in.Topics[i].Topic {
			t.Fatalf("topic %q from %q", got.Topics[i].Topic, in.Topics[i].Topic)
		}
		for j := range got.Topics[i].Partitions {
			if string(got.Topics[i].Partitions[j].Records) != string(in.Topics[i].Partitions[j].Records) {
				t.Fatal("records changed")
			}
		}
	}
	if (in.TransactionID == nil) != (got.TransactionID == nil) || in.TransactionID != nil && *got.TransactionID != n.prefix+*in.TransactionID {
		t.Fatalf("transactional id %v from %v", got.TransactionID, in.TransactionID)
	}
}

// vcHeaderBytes is a size prefix (to be filled) and a request header
// with client id "c".
func vcHeaderBytes(key, version int16) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, 7)
	b = append(b, 0, 1, 'c')
	if wire.IsFlexible(key, version) {
		b = append(b, 0)
	}
	return b
}

func vcHeader(t *testing.T, key, version int16) wire.RequestHeader {
	hb := vcHeaderBytes(key, version)
	binary.BigEndian.PutUint32(hb, uint32(len(hb)-4))
	h, err := wire.ParseRequestHeader(hb[4:])
	if err != nil {
		t.Fatalf("header: %v", err)
	}
	return h
}

// TestVClusterProduceWalk: the Produce header walk prefixes names and
// the transactional id, keeps records, leaves empty names to the decoded
// path and fails on truncated bodies.
func TestVClusterProduceWalk(t *testing.T) {
	for _, v := range []int16{3, 8, 9, 12} {
		p := kmsg.NewPtrProduceRequest()
		p.SetVersion(v)
		txn := "tx"
		p.TransactionID = &txn
		p.Acks = -1
		for _, name := range []string{"orders", "team-b.x"} {
			tp := kmsg.NewProduceRequestTopic()
			tp.Topic = name
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Records = []byte("not really a batch, moved as it is")
			tp.Partitions = append(tp.Partitions, pp)
			p.Topics = append(p.Topics, tp)
		}
		n := &vcNames{prefix: "team-a.", ids: &topicIDView{m: map[[16]byte]string{}}}
		checkProduceRewrite(t, n, v, p.AppendTo(nil))
		// The walk did rewrite: checkProduceRewrite returns early on error.
		frame := append(vcHeaderBytes(0, v), p.AppendTo(nil)...)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		if _, _, err := vcProduceFrame(nil, vcHeader(t, 0, v), frame, vcTestNames()); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		// Empty names are left to the decoded path, which refuses them.
		p.Topics[0].Topic = ""
		frame = append(vcHeaderBytes(0, v), p.AppendTo(nil)...)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		if _, empty, err := vcProduceFrame(nil, vcHeader(t, 0, v), frame, vcTestNames()); err != nil || !empty {
			t.Errorf("v%d empty name: empty %v err %v", v, empty, err)
		}
		// Truncated bodies fail, never panic.
		for i := range len(frame) - 4 {
			vcProduceFrame(nil, vcHeader(t, 0, v), frame[:4+i], vcTestNames())
		}
	}
}

// TestVClusterWriteSeeds writes the fuzz seed corpus (run with
// TOLLGATE_WRITE_VC_SEEDS=1); otherwise it is skipped.
func TestVClusterWriteSeeds(t *testing.T) {
	if os.Getenv("TOLLGATE_WRITE_VC_SEEDS") == "" {
		t.Skip("set TOLLGATE_WRITE_VC_SEEDS=1 to rewrite testdata/fuzz/FuzzVClusterRewrite")
	}
	txn, re, topic := "tx", "ord.*", "orders"
	var reqs []kmsg.Request
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(9)
	p.TransactionID = &txn
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = []byte("records")
	tp.Partitions = append(tp.Partitions, pp)
	p.Topics = append(p.Topics, tp)
	reqs = append(reqs, p)
	fr := kmsg.NewPtrFetchRequest()
	fr.SetVersion(13)
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = [16]byte{9}
	ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
	fr.Topics = append(fr.Topics, ft)
	fr.ForgottenTopics = append(fr.ForgottenTopics, kmsg.FetchRequestForgottenTopic{TopicID: [16]byte{3}, Partitions: []int32{1}})
	reqs = append(reqs, fr)
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}, {TopicID: [16]byte{4}}}
	reqs = append(reqs, md)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.SetVersion(8)
	oc.Group = "g"
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic}}
	reqs = append(reqs, oc)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group = "g"
	hb.SubscribedTopicRegex = &re
	reqs = append(reqs, hb)
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(7)
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}}
	reqs = append(reqs, ct)
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.SetVersion(4)
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: 2, ResourceName: topic}, {ResourceType: 4, ResourceName: "0"}}
	reqs = append(reqs, dc)
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.SetVersion(2)
	bad := "x)|(.*"
	lt.TransactionalIDPattern = &bad
	reqs = append(reqs, lt)
	dir := filepath.Join("testdata", "fuzz", "FuzzVClusterRewrite")
	for i, r := range reqs {
		body := r.AppendTo(nil)
		data := fmt.Sprintf("go test fuzz v1\nint16(%d)\nint16(%d)\n[]byte(%q)\n", r.Key(), r.GetVersion(), body)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d-%s", i, kmsg.NameForKey(r.Key()))), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestVClusterRegex: a tenant regex is matched by the broker against
// whole upstream names; the scoped form matches only the tenant's, and a
// regex that would close the gateway's group does not parse.
func TestVClusterRegex(t *testing.T) {
	n := &vcNames{prefix: "team-a."}
	for _, bad := range []string{"x)|(.*", "(", `\`, "a)(?:.*"} {
		if re, ok := n.regex(bad); ok {
			t.Errorf("regex %q accepted as %q", bad, re)
		}
	}
	for _, tc := range []struct {
		re   string
		in   []string
		out  []string
		back string
	}{
		{"ord.*", []string{"team-a.orders"}, []string{"team-b.orders", "orders", "xteam-a.orders"}, ""},
		{"^ord.*$", []string{"team-a.orders"}, []string{"team-b.orders", "orders"}, ""},
		{`\Aord.*\z`, []string{"team-a.orders"}, []string{"team-b.orders"}, ""},
		{".*", []string{"team-a.x", "team-a.team-b.x"}, []string{"team-b.x", "team-a"}, ""},
		{"a|.*", []string{"team-a.a", "team-a.zz"}, []string{"team-b.a", "a"}, ""},
		{`(?s).*`, []string{"team-a.x"}, []string{"team-b.x"}, ""},
	} {
		scoped, ok := n.regex(tc.re)
		if !ok {
			t.Fatalf("%q refused", tc.re)
		}
		re := regexp.MustCompile("^(?:" + scoped + ")$") // Kafka matches whole names
		for _, s := range tc.in {
			if !re.MatchString(s) {
				t.Errorf("%q (%q) does not match %q", tc.re, scoped, s)
			}
		}
		for _, s := range tc.out {
			if re.MatchString(s) {
				t.Errorf("%q (%q) matches %q", tc.re, scoped, s)
			}
		}
		back := scoped
		if !n.regexDown(&back) {
			t.Errorf("%q: regexDown refused its own form", scoped)
		}
	}
}

// BenchmarkVCProduceFrame: the Produce header walk over a 1 MiB request
// of 16 partitions (the copy is the cost; no allocation per record).
func BenchmarkVCProduceFrame(b *testing.B) {
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(9)
	p.Acks = -1
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "orders"
	for i := range 16 {
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition = int32(i)
		pp.Records = make([]byte, 64<<10)
		tp.Partitions = append(tp.Partitions, pp)
	}
	p.Topics = append(p.Topics, tp)
	frame := append(vcHeaderBytes(0, 9), p.AppendTo(nil)...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	hb := vcHeaderBytes(0, 9)
	binary.BigEndian.PutUint32(hb, uint32(len(hb)-4))
	h, _ := wire.ParseRequestHeader(hb[4:])
	buf := make([]byte, 0, vcProduceCap(len(frame), "team-a."))
	n := vcTestNames()
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := vcProduceFrame(buf[:0], h, frame, n); err != nil {
			b.Fatal(err)
		}
	}
}

func vcTestNames() *vcNames {
	return &vcNames{prefix: "team-a.", ids: &topicIDView{m: map[[16]byte]string{}}, mask: [16]byte{1}}
}

// TestVClusterProduceIDsInPlace: a Produce v13+ request without a
// transactional id goes on as it was read, its foreign topic ids masked
// in place and its own and its records untouched; with a transactional
// id it is left to the copying walk; a truncated one fails unchanged.
func TestVClusterProduceIDsInPlace(t *testing.T) {
	own, foreign := [16]byte{1, 2, 3}, [16]byte{9, 8, 7}
	for _, v := range []int16{13} {
		n := vcTestNames()
		n.mask = [16]byte{0x5a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
		n.learn(own, "team-a.orders")
		n.learn(foreign, "team-b.orders")
		p := kmsg.NewPtrProduceRequest()
		p.SetVersion(v)
		p.Acks = 1
		for _, id := range [][16]byte{own, foreign} {
			tp := kmsg.NewProduceRequestTopic()
			tp.TopicID = id
			for i := range 2 {
				pp := kmsg.NewProduceRequestTopicPartition()
				pp.Partition = int32(i)
				pp.Records = []byte(fmt.Sprintf("records of partition %d, moved as they are", i))
				tp.Partitions = append(tp.Partitions, pp)
			}
			p.Topics = append(p.Topics, tp)
		}
		frame := append(vcHeaderBytes(0, v), p.AppendTo(nil)...)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		h := vcHeader(t, 0, v)
		inPlace, err := vcProduceIDs(h, frame, n)
		if err != nil || !inPlace {
			t.Fatalf("v%d: in place %v, err %v", v, inPlace, err)
		}
		got := kmsg.NewPtrProduceRequest()
		got.SetVersion(v)
		if err := got.ReadFrom(frame[4+h.Len:]); err != nil {
			t.Fatalf("v%d: the masked frame does not decode: %v", v, err)
		}
		masked := foreign
		for i := range masked {
			masked[i] ^= n.mask[i]
		}
		if got.Topics[0].TopicID != own || got.Topics[1].TopicID != masked {
			t.Fatalf("v%d: ids %x %x, want own %x kept and foreign masked to %x", v, got.Topics[0].TopicID, got.Topics[1].TopicID, own, masked)
		}
		for i := range got.Topics {
			for j := range got.Topics[i].Partitions {
				if string(got.Topics[i].Partitions[j].Records) != string(p.Topics[i].Partitions[j].Records) {
					t.Fatalf("v%d: records changed", v)
				}
			}
		}

		// A transactional id grows by the prefix: not in place, unchanged.
		txn := "tx"
		p.TransactionID = &txn
		frame = append(vcHeaderBytes(0, v), p.AppendTo(nil)...)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		before := string(frame)
		if inPlace, err := vcProduceIDs(h, frame, n); err != nil || inPlace || string(frame) != before {
			t.Fatalf("v%d with a transactional id: in place %v, err %v, changed %v", v, inPlace, err, string(frame) != before)
		}

		// Truncated: an error, and nothing masked.
		p.TransactionID = nil
		frame = append(vcHeaderBytes(0, v), p.AppendTo(nil)...)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		for cut := 4 + h.Len; cut < len(frame)-1; cut++ {
			part := append([]byte(nil), frame[:cut]...)
			before := string(part)
			if _, err := vcProduceIDs(h, part, n); err == nil && cut < len(frame)-2 {
				// Only the request's trailing tags may be missing.
				t.Fatalf("v%d cut at %d of %d: no error", v, cut, len(frame))
			}
			if string(part) != before {
				t.Fatalf("v%d cut at %d: a truncated frame was changed", v, cut)
			}
		}
	}
}
