package proxy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/broker"
	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// The virtual-cluster tests run two tenants (team-a., team-b.) through
// one gateway, next to a plain listener that sees the real names, on
// both backends and in each listener mode.

// vcSetup is one gateway with a plain listener (0) and, per tenant, a
// way to reach it.
type vcSetup struct {
	srv *proxy.Server
	// direct is a kadm client that sees the backend's real names (kfake
	// itself, or the plain listener of a gateway over the built-in
	// broker).
	direct *kadm.Client
	// tenant returns kgo options that reach tenant a or b.
	tenant func(name string) []kgo.Opt
}

var vcClusters = []proxy.VirtualCluster{
	{Name: "team-a", Prefix: "team-a.", Listener: "a"},
	{Name: "team-b", Prefix: "team-b.", Listener: "b"},
}

// vcModes are the listener modes a tenant is reached through.
var vcModes = []string{"port-per-broker", "single-port", "sni"}

func startVC(t *testing.T, backendName, mode string) *vcSetup {
	t.Helper()
	vcs := slices.Clone(vcClusters)
	var lo []proxy.ListenerOptions
	var tenant func(string) []kgo.Opt
	var pool *x509.CertPool
	switch mode {
	case "sni":
		ca := newTestCA(t)
		pool = ca.pool
		cert := vcSNICert(t, ca)
		serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		lo = []proxy.ListenerOptions{
			{Name: "plain", Listen: "127.0.0.1:0", BrokerPortBase: 0},
			{Name: "tenants", Listen: "127.0.0.1:0", TLS: serverTLS, SNI: &proxy.SNIOptions{BootstrapHost: sniApex, BrokerHost: sniBrokerHost}},
		}
		for i := range vcs {
			vcs[i].Listener = "tenants"
			vcs[i].SNI = vcs[i].Name + ".*"
		}
	default:
		for _, name := range []string{"plain", "a", "b"} {
			l := proxy.ListenerOptions{Name: name, Listen: "127.0.0.1:0", BrokerPortBase: 0}
			if mode == "single-port" && name != "plain" {
				l.SinglePort = &proxy.SinglePortOptions{VirtualNode: 0}
			}
			lo = append(lo, l)
		}
	}
	s := &vcSetup{}
	opts := proxy.Options{Listeners: lo, Logger: testLogger(t), VirtualClusters: vcs}
	switch backendName {
	case "upstream":
		c := startUpstream(t, 3)
		opts.Bootstrap = c.ListenAddrs()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		s.direct = kadm.NewClient(cl)
	case "builtin":
		if mode == "single-port" {
			t.Skip("single-port is an upstream mode: the built-in broker is one broker already")
		}
		b, err := broker.Open(broker.Config{DataDir: t.TempDir(), Fsync: storage.FsyncNever, AutoCreateTopics: true, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		opts.Local = proxy.LocalFunc(func(remote string) proxy.LocalConn { return b.NewConn(remote) })
	}
	s.srv = startServer(t, opts)
	if s.direct == nil {
		s.direct = kadm.NewClient(newClient(t, s.srv, nil))
	}
	switch mode {
	case "sni":
		_, port, _ := net.SplitHostPort(s.srv.Addr(1).String())
		tenant = func(name string) []kgo.Opt {
			d := &sniDialer{pool: pool}
			return []kgo.Opt{kgo.SeedBrokers(net.JoinHostPort(name+"."+sniApex, port)), kgo.Dialer(d.dial)}
		}
	default:
		tenant = func(name string) []kgo.Opt {
			i := map[string]int{"team-a": 1, "team-b": 2}[name]
			return []kgo.Opt{kgo.SeedBrokers(s.srv.Addr(i).String())}
		}
	}
	s.tenant = tenant
	return s
}

// vcSNICert issues a certificate for both tenants' names: the bootstrap
// name and brokers 0-2 inside each tenant's pattern.
func vcSNICert(t testing.TB, ca *testCA) tls.Certificate {
	t.Helper()
	var names []string
	for _, vc := range vcClusters {
		names = append(names, vc.Name+"."+sniApex)
		for n := range 3 {
			names = append(names, fmt.Sprintf("%s.b%d.%s", vc.Name, n, sniApex))
		}
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: sniApex},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: names, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (s *vcSetup) client(t *testing.T, name string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(s.tenant(name), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestVirtualClusters: through team-a, a topic is created, produced to
// (plain and transactional), consumed by a group that commits; team-a
// sees its names unprefixed, the backend holds every one with the
// prefix, and team-b sees none of them.
func TestVirtualClusters(t *testing.T) {
	for _, b := range []string{"upstream", "builtin"} {
		for _, mode := range vcModes {
			t.Run(b+"/"+mode, func(t *testing.T) {
				testVirtualClusters(t, startVC(t, b, mode))
			})
		}
	}
}

func testVirtualClusters(t *testing.T, s *vcSetup) {
	ctx := ctxT(t, 60*time.Second)
	const topic, group, txid = "orders", "g1", "tx1"
	a := s.client(t, "team-a")
	adm := kadm.NewClient(a)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatalf("create %s through team-a: %v", topic, err)
	}
	for i := range 30 {
		if err := a.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint("v", i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	// A transaction: the transactional id and the group are scoped too.
	tx := s.client(t, "team-a", kgo.TransactionalID(txid), kgo.DefaultProduceTopic(topic))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, kgo.StringRecord("in-txn")).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// A classic group consumes everything and commits.
	c := s.client(t, "team-a", kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := 0
	for got < 31 {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 31: %v", got, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Errorf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic != topic {
				t.Errorf("record of topic %q", r.Topic)
			}
			got++
		})
	}
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit offsets: %v", err)
	}
	c.Close()

	// team-a's view: its names, unprefixed.
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); !slices.Equal(names, []string{topic}) {
		t.Errorf("team-a lists topics %v, want [%s]", names, topic)
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := groups.Groups(); !slices.Equal(g, []string{group}) {
		t.Errorf("team-a lists groups %v, want [%s]", g, group)
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); !ok || o.At <= 0 {
		var total int64
		offs.Each(func(o kadm.OffsetResponse) { total += o.At })
		if total == 0 {
			t.Errorf("team-a's group committed nothing on %s: %v", topic, offs)
		}
	}
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dg[group]; !ok {
		t.Errorf("describe groups: %v", dg)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := rc.On(topic, nil); err != nil || r.Name != topic {
		t.Errorf("describe configs of %s: %+v %v", topic, r, err)
	}

	// The backend holds every name with the prefix, and nothing unprefixed.
	real, err := s.direct.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !real.Has("team-a."+topic) || real.Has(topic) {
		t.Errorf("backend topics %v: want team-a.%s and no %s", real.Names(), topic, topic)
	}
	rg, err := s.direct.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := rg.Groups(); !slices.Contains(g, "team-a."+group) || slices.Contains(g, group) {
		t.Errorf("backend groups %v: want team-a.%s only", g, group)
	}
	if txs, err := s.direct.DescribeTransactions(ctx, "team-a."+txid); err != nil {
		t.Errorf("backend transactions: %v", err)
	} else if d, ok := txs["team-a."+txid]; !ok || d.Err != nil {
		t.Errorf("backend has no transactional id team-a.%s: %+v", txid, txs)
	}

	// team-b sees none of it.
	bAdm := kadm.NewClient(s.client(t, "team-b"))
	bt, err := bAdm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bt.Names()) != 0 {
		t.Errorf("team-b lists topics %v", bt.Names())
	}
	bg, err := bAdm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bg.Groups()) != 0 {
		t.Errorf("team-b lists groups %v", bg.Groups())
	}
	// Naming team-a's topic, prefixed or not, is naming its own.
	for _, name := range []string{topic, "team-a." + topic} {
		md, err := bAdm.ListTopics(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if d := md[name]; !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			t.Errorf("team-b asking for %q: %v (want UNKNOWN_TOPIC_OR_PARTITION)", name, d.Err)
		}
	}
	// An empty topic name is refused, not "team-a." upstream.
	resp, err := adm.CreateTopic(ctx, 1, 1, nil, "")
	if err == nil && resp.Err == nil {
		t.Error("creating topic \"\" succeeded")
	}
	if real, _ := s.direct.ListTopics(ctx); real.Has("team-a.") {
		t.Error("backend holds the topic \"team-a.\"")
	}
}

// TestVirtualClusterRefusals: a listener of virtual clusters refuses a
// connection that matches none; a key the table has no row for is
// answered with an error, never forwarded.
func TestVirtualClusterRefusals(t *testing.T) {
	c := startUpstream(t, 1)
	srv := startGateway(t, c, func(o *proxy.Options) {
		o.Listeners = append(o.Listeners, proxy.ListenerOptions{Name: "tenants", Listen: "127.0.0.1:0", BrokerPortBase: 0})
		o.VirtualClusters = []proxy.VirtualCluster{{Name: "team-a", Prefix: "team-a.", Listener: "tenants", Principal: "User:alice"}}
	})
	ctx := ctxT(t, 20*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(1).String()), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	if _, err := req.RequestWith(ctx, cl); err == nil {
		t.Fatal("an unauthenticated connection on a listener of virtual clusters got a Metadata answer")
	}
	// The plain listener serves the plain cluster.
	plain := newClient(t, srv, nil)
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, plain); err != nil {
		t.Fatalf("plain listener: %v", err)
	}
}

