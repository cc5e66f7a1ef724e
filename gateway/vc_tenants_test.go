package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Two tenants through one gateway at the same time, each on its own
// virtual cluster (README, "Virtual clusters"), using the same names
// ("orders", "g", "tx") and one name of its own. Every connection of
// each goes through a leak tap (vc_leak_test.go); at the end the
// backend, read with no virtual cluster, must hold every name under its
// tenant's prefix.

var vcTenants = []vcTenant{
	{name: "team-a", prefix: "team-a.", own: "a-only", source: "127.0.0.1"},
	{name: "team-b", prefix: "team-b.", own: "b-only", source: "127.0.0.2"},
}

type vcTenant struct {
	name, prefix string
	own          string // a topic only this tenant has
	source       string // the client's source address (single-port mode matches on it)
}

// The names each tenant uses; all but own are shared by both tenants.
const (
	vcTopic    = "orders"
	vcGroup    = "g"
	vcGroup848 = "g848"
	vcGroupRE  = "gre"
	vcGroupRE8 = "gre848"
	vcTxnID    = "tx"
	// vcRegex848 is the broker-side (KIP-848) regex subscription. It is
	// not anchored: "^ord.*" matches nothing through a virtual cluster
	// yet (the scoped regex puts the prefix before the ^; i21-check's
	// note, bug 1).
	vcRegex848  = "ord.*"
	vcRecords   = 30 // plain records per tenant to vcTopic
	vcTxRecords = 10 // committed transactional records per tenant
)

func (tn vcTenant) owned() []string {
	return []string{vcTopic, tn.own, vcGroup, vcGroup848, vcGroupRE, vcGroupRE8, vcTxnID}
}

// vcSetup is one gateway with both tenants' virtual clusters.
type vcSetup struct {
	seeds   map[string]string // tenant -> seed address
	dial    map[string]dialFunc
	backend func(t *testing.T) *kadm.Client // an admin client with no virtual cluster
}

func TestVirtualClustersTwoTenants(t *testing.T) {
	modes := []struct {
		name    string
		builtin bool
		setup   func(t *testing.T, builtin bool) *vcSetup
	}{
		{"kfake/port-per-broker", false, vcPortPerBroker},
		{"kfake/single-port", false, vcSinglePort},
		{"kfake/sni", false, vcSNI},
		{"builtin/port-per-broker", true, vcPortPerBroker},
		{"builtin/sni", true, vcSNI},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			s := m.setup(t, m.builtin)
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			taps := map[string]*leakTap{}
			var wg sync.WaitGroup
			errs := make([]error, len(vcTenants))
			for i, tn := range vcTenants {
				tap := newLeakTap("team-a.", "team-b.")
				taps[tn.name] = tap
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = vcWorkload(ctx, tn, tap, s.seeds[tn.name], s.dial[tn.name])
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("%s: %v", vcTenants[i].name, err)
				}
			}
			bctx, bcancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer bcancel()
			vcCheckBackend(bctx, t, s.backend(t), taps)
		})
	}
}

