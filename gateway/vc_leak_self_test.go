package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tapClient is a kgo client whose every connection goes through tap.
func tapClient(t *testing.T, tap *leakTap, seed string, dial dialFunc, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed), kgo.Dialer(tap.Dialer(dial))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// browse is what a curious tenant does with an admin client: list and
// describe everything it can see.
func browse(ctx context.Context, t *testing.T, adm *kadm.Client) {
	t.Helper()
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	if _, err := adm.DescribeTopicConfigs(ctx, topics.Names()...); err != nil {
		t.Fatalf("describe configs: %v", err)
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	if _, err := adm.DescribeGroups(ctx, groups.Groups()...); err != nil {
		t.Fatalf("describe groups: %v", err)
	}
	txns, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatalf("list transactions: %v", err)
	}
	if _, err := adm.DescribeTransactions(ctx, txns.TransactionalIDs()...); err != nil {
		t.Fatalf("describe transactions: %v", err)
	}
}

// TestLeakTapCatchesPlainGateway proves the leak tap can fail: through a
// plain gateway (no virtual cluster) over a cluster that holds two
// tenants' prefixed names, a client of tenant a (which uses team-a.
// names itself: those are echoes, not leaks) sees tenant b's, and the
// tap says so (prefixed names in listings and in the consumer protocol
// bytes DescribeGroups shows of b's group, foreign names and topic
// ids). The same traffic with no
// forbidden prefix and every name owned reports nothing, so the tap is
// not failing on anything else.
func TestLeakTapCatchesPlainGateway(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "team-a.orders", "team-b.orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	// Tenant b's group and transactional id, made directly on the cluster.
	direct, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("team-b.tx"),
		kgo.DefaultProduceTopic("team-b.orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if err := direct.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := direct.ProduceSync(ctx, kgo.StringRecord("b")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := direct.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// A member of tenant b's group stays in it: DescribeGroups shows its
	// subscription and assignment, the consumer protocol as bytes.
	member, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup("team-b.g"),
		kgo.ConsumeTopics("team-b.orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	for got := 0; got == 0; {
		fs := member.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("tenant b's member: %v", err)
		}
		got = fs.NumRecords()
	}
	details, err := kadm.NewClient(direct).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	foreignIDs := map[[16]byte]string{details["team-b.orders"].ID: "team-b.orders"}

	g := startFrom(t, `
listeners: [{ listen: "127.0.0.1:0", broker_port_base: 0 }]
upstream: { bootstrap: [`+c.ListenAddrs()[0]+`] }
admin: { listen: "off" }
`)
	seed := g.Server.Addr(0).String()

	run := func(tap *leakTap) {
		cl := tapClient(t, tap, seed, nil, kgo.ConsumerGroup("team-a.g2"), kgo.ConsumeTopics("team-a.orders"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("team-a.orders"))
		if err := cl.ProduceSync(ctx, kgo.StringRecord("a")).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for got := 0; got == 0; {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consume: %v", err)
			}
			got = fs.NumRecords()
		}
		browse(ctx, t, kadm.NewClient(cl))
		cl.Close()
	}

	tap := newLeakTap("team-a.", "team-b.")
	run(tap)
	leaks := strings.Join(tap.Leaks(), "\n")
	for _, want := range []string{
		`"team-b.orders" (contains "team-b.") in MetadataResponse.Topic`,
		`"team-b.g" (contains "team-b.") in ListGroupsResponse.Group`,
		`"team-b.tx" (contains "team-b.") in ListTransactionsResponse.TransactionalID`,
		`"team-b.orders" (contains "team-b.") in DescribeGroupsResponse.ProtocolMetadata.Topics`,
		`"team-b.orders" (contains "team-b.") in DescribeGroupsResponse.MemberAssignment.Topic`,
	} {
		if !strings.Contains(leaks, want) {
			t.Errorf("the tap missed %s; it reported:\n%s", want, leaks)
		}
	}
	foreign := strings.Join(tap.Foreign([]string{"orders"}, foreignIDs), "\n")
	for _, want := range []string{
		`foreign topic "team-b.orders" in MetadataResponse.Topic`,
		`foreign group "team-b.g" in ListGroupsResponse.Group`,
		`foreign transactional id "team-b.tx" in ListTransactionsResponse.TransactionalID`,
		`(team-b.orders) in MetadataResponse`,
	} {
		if !strings.Contains(foreign, want) {
			t.Errorf("Foreign missed %s; it reported:\n%s", want, foreign)
		}
	}

	// The control: the same traffic, nothing forbidden, every name owned.
	control := newLeakTap("team-c.")
	run(control)
	if l := control.Leaks(); len(l) > 0 {
		t.Errorf("the control reported leaks:\n%s", strings.Join(l, "\n"))
	}
	owned := []string{"team-a.orders", "team-b.orders", "team-b.g", "team-a.g2", "team-b.tx"}
	if f := control.Foreign(owned, nil); len(f) > 0 {
		t.Errorf("the control reported foreign names:\n%s", strings.Join(f, "\n"))
	}
	keys := control.Keys()
	for _, k := range []kmsg.Key{kmsg.ApiVersions, kmsg.Metadata, kmsg.Produce, kmsg.Fetch, kmsg.JoinGroup, kmsg.SyncGroup,
		kmsg.OffsetFetch, kmsg.ListGroups, kmsg.DescribeGroups, kmsg.ListTransactions, kmsg.DescribeTransactions,
		kmsg.DescribeConfigs, kmsg.FindCoordinator} {
		if keys[k.Int16()] == 0 {
			t.Errorf("the tap decoded no %s response", kmsg.NameForKey(k.Int16()))
		}
	}
}
