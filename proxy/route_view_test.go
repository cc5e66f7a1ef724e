package proxy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// An error that says the leaders may be out of date marks the view
// stale without emptying it: other sessions keep routing on the leaders
// it knew until a whole-cluster Metadata answer replaces them, which also
// drops the topics it no longer lists.
func TestViewStaleKeepsLeaders(t *testing.T) {
	v := newClusterView(&Server{})
	v.leaders["kept"] = map[int32]int32{0: 1}
	v.leaders["deleted"] = map[int32]int32{0: 2}
	v.invalidate(true, nil)
	if n, ok := v.leader("kept", 0); !ok || n != 1 || !v.isStale() {
		t.Fatalf("after invalidate: leader %d (known %v), stale %v; want the old leader and stale", n, ok, v.isStale())
	}
	md := kmsg.NewPtrMetadataResponse()
	tp := kmsg.NewMetadataResponseTopic()
	tp.Topic = kmsg.StringPtr("kept")
	p := kmsg.NewMetadataResponseTopicPartition()
	p.Partition, p.Leader = 0, 2
	tp.Partitions = append(tp.Partitions, p)
	md.Topics = append(md.Topics, tp)
	v.learnMetadata(md)
	v.forgetTopicsNotIn(md)
	if n, _ := v.leader("kept", 0); n != 2 || v.isStale() {
		t.Errorf("after the refresh: leader %d, stale %v; want 2 and fresh", n, v.isStale())
	}
	if _, ok := v.leader("deleted", 0); ok {
		t.Error("a topic the whole-cluster answer no longer lists kept its leader")
	}
}
