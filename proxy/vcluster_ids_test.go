package proxy_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestVClusterOffsetFetchUnlearntIDs: OffsetFetch v10+ of all a group's
// topics answers topic ids the tenant never named, and that the
// gateway's topic-id view may not have learnt yet (no tenant read a
// Metadata answer with them). Such an id is the tenant's or unknown:
// it goes to the tenant as it is, not "unmasked" into a random id (the
// web console's lag page then asked Metadata for an id nobody knows and
// kadm failed with "missing topic name and zero topic ID", about one
// run in four). An id the view knows as another tenant's is left out;
// an id the tenant named and the gateway masked comes back as named.
func TestVClusterOffsetFetchUnlearntIDs(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "team-a.orders", "team-b.secret"))
	ctx := ctxT(t, 20*time.Second)
	direct := kadm.NewClient(newDirect(t, c))
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "team-a.orders", Partition: 0, At: 5, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "team-b.secret", Partition: 0, At: 7, LeaderEpoch: -1})
	if _, err := direct.CommitOffsets(ctx, "team-a.g", offs); err != nil {
		t.Fatal(err)
	}
	td, err := direct.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ordersID, secretID := td["team-a.orders"].ID, td["team-b.secret"].ID

	srv := startGateway(t, c, func(o *proxy.Options) {
		o.Listeners = append(o.Listeners, proxy.ListenerOptions{Name: "b", Listen: "127.0.0.1:0", BrokerPortBase: 0})
		o.VirtualClusters = []proxy.VirtualCluster{
			{Name: "team-a", Prefix: "team-a.", Listener: "test"},
			{Name: "team-b", Prefix: "team-b.", Listener: "b"},
		}
	})
	fetchAll := func() *kmsg.OffsetFetchResponseGroup {
		t.Helper()
		cl := newClient(t, srv, nil) // a fresh client: no Metadata with topics read
		req := kmsg.NewPtrOffsetFetchRequest()
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "g"
		req.Groups = append(req.Groups, g)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version < 10 {
			t.Skipf("OffsetFetch v%d names topics; the ids path needs v10", resp.Version)
		}
		if len(resp.Groups) != 1 || resp.Groups[0].Group != "g" {
			t.Fatalf("groups %+v", resp.Groups)
		}
		return &resp.Groups[0]
	}
	ids := func(g *kmsg.OffsetFetchResponseGroup) map[[16]byte]int64 {
		m := map[[16]byte]int64{}
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				m[tp.TopicID] = p.Offset
			}
		}
		return m
	}

	// No tenant has read either id: both come as they are (the second
	// is another tenant's, but nothing tells the gateway yet).
	if got := ids(fetchAll()); got[ordersID] != 5 {
		t.Errorf("team-a's committed offset not under its topic's id %x: %v", ordersID, got)
	}
	// team-b reads its topic's id: team-a's listing leaves it out now.
	bcl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(1).String()))
	if err != nil {
		t.Fatal(err)
	}
	defer bcl.Close()
	if _, err := kadm.NewClient(bcl).ListTopics(ctx); err != nil {
		t.Fatal(err)
	}
	got := ids(fetchAll())
	if got[ordersID] != 5 {
		t.Errorf("team-a's committed offset not under its topic's id: %v", got)
	}
	if _, ok := got[secretID]; ok {
		t.Errorf("team-b's topic id %x in team-a's listing: %v", secretID, got)
	}

	// Named by id: another tenant's id is masked upstream and comes
	// back as the tenant sent it, unknown.
	cl := newClient(t, srv, nil)
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "g"
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.TopicID, rt.Partitions = secretID, []int32{0}
	g.Topics = append(g.Topics, rt)
	req.Groups = append(req.Groups, g)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range resp.Groups[0].Topics {
		if tp.TopicID != secretID {
			t.Errorf("asked %x, answered %x", secretID, tp.TopicID)
		}
		for _, p := range tp.Partitions {
			if p.Offset == 7 || (p.ErrorCode != kerr.UnknownTopicID.Code && p.ErrorCode != kerr.UnknownTopicOrPartition.Code) {
				t.Errorf("another tenant's topic by id: offset %d error %d", p.Offset, p.ErrorCode)
			}
		}
	}
}