// TestVirtualClusterUnsupportedKey: DescribeAcls has no row: a tenant
// gets an error answer, and the upstream never sees the request.
func TestVirtualClusterUnsupportedKey(t *testing.T) {
	c := startUpstream(t, 1)
	seen := make(chan struct{}, 8)
	c.ControlKey(int16(kmsg.DescribeACLs), func(kmsg.Request) (kmsg.Response, error, bool) {
		seen <- struct{}{}
		return nil, nil, false
	})
	srv := startGateway(t, c, func(o *proxy.Options) {
		o.VirtualClusters = []proxy.VirtualCluster{{Name: "team-a", Prefix: "team-a.", Listener: "test"}}
	})
	ctx := ctxT(t, 20*time.Second)
	cl := newClient(t, srv, nil)
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode == 0 {
		t.Errorf("DescribeAcls answered without an error: %+v", resp)
	}
	if resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "virtual cluster team-a") {
		t.Errorf("message %v", resp.ErrorMessage)
	}
	select {
	case <-seen:
		t.Error("the upstream saw a DescribeAcls from a tenant")
	default:
	}
}

// TestVirtualClusterHostile: a tenant naming another's topic, asking for
// another's topic id (Metadata and Fetch), a regex built to escape its
// group, a topic that is only the prefix, and a malformed body.
func TestVirtualClusterHostile(t *testing.T) {
	for _, mode := range []string{"port-per-broker", "single-port"} {
		t.Run(mode, func(t *testing.T) { testVirtualClusterHostile(t, mode) })
	}
}