// upstreamFor starts the backend part of a configuration: a 3-broker
// kfake cluster (its upstream section), or the built-in broker's.
func upstreamFor(t *testing.T, builtin bool) (section string, direct func(t *testing.T) *kadm.Client) {
	t.Helper()
	if builtin {
		return "broker: { data_dir: " + t.TempDir() + " }\n", nil
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return "upstream: { bootstrap: [" + c.ListenAddrs()[0] + "] }\n", func(t *testing.T) *kadm.Client {
		return adminAt(t, c.ListenAddrs()[0], nil)
	}
}

func adminAt(t *testing.T, seed string, dial dialFunc) *kadm.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(seed)}
	if dial != nil {
		opts = append(opts, kgo.Dialer(dial))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// fromSource dials from a given local address (127.0.0.2 is loopback too).
func fromSource(ip string) dialFunc {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return d.DialContext
}

// vcPortPerBroker: a listener per tenant (match: listener), and a plain
// one for the backend's view.
func vcPortPerBroker(t *testing.T, builtin bool) *vcSetup {
	up, direct := upstreamFor(t, builtin)
	base := ""
	if !builtin {
		base = ", broker_port_base: 0"
	}
	g := startFrom(t, fmt.Sprintf(`
listeners:
  - { name: la, listen: "127.0.0.1:0"%[1]s }
  - { name: lb, listen: "127.0.0.1:0"%[1]s }
  - { name: ops, listen: "127.0.0.1:0"%[1]s }
%[2]sadmin: { listen: "off" }
virtual_clusters:
  - { name: team-a, match: { listener: la }, prefix: "team-a." }
  - { name: team-b, match: { listener: lb }, prefix: "team-b." }
`, base, up))
	s := &vcSetup{
		seeds: map[string]string{"team-a": g.Server.Addr(0).String(), "team-b": g.Server.Addr(1).String()},
		dial:  map[string]dialFunc{},
	}
	ops := g.Server.Addr(2).String()
	s.backend = func(t *testing.T) *kadm.Client {
		if direct != nil {
			return direct(t)
		}
		return adminAt(t, ops, nil)
	}
	return s
}

// vcSinglePort: one single-port listener, the tenants told apart by
// their source address (and the listener: all given must hold).
func vcSinglePort(t *testing.T, builtin bool) *vcSetup {
	up, direct := upstreamFor(t, builtin)
	g := startFrom(t, `
listeners:
  - { name: t, listen: "127.0.0.1:0", brokers: single-port }
`+up+`admin: { listen: "off" }
virtual_clusters:
  - { name: team-a, match: { listener: t, address: 127.0.0.1/32 }, prefix: "team-a." }
  - { name: team-b, match: { listener: t, address: 127.0.0.2 }, prefix: "team-b." }
`)
	addr := g.Server.Addr(0).String()
	return &vcSetup{
		seeds:   map[string]string{"team-a": addr, "team-b": addr},
		dial:    map[string]dialFunc{"team-a": fromSource("127.0.0.1"), "team-b": fromSource("127.0.0.2")},
		backend: direct,
	}
}

// vcSNI: one sni listener; team-a.kafka.test and team-b.kafka.test are
// the tenants' bootstrap names (match: sni), their brokers
// team-a.bN.kafka.test and team-b.bN.kafka.test. A plain listener
// gives the built-in broker's backend view.
func vcSNI(t *testing.T, builtin bool) *vcSetup {
	up, direct := upstreamFor(t, builtin)
	dir := t.TempDir()
	ca := newFileCA(t)
	names := []string{"kafka.test", "*.kafka.test"}
	for _, tn := range vcTenants {
		for node := range 3 {
			names = append(names, fmt.Sprintf("%s.b%d.kafka.test", tn.name, node))
		}
	}
	cert, key := ca.write(t, dir, "sni", names...)
	g := startFrom(t, fmt.Sprintf(`
listeners:
  - name: t
    listen: "127.0.0.1:0"
    brokers: sni
    sni: { bootstrap_host: kafka.test, broker_host: "b{node}.kafka.test" }
    tls: { cert: %s, key: %s }
  - { name: ops, listen: "127.0.0.1:0" }
%sadmin: { listen: "off" }
virtual_clusters:
  - { name: team-a, match: { sni: "team-a.*" }, prefix: "team-a." }
  - { name: team-b, match: { sni: "team-b.*" }, prefix: "team-b." }
`, cert, key, up))
	_, port, _ := net.SplitHostPort(g.Server.Addr(0).String())
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		var d net.Dialer
		raw, err := d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			return nil, err
		}
		tc := tls.Client(raw, &tls.Config{RootCAs: ca.pool, ServerName: host})
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return tc, nil
	}
	ops := g.Server.Addr(1).String()
	s := &vcSetup{
		seeds: map[string]string{"team-a": "team-a.kafka.test:" + port, "team-b": "team-b.kafka.test:" + port},
		dial:  map[string]dialFunc{"team-a": dial, "team-b": dial},
	}
	s.backend = func(t *testing.T) *kadm.Client {
		if direct != nil {
			return direct(t)
		}
		return adminAt(t, ops, nil)
	}
	return s
}

