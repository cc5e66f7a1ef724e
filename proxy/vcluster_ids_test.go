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

// TestVClusterInternalTopicsHidden: the cluster's internal topics hold
// every tenant's offsets and transactions; a tenant is shown none of
// them (README, "Internal topics"), as Kafka shows none to a principal
// without DESCRIBE on them: not in an all-topics listing, not by name
// (which is the tenant's own name, prefixed, and nothing is created
// for it), and not through a KIP-848 regex that matches every name.
func TestVClusterInternalTopicsHidden(t *testing.T) {
	s := startVC(t, "builtin", "port-per-broker")
	ctx := ctxT(t, 60*time.Second)
	a := s.client(t, "team-a")
	adm := kadm.NewClient(a)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	tx := s.client(t, "team-a", kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("orders"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// A KIP-848 group subscribed by a regex matching every name; it
	// commits, so the offsets topic exists.
	c := s.client(t, "team-a", kgo.ConsumerGroup("g"), kgo.ConsumeRegex(), kgo.ConsumeTopics(".*"),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for got := 0; got < 1; {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record consumed: %v", err)
		}
		fs.EachRecord(func(*kgo.Record) { got++ })
	}
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	internal := []string{"__consumer_offsets", "__transaction_state"}
	backend, err := s.direct.ListTopicsWithInternal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range internal {
		if !backend.Has(name) {
			t.Fatalf("the backend has no %s: nothing to hide (%v)", name, backend.Names())
		}
	}
	listed, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := listed.Names(); len(names) != 1 || names[0] != "orders" {
		t.Errorf("team-a lists %v, want [orders]", names)
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range internal {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range resp.Topics {
		if tp.ErrorCode == 0 || tp.IsInternal || len(tp.Partitions) > 0 {
			t.Errorf("team-a asked %v: error %d internal %v, %d partitions", tp.Topic, tp.ErrorCode, tp.IsInternal, len(tp.Partitions))
		}
	}
	for _, topic := range c.GetConsumeTopics() {
		if topic != "orders" {
			t.Errorf("the regex group consumes %q", topic)
		}
	}
	after, err := s.direct.ListTopicsWithInternal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range after.Names() {
		if name == "team-a.__consumer_offsets" || name == "team-a.__transaction_state" {
			t.Errorf("asking by name created %s", name)
		}
	}
}