func testVirtualClusterHostile(t *testing.T, mode string) {
	s := startVC(t, "upstream", mode)
	ctx := ctxT(t, 30*time.Second)
	bAdm := kadm.NewClient(s.client(t, "team-b"))
	if _, err := bAdm.CreateTopic(ctx, 1, 1, nil, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.direct.CreateTopic(ctx, 1, 1, nil, "team-a."); err != nil {
		t.Fatal(err)
	}
	real, err := s.direct.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bID := real["team-b.x"].ID
	if bID == ([16]byte{}) {
		t.Fatalf("no id for team-b.x: %v", real.Names())
	}
	a := s.client(t, "team-a")

	// By name: team-b.x from team-a is team-a.team-b.x, which does not exist.
	md := kmsg.NewPtrMetadataRequest()
	name := "team-b.x"
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	resp, err := md.RequestWith(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("team-a's Metadata for team-b.x: %+v", resp.Topics)
	}
	// All topics: neither team-b's nor the topic that is only the prefix.
	all, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range all.Topics {
		t.Errorf("team-a lists topic %v (%x)", tp.Topic, tp.TopicID)
	}
	// By id: unknown, and no name.
	md = kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{TopicID: bID}}
	resp, err = md.RequestWith(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code || resp.Topics[0].Topic != nil {
		t.Errorf("team-a's Metadata for team-b's id: %+v", resp.Topics)
	}
	// Fetch by team-b's id: UNKNOWN_TOPIC_ID for the id asked.
	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(13)
	f.MaxWaitMillis, f.MaxBytes, f.SessionEpoch = 10, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = bID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	leader := real["team-b.x"].Partitions[0].Leader
	if mode == "single-port" {
		leader = 0 // the virtual broker
	}
	fr, err := a.Broker(int(leader)).Request(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	fresp := fr.(*kmsg.FetchResponse)
	if len(fresp.Topics) != 1 || fresp.Topics[0].TopicID != bID || len(fresp.Topics[0].Partitions) != 1 || fresp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("team-a's Fetch of team-b's id: %+v", fresp.Topics)
	}
	// Produce v13 to team-b's id (one topic, no transactional id: the
	// head-only path, vcProduceHeadID): UNKNOWN_TOPIC_ID for the id
	// asked, and nothing written to team-b.x.
	before, err := s.direct.ListEndOffsets(ctx, "team-b.x")
	if err != nil {
		t.Fatal(err)
	}
	pr := kmsg.NewPtrProduceRequest()
	pr.SetVersion(13)
	pr.Acks, pr.TimeoutMillis = 1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.TopicID = bID
	pp := kmsg.NewProduceRequestTopicPartition()
	// Larger than the read buffer: the head the gateway decides from is
	// a part of the frame, the rest spliced after it.
	pp.Records = testBatchOf(make([]byte, 512<<10)) // versions_test.go
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	prr, err := a.Broker(int(leader)).Request(ctx, pr)
	if err != nil {
		t.Fatal(err)
	}
	presp := prr.(*kmsg.ProduceResponse)
	if len(presp.Topics) != 1 || presp.Topics[0].TopicID != bID || len(presp.Topics[0].Partitions) != 1 || presp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("team-a's Produce v13 to team-b's id: %+v", presp.Topics)
	}
	after, err := s.direct.ListEndOffsets(ctx, "team-b.x")
	if err != nil {
		t.Fatal(err)
	}
	if b, a := before["team-b.x"][0].Offset, after["team-b.x"][0].Offset; a != b {
		t.Errorf("team-a's Produce v13 wrote to team-b.x: end offset %d -> %d", b, a)
	}
	// A regex that would close the gateway's group and match everything.
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.SetVersion(2)
	esc := "x)|(.*"
	lt.TransactionalIDPattern = &esc
	ltr, err := a.Broker(int(leader)).Request(ctx, lt)
	if err != nil {
		t.Fatal(err)
	}
	if code := ltr.(*kmsg.ListTransactionsResponse).ErrorCode; code != kerr.InvalidRegularExpression.Code {
		t.Errorf("ListTransactions with an escaping pattern: error %d", code)
	}

	// A malformed Produce body closes that connection only.
	c, err := net.Dial("tcp", s.srv.Addr(1).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var frame []byte
	frame = append(frame, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, 0, 1, 'c', 0) // Produce v9, corr 1, client "c", no tags
	frame = append(frame, 0x05, 'a', 'b')                                   // a transactional id of 4 bytes with 2
	frame[3] = byte(len(frame) - 4)
	c.Write(frame)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 64)); err == nil {
		t.Error("a malformed Produce got an answer")
	}
	if _, err := kadm.NewClient(a).ListTopics(ctx); err != nil {
		t.Errorf("team-a after a malformed request elsewhere: %v", err)
	}
}