// vcWorkload is one tenant's session: topics created, records produced
// plain and in transactions (one committed, one aborted), consumed by a
// classic group, a KIP-848 group and regex subscriptions of both kinds,
// and then everything listed and described. Every record's value
// starts with the tenant's name, so a record of the other tenant's is
// seen.
func vcWorkload(ctx context.Context, tn vcTenant, tap *leakTap, seed string, dial dialFunc) error {
	newClient := func(opts ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed), kgo.Dialer(tap.Dialer(dial)),
			kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)...)
	}
	admCl, err := newClient()
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	for _, topic := range []string{vcTopic, tn.own} {
		if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
			return fmt.Errorf("create %s: %w", topic, err)
		}
	}

	prod, err := newClient(kgo.DefaultProduceTopic(vcTopic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return err
	}
	defer prod.Close()
	for i := range vcRecords {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s %d", tn.name, i))).FirstErr(); err != nil {
			return fmt.Errorf("produce %d: %w", i, err)
		}
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: tn.own, Value: []byte(tn.name + " own")}).FirstErr(); err != nil {
		return fmt.Errorf("produce to %s: %w", tn.own, err)
	}

	txn, err := newClient(kgo.DefaultProduceTopic(vcTopic), kgo.TransactionalID(vcTxnID))
	if err != nil {
		return err
	}
	defer txn.Close()
	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := txn.BeginTransaction(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		for i := range vcTxRecords {
			v := fmt.Sprintf("%s tx %d committed=%v", tn.name, i, bool(commit))
			if err := txn.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				return fmt.Errorf("transactional produce: %w", err)
			}
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			return fmt.Errorf("end transaction (commit %v): %w", commit, err)
		}
	}

	want := vcRecords + vcTxRecords
	consumers := []struct {
		group string
		opts  []kgo.Opt
	}{
		{vcGroup, []kgo.Opt{kgo.ConsumeTopics(vcTopic)}},
		{vcGroup848, []kgo.Opt{kgo.ConsumeTopics(vcTopic), kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())}},
		{vcGroupRE, []kgo.Opt{kgo.ConsumeRegex(), kgo.ConsumeTopics("^ord.*")}},
		{vcGroupRE8, []kgo.Opt{kgo.ConsumeRegex(), kgo.ConsumeTopics(vcRegex848), kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())}},
	}
	for _, c := range consumers {
		if err := vcConsume(ctx, newClient, tn, c.group, want, c.opts); err != nil {
			return err
		}
	}

	// A curious tenant's admin session.
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	if got := topics.Names(); !sameSet(got, []string{vcTopic, tn.own}) {
		return fmt.Errorf("ListTopics shows %v, want [%s %s]", got, vcTopic, tn.own)
	}
	if _, err := adm.DescribeTopicConfigs(ctx, topics.Names()...); err != nil {
		return fmt.Errorf("describe configs: %w", err)
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	if got := groups.Groups(); !sameSet(got, []string{vcGroup, vcGroup848, vcGroupRE, vcGroupRE8}) {
		return fmt.Errorf("ListGroups shows %v", got)
	}
	described, err := adm.DescribeGroups(ctx, groups.Groups()...)
	if err != nil {
		return fmt.Errorf("describe groups: %w", err)
	}
	if err := described.Error(); err != nil {
		return fmt.Errorf("describe groups: %w", err)
	}
	if _, err := adm.DescribeConsumerGroups(ctx, vcGroup848, vcGroupRE8); err != nil {
		return fmt.Errorf("describe consumer groups: %w", err)
	}
	offsets, err := adm.FetchOffsets(ctx, vcGroup)
	if err != nil {
		return fmt.Errorf("fetch offsets: %w", err)
	}
	if err := offsets.Error(); err != nil {
		return fmt.Errorf("fetch offsets: %w", err)
	}
	for topic := range offsets.Offsets() {
		if topic != vcTopic {
			return fmt.Errorf("group %s has offsets for %q", vcGroup, topic)
		}
	}
	txns, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		return fmt.Errorf("list transactions: %w", err)
	}
	if got := txns.TransactionalIDs(); !sameSet(got, []string{vcTxnID}) {
		return fmt.Errorf("ListTransactions shows %v, want [%s]", got, vcTxnID)
	}
	if _, err := adm.DescribeTransactions(ctx, vcTxnID); err != nil {
		return fmt.Errorf("describe transactions: %w", err)
	}
	// The other tenant's names, asked for: not there.
	other := vcTenants[0]
	if other.name == tn.name {
		other = vcTenants[1]
	}
	probe, err := adm.ListTopics(ctx, other.own, other.prefix+vcTopic)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	for name, d := range probe {
		if d.Err == nil {
			return fmt.Errorf("topic %q of the other tenant is visible", name)
		}
	}
	return nil
}

