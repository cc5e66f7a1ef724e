package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDedupeMergesPartitions(t *testing.T) {
	req := kmsg.NewPtrListOffsetsRequest()
	for _, tp := range []struct {
		topic string
		parts []int32
	}{{"a", []int32{0, 1}}, {"b", []int32{0}}, {"a", []int32{1, 2}}, {"a", []int32{0}}} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = tp.topic
		for _, p := range tp.parts {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	dedupeRequest(req)
	got := ""
	for _, rt := range req.Topics {
		got += rt.Topic + ":"
		for _, p := range rt.Partitions {
			got += fmt.Sprint(p.Partition)
		}
		got += " "
	}
	if got != "a:012 b:0 " {
		t.Fatalf("deduped to %q", got)
	}
	all := kmsg.NewPtrMetadataRequest() // nil topics: all topics, left nil
	dedupeRequest(all)
	if all.Topics != nil {
		t.Fatal("a request for all topics became a request for none")
	}
}

// FuzzDedupe: the result keeps exactly the first occurrence of each name,
// in order.
func FuzzDedupe(f *testing.F) {
	f.Add([]byte("aabacb"))
	f.Add([]byte{})
	f.Add([]byte("x"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var names, want []string
		seen := map[string]bool{}
		for _, c := range in {
			n := string(rune('a' + c%8))
			names = append(names, n)
			if !seen[n] {
				seen[n] = true
				want = append(want, n)
			}
		}
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = slices.Clone(names)
		dedupeRequest(req)
		if !slices.Equal(req.Groups, want) && !(len(want) == 0 && len(req.Groups) == 0) {
			t.Fatalf("%v deduped to %v, want %v", names, req.Groups, want)
		}
	})
}

// TestDuplicateNamesAnsweredOnce: repeated names cost one entry of work
// and of response: Metadata, DescribeGroups, and CreateTopics (whose
// repeated name is INVALID_REQUEST, once).
func TestDuplicateNamesAnsweredOnce(t *testing.T) {
	_, srv := newBroker(t)
	createTopic(t, srv.addr(), "dup", 1, nil)
	cl := newClient(t, srv.addr())
	ctx := testCtx(t)
	md := kmsg.NewPtrMetadataRequest()
	for range 10000 {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("dup")
		md.Topics = append(md.Topics, mt)
	}
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("Metadata naming a topic 10000 times answered %d entries", len(mresp.Topics))
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	for range 1000 {
		dg.Groups = append(dg.Groups, "g")
	}
	dresp, err := dg.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Groups) != 1 {
		t.Fatalf("DescribeGroups naming a group 1000 times answered %d entries", len(dresp.Groups))
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 5000
	for range 3 {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "twice", 1, 1
		ct.Topics = append(ct.Topics, rt)
	}
	cresp, err := ct.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(cresp.Topics) != 1 || cresp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("CreateTopics with a name three times: %+v", cresp.Topics)
	}
}