// TestVirtualClusterPolicyAndLabels: a virtual cluster's own policy
// applies on top of the top-level one, in the tenant's names, and the
// cluster's requests are counted under its name.
func TestVirtualClusterPolicyAndLabels(t *testing.T) {
	eng, _, err := policy.Compile(configs.Policy{Default: configs.PolicyAllow, Rules: []configs.Rule{
		{Name: "no-secret", Action: configs.PolicyDeny, Match: configs.Match{Topic: &configs.StringMatch{Exact: configs.Patterns{"secret"}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c := startUpstream(t, 1, kfake.AllowAutoTopicCreation())
	srv := startGateway(t, c, func(o *proxy.Options) {
		o.Hooks = metrics.New(reg)
		o.VirtualClusters = []proxy.VirtualCluster{{Name: "team-a", Prefix: "team-a.", Address: netip.MustParsePrefix("127.0.0.0/8"), HasAddress: true, Policy: eng}}
	})
	ctx := ctxT(t, 20*time.Second)
	cl := newClient(t, srv, nil, kgo.AllowAutoTopicCreation(), kgo.RecordRetries(1))
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("produce to the tenant's denied topic: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "open", Value: []byte("x")}).FirstErr(); err != nil {
		t.Errorf("produce to an allowed topic: %v", err)
	}
	real := kadm.NewClient(newDirect(t, c))
	topics, err := real.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !topics.Has("team-a.open") || topics.Has("team-a.secret") || topics.Has("open") {
		t.Errorf("backend topics %v", topics.Names())
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var produced float64
	for _, mf := range mfs {
		if mf.GetName() != "tollgate_vcluster_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["virtual_cluster"] != "team-a" {
				t.Errorf("series labelled %v", labels)
			}
			if labels["api"] == "Produce" {
				produced += m.GetCounter().GetValue()
			}
		}
	}
	if produced == 0 {
		t.Error("no Produce counted under virtual_cluster team-a")
	}
}

func newDirect(t *testing.T, c *kfake.Cluster) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestVirtualClusterRefusalNames: a request the table refuses part way
// (a CreateTopics whose second topic name is empty, a DescribeConfigs
// whose second resource is a client-metrics one) is answered in the
// tenant's names: the answer (decoded with kmsg) never carries the
// prefix the rewrite had put on the names before the refusal, and the
// upstream never sees the request.
func TestVirtualClusterRefusalNames(t *testing.T) {
	c := startUpstream(t, 1)
	seen := make(chan int16, 8)
	for _, k := range []kmsg.Key{kmsg.CreateTopics, kmsg.DescribeConfigs} {
		c.ControlKey(int16(k), func(r kmsg.Request) (kmsg.Response, error, bool) {
			seen <- r.Key()
			return nil, nil, false
		})
	}
	srv := startGateway(t, c, func(o *proxy.Options) {
		o.VirtualClusters = []proxy.VirtualCluster{{Name: "team-a", Prefix: "team-a.", Listener: "test"}}
	})
	ctx := ctxT(t, 20*time.Second)
	cl := newClient(t, srv, nil)

	ct := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range []string{"orders", ""} {
		tp := kmsg.NewCreateTopicsRequestTopic()
		tp.Topic, tp.NumPartitions, tp.ReplicationFactor = name, 1, 1
		ct.Topics = append(ct.Topics, tp)
	}
	ctResp, err := ct.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tp := range ctResp.Topics {
		got = append(got, tp.Topic)
		if tp.ErrorCode == 0 {
			t.Errorf("CreateTopics %q answered without an error", tp.Topic)
		}
	}
	if !slices.Equal(got, []string{"orders", ""}) {
		t.Errorf("CreateTopics refused: answer names %q, want the tenant's [orders \"\"]", got)
	}

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"},
		{ResourceType: kmsg.ConfigResourceTypeClientMetrics, ResourceName: "m"},
	}
	dcResp, err := dc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, r := range dcResp.Resources {
		got = append(got, r.ResourceName)
	}
	if !slices.Equal(got, []string{"orders", "m"}) {
		t.Errorf("DescribeConfigs refused: answer names %q, want the tenant's [orders m]", got)
	}
	select {
	case k := <-seen:
		t.Errorf("the upstream saw a refused %s", kmsg.NameForKey(k))
	default:
	}
}