// vcConsume reads want records from vcTopic with a group, committing
// them, and checks every one is the tenant's and committed.
func vcConsume(ctx context.Context, newClient func(...kgo.Opt) (*kgo.Client, error), tn vcTenant, group string, want int, opts []kgo.Opt) error {
	cl, err := newClient(append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("group %s: %d of %d records: %w", group, got, want, err)
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("group %s: fetch %s[%d]: %w", group, topic, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		for _, r := range fs.Records() {
			v := string(r.Value)
			if r.Topic != vcTopic || !strings.HasPrefix(v, tn.name+" ") || strings.Contains(v, "committed=false") {
				return fmt.Errorf("group %s read %q from %s", group, v, r.Topic)
			}
			got++
		}
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("group %s: commit: %w", group, err)
	}
	return nil
}

func sameSet(got, want []string) bool {
	g, w := append([]string(nil), got...), append([]string(nil), want...)
	sort.Strings(g)
	sort.Strings(w)
	return strings.Join(g, ",") == strings.Join(w, ",")
}

// vcCheckBackend reads the backend with no virtual cluster: every
// topic, group and transactional id carries a tenant's prefix (or is
// internal, "__"), each tenant's names are all there, and neither
// tenant's tap saw a prefixed or a foreign name or topic id.
func vcCheckBackend(ctx context.Context, t *testing.T, adm *kadm.Client, taps map[string]*leakTap) {
	t.Helper()
	topics, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		t.Fatalf("backend: list topics: %v", err)
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("backend: list groups: %v", err)
	}
	txns, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatalf("backend: list transactions: %v", err)
	}
	stored := map[string][]string{"topic": topics.Names(), "group": groups.Groups(), "transactional id": txns.TransactionalIDs()}
	have := map[string]bool{}
	for kind, names := range stored {
		for _, n := range names {
			have[n] = true
			if !strings.HasPrefix(n, "team-a.") && !strings.HasPrefix(n, "team-b.") && !strings.HasPrefix(n, "__") {
				t.Errorf("backend holds %s %q with no tenant's prefix", kind, n)
			}
		}
	}
	for _, tn := range vcTenants {
		for _, n := range tn.owned() {
			if !have[tn.prefix+n] {
				t.Errorf("backend lacks %s%s", tn.prefix, n)
			}
		}
		foreignIDs := map[[16]byte]string{}
		for name, d := range topics {
			if !strings.HasPrefix(name, tn.prefix) {
				foreignIDs[d.ID] = name
			}
		}
		tap := taps[tn.name]
		for _, l := range tap.Leaks() {
			t.Errorf("%s leak: %s", tn.name, l)
		}
		for _, f := range tap.Foreign(tn.owned(), foreignIDs) {
			t.Errorf("%s: %s", tn.name, f)
		}
		if keys := tap.Keys(); len(keys) < 15 {
			t.Errorf("%s: the tap decoded responses of only %d keys: %v", tn.name, len(keys), keys)
		}
	}
}
