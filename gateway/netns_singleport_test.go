//go:build linux

package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The topics of the namespace test, each with one partition led by each
// of the three upstream brokers.
const (
	nsIn      = "ns-in"   // produced by the idempotent producer, read by the groups
	nsOut     = "ns-out"  // written by the transactional consume-transform-produce loop
	nsKcat    = "ns-kcat" // kcat's
	nsRecords = 30        // records produced to nsIn
	nsVirtual = 7         // the virtual node id: not a kfake id (0, 1, 2)
)

// TestSinglePortNetns: clients in a network namespace whose firewall lets
// them reach only the gateway's single-port listener — no upstream
// broker, no admin port, no port-per-broker broker port — still do
// everything the single-port tests do against the same 3-broker kfake:
// kadm sees one broker, an idempotent producer writes partitions led by
// all three brokers, a classic and a KIP-848 group consume and commit, a
// transactional consume-transform-produce loop commits, sarama and
// kafka-go produce and consume, kcat lists, produces and consumes, and
// records arrive exactly once while leaders and coordinators move. The
// clients are this test binary re-executed inside the namespace
// (TestNetnsHelper) and kcat. Controls: before the firewall every one of
// those ports is reachable from the namespace; after it, only the
// single-port one is, and the firewall counted a refusal for each other;
// a port-per-broker listener whose bootstrap port is opened too answers
// Metadata but cannot take a produce, because its broker ports stay
// closed. Needs root (skips otherwise).
func TestSinglePortNetns(t *testing.T) {
	ns := newNetns(t)
	s := startNetnsSetup(t, ns)
	t.Run("reachable before the firewall", s.reachableBefore)
	if t.Failed() {
		t.FailNow()
	}
	s.log.reset() // the probe above connected to the brokers from the namespace
	ns.lockDown(t, s.tunnel)
	t.Run("only the single-port listener after it", s.onlyTunnelAfter)
	t.Run("kgo and kadm", func(t *testing.T) {
		var res netnsClientsResult
		ns.helper(t, "clients", netnsClientsRequest{Bootstrap: s.tunnel}, &res)
		t.Logf("the clients in the namespace report %+v", res)
		res.check(t, s.tunnel)
	})
	t.Run("sarama and kafka-go", func(t *testing.T) {
		var res netnsPeersResult
		ns.helper(t, "sarama-kafka-go", netnsClientsRequest{Bootstrap: s.tunnel}, &res)
		t.Logf("sarama and kafka-go in the namespace report %+v", res)
		res.check(t, s.tunnel)
	})
	t.Run("kcat", func(t *testing.T) { nsKcatRound(t, ns, s.tunnel) })
	t.Run("leader and coordinator moves", func(t *testing.T) {
		var res netnsMovesResult
		ns.helperTalk(t, "moves", netnsClientsRequest{Bootstrap: s.tunnel}, &res, answerMoves(s.c))
		t.Logf("the clients in the namespace report %+v", res)
		res.check(t)
	})
	t.Run("port-per-broker stays closed", s.perBrokerClosed)
	s.upstreamSawAll(t)
}

// netnsSetup is what TestSinglePortNetns runs: the upstream and the
// gateway on the host end of the namespace's veth pair.
type netnsSetup struct {
	ns        *netns
	c         *kfake.Cluster // the upstream
	log       *acceptLog     // connections the upstream accepted
	nodes     *nsNodeCounter // upstream nodes that served each counted key
	tunnel    string         // the single-port listener
	perBroker string         // the port-per-broker listener's bootstrap
	closed    []string       // every other port: perBroker, the admin server, the kfake brokers
}

func startNetnsSetup(t *testing.T, ns *netns) *netnsSetup {
	t.Helper()
	s := &netnsSetup{ns: ns, log: &acceptLog{}}
	listen := func(network, _ string) (net.Listener, error) {
		ln, err := net.Listen(network, net.JoinHostPort(ns.hostIP, "0"))
		if err != nil {
			return nil, err
		}
		return loggingListener{ln, s.log}, nil
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ListenFn(listen), kfake.SeedTopics(3, nsIn, nsOut, nsKcat, nsSarama, nsKafkaGo, nsMove))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s.c = c
	for _, topic := range []string{nsIn, nsOut, nsKcat, nsSarama, nsKafkaGo, nsMove} {
		spreadLeaders(t, c, topic, 3)
	}
	s.nodes = countUpstreamNodes(c, kmsg.Produce, kmsg.Fetch, kmsg.ConsumerGroupHeartbeat, kmsg.EndTxn)
	g := startFrom(t, fmt.Sprintf(`
listeners:
  - name: tunnel
    listen: "%[1]s:0"
    brokers: single-port
    virtual_node: %[2]d
  - name: perbroker
    listen: "%[1]s:0"
    broker_port_base: 0
upstream: { bootstrap: [%[3]s] }
admin: { listen: "%[1]s:0" }
`, ns.hostIP, nsVirtual, strings.Join(c.ListenAddrs(), ", ")))
	s.tunnel, s.perBroker = g.Server.Addr(0).String(), g.Server.Addr(1).String()
	s.closed = append([]string{s.perBroker, g.AdminAddr().String()}, c.ListenAddrs()...)
	return s
}

// reachableBefore: without its firewall the namespace reaches every
// port, so the controls after it prove that the firewall closes them.
func (s *netnsSetup) reachableBefore(t *testing.T) {
	var res netnsProbeResult
	s.ns.helper(t, "probe", netnsProbeRequest{Addrs: append([]string{s.tunnel}, s.closed...)}, &res)
	for addr, e := range res.Errors {
		if e != "" {
			t.Errorf("from the namespace without its firewall, %s: %s (the controls would prove nothing)", addr, e)
		}
	}
}

// onlyTunnelAfter: with the firewall, only the single-port listener
// connects, and the firewall counted a refusal for each other port.
func (s *netnsSetup) onlyTunnelAfter(t *testing.T) {
	before := s.ns.refused(t)
	var res netnsProbeResult
	s.ns.helper(t, "probe", netnsProbeRequest{Addrs: append([]string{s.tunnel}, s.closed...)}, &res)
	if e := res.Errors[s.tunnel]; e != "" {
		t.Errorf("the single-port listener %s: %s", s.tunnel, e)
	}
	for _, addr := range s.closed {
		if res.Errors[addr] == "" {
			t.Errorf("the namespace reached %s: the firewall lets through more than the one port", addr)
		}
	}
	if after := s.ns.refused(t); after < before+len(s.closed) {
		t.Errorf("the firewall refused %d connections for %d failed dials: they failed for another reason", after-before, len(s.closed))
	}
}

// perBrokerClosed: with the port-per-broker listener's bootstrap port
// opened too, a client gets Metadata but cannot produce.
func (s *netnsSetup) perBrokerClosed(t *testing.T) {
	s.ns.allowAlso(t, s.perBroker)
	var res netnsPerBrokerResult
	s.ns.helper(t, "port-per-broker", netnsClientsRequest{Bootstrap: s.perBroker}, &res)
	t.Logf("the port-per-broker client in the namespace reports %+v", res)
	if len(res.Brokers) != 3 {
		t.Fatalf("port-per-broker Metadata through the opened bootstrap port: %d brokers %+v, want 3", len(res.Brokers), res.Brokers)
	}
	for _, b := range res.Brokers {
		if b.addr() == s.perBroker {
			t.Errorf("broker %d is served on the bootstrap port %s: the control proves nothing", b.ID, s.perBroker)
		}
	}
	if res.ProduceErr == "" {
		t.Error("a produce through the port-per-broker listener succeeded although its broker ports are closed")
	} else if len(res.ConnectErrors) == 0 {
		t.Errorf("the produce failed (%s) without a refused broker connection", res.ProduceErr)
	}
}

// upstreamSawAll: Produce and Fetch reached all three brokers, the
// KIP-848 heartbeats and the transactions reached the upstream, and
// every upstream connection came from the gateway.
func (s *netnsSetup) upstreamSawAll(t *testing.T) {
	for _, k := range []kmsg.Key{kmsg.Produce, kmsg.Fetch} {
		if m := s.nodes.nodes(k); len(m) != 3 {
			t.Errorf("%s reached upstream nodes %v, want all three", kmsg.NameForKey(int16(k)), m)
		}
	}
	for _, k := range []kmsg.Key{kmsg.ConsumerGroupHeartbeat, kmsg.EndTxn} {
		if len(s.nodes.nodes(k)) == 0 {
			t.Errorf("no %s reached the upstream", kmsg.NameForKey(int16(k)))
		}
	}
	nsUpstreamOnlyFromGateway(t, s.log, s.ns.hostIP)
}

// nsUpstreamOnlyFromGateway: every connection the upstream brokers
// accepted came from the gateway on the host, none from the namespace.
func nsUpstreamOnlyFromGateway(t *testing.T, log *acceptLog, gateway string) {
	t.Helper()
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.peers) == 0 {
		t.Fatal("the upstream accepted no connection: the check checked nothing")
	}
	for _, p := range log.peers {
		if h, _, _ := net.SplitHostPort(p); h != gateway {
			t.Errorf("the upstream accepted a connection from %s: only the gateway (%s) should reach it", p, gateway)
		}
	}
}

// nsKcatRound: kcat (librdkafka) in the namespace lists one broker — the
// virtual node at the gateway's address — and produces and consumes.
func nsKcatRound(t *testing.T, ns *netns, addr string) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (make deps installs it)")
	}
	meta := ns.exec(t, "", "kcat", "-b", addr, "-L", "-m", "30")
	brokers := regexp.MustCompile(`broker (-?\d+) at (\S+)`).FindAllStringSubmatch(meta, -1)
	if len(brokers) != 1 || brokers[0][1] != strconv.Itoa(nsVirtual) || brokers[0][2] != addr {
		t.Fatalf("kcat -L in the namespace: want only broker %d at %s:\n%s", nsVirtual, addr, meta)
	}
	var lines []string
	for i := range 9 {
		lines = append(lines, fmt.Sprintf("k%d:kcat-%d", i, i))
	}
	ns.exec(t, strings.Join(lines, "\n")+"\n", "kcat", "-b", addr, "-P", "-t", nsKcat, "-K", ":", "-m", "30")
	out := ns.exec(t, "", "kcat", "-b", addr, "-C", "-t", nsKcat, "-o", "beginning", "-e", "-q", "-f", "%p %s\n", "-m", "30")
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if _, value, ok := strings.Cut(line, " "); ok {
			got[value]++
		}
	}
	for i := range lines {
		if v := fmt.Sprintf("kcat-%d", i); got[v] != 1 {
			t.Errorf("kcat consumed %s %d times, want once; all it read:\n%s", v, got[v], out)
		}
	}
}

// Requests and results of the helper process (JSON through the
// environment and the result line).
type (
	netnsProbeRequest struct{ Addrs []string }
	netnsProbeResult  struct {
		Errors map[string]string // per address: "" when it connected, else the dial error
	}
	netnsClientsRequest struct{ Bootstrap string }
	netnsBroker         struct {
		ID   int32
		Host string
		Port int32
	}
	netnsClientsResult struct {
		Brokers          []netnsBroker
		Controller       int32
		Leaders          map[string][]int32 // per topic, per partition
		Discovered       int                // the most brokers any client discovered
		ProducedTo       map[int32]int      // records per partition of nsIn
		ProducerIDs      []int64            // of the produced records
		ClassicConsumed  int
		ClassicCommitted int64 // sum of the group's committed offsets
		Transformed      int
		ReadCommitted    int // records of nsOut a read_committed consumer saw
		NextGenConsumed  int
		NextGenCommitted int64
	}
	netnsPerBrokerResult struct {
		Brokers       []netnsBroker
		ProduceErr    string
		ConnectErrors []string // broker connections that failed
	}
)

func (b netnsBroker) addr() string { return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) }

func (r *netnsClientsResult) check(t *testing.T, tunnel string) {
	t.Helper()
	if len(r.Brokers) != 1 || r.Brokers[0].ID != nsVirtual || r.Brokers[0].addr() != tunnel || r.Controller != nsVirtual {
		t.Errorf("kadm Metadata: brokers %+v controller %d, want only node %d at %s", r.Brokers, r.Controller, nsVirtual, tunnel)
	}
	if len(r.Leaders) != 3 {
		t.Errorf("kadm Metadata described %d of the 3 topics asked for", len(r.Leaders))
	}
	for topic, leaders := range r.Leaders {
		for p, l := range leaders {
			if l != nsVirtual {
				t.Errorf("kadm Metadata: %s[%d] led by %d, want %d", topic, p, l, nsVirtual)
			}
		}
	}
	if r.Discovered != 1 {
		t.Errorf("a client discovered %d brokers, want the virtual node only", r.Discovered)
	}
	for p := range int32(3) {
		if r.ProducedTo[p] != nsRecords/3 {
			t.Errorf("produced %d records to %s[%d], want %d (per partition %v)", r.ProducedTo[p], nsIn, p, nsRecords/3, r.ProducedTo)
		}
	}
	if len(r.ProducerIDs) != 1 || r.ProducerIDs[0] < 0 {
		t.Errorf("producer ids %v: want one (the producer was idempotent)", r.ProducerIDs)
	}
	for _, v := range []struct {
		what      string
		got, want int64
	}{
		{"classic group consumed", int64(r.ClassicConsumed), nsRecords},
		{"classic group committed offsets sum", r.ClassicCommitted, nsRecords},
		{"transformed in transactions", int64(r.Transformed), nsRecords},
		{"read_committed consumer of the transformed topic saw", int64(r.ReadCommitted), nsRecords},
		{"KIP-848 group consumed", int64(r.NextGenConsumed), nsRecords},
		{"KIP-848 group committed offsets sum", r.NextGenCommitted, nsRecords},
	} {
		if v.got != v.want {
			t.Errorf("%s %d, want %d", v.what, v.got, v.want)
		}
	}
}

// TestNetnsHelper is not a test of its own: TestSinglePortNetns runs this
// binary again inside its network namespace with the task in the
// environment, and reads the result line it prints.
func TestNetnsHelper(t *testing.T) {
	task := os.Getenv(netnsHelperEnv)
	if task == "" {
		t.Skip("runs only inside the network namespace of TestSinglePortNetns")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var res any
	switch task {
	case "probe":
		var req netnsProbeRequest
		decodeNetnsRequest(t, &req)
		res = netnsProbe(req.Addrs)
	case "clients":
		var req netnsClientsRequest
		decodeNetnsRequest(t, &req)
		res = netnsClients(ctx, t, req.Bootstrap)
	case "sarama-kafka-go":
		var req netnsClientsRequest
		decodeNetnsRequest(t, &req)
		res = netnsPeers(ctx, t, req.Bootstrap)
	case "moves":
		var req netnsClientsRequest
		decodeNetnsRequest(t, &req)
		res = netnsMoves(ctx, t, req.Bootstrap)
	case "port-per-broker":
		var req netnsClientsRequest
		decodeNetnsRequest(t, &req)
		res = netnsPerBroker(ctx, t, req.Bootstrap)
	default:
		t.Fatalf("unknown helper task %q", task)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s%s\n", netnsResultTag, raw)
}

func decodeNetnsRequest(t *testing.T, req any) {
	t.Helper()
	if err := json.Unmarshal([]byte(os.Getenv(netnsRequestEnv)), req); err != nil {
		t.Fatalf("helper request: %v", err)
	}
}

// netnsProbe dials every address at once and reports which connected.
// The firewall refuses a blocked dial at once (a reset); the timeout
// only bounds a broken setup.
func netnsProbe(addrs []string) netnsProbeResult {
	res := netnsProbeResult{Errors: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, addr := range addrs {
		wg.Go(func() {
			msg := ""
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				msg = err.Error()
			} else {
				conn.Close()
			}
			mu.Lock()
			res.Errors[addr] = msg
			mu.Unlock()
		})
	}
	wg.Wait()
	return res
}

// netnsClients is the client workload inside the namespace.
func netnsClients(ctx context.Context, t *testing.T, seed string) netnsClientsResult {
	var res netnsClientsResult
	var clients []*kgo.Client
	newCl := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed), kgo.FetchMaxWait(300 * time.Millisecond)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
		return cl
	}
	adm := kadm.NewClient(newCl())
	netnsMetadata(ctx, t, adm, &res)
	netnsProduce(ctx, t, newCl(kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), &res)
	res.ClassicConsumed = netnsConsume(ctx, t, newCl(kgo.ConsumeTopics(nsIn), kgo.ConsumerGroup("ns-classic"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())))
	res.ClassicCommitted = netnsCommitted(ctx, t, adm, "ns-classic")
	netnsTransform(ctx, t, seed, &res)
	res.ReadCommitted = netnsConsume(ctx, t, newCl(kgo.ConsumeTopics(nsOut), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())))
	res.NextGenConsumed = netnsConsume(ctx, t, newCl(kgo.ConsumeTopics(nsIn), kgo.ConsumerGroup("ns-848"),
		kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())))
	res.NextGenCommitted = netnsCommitted(ctx, t, adm, "ns-848")
	for _, cl := range clients {
		res.Discovered = max(res.Discovered, len(cl.DiscoveredBrokers()))
		cl.Close()
	}
	return res
}

func netnsMetadata(ctx context.Context, t *testing.T, adm *kadm.Client, res *netnsClientsResult) {
	md, err := adm.Metadata(ctx, nsIn, nsOut, nsKcat)
	if err != nil {
		t.Fatalf("kadm Metadata: %v", err)
	}
	for _, b := range md.Brokers {
		res.Brokers = append(res.Brokers, netnsBroker{ID: b.NodeID, Host: b.Host, Port: b.Port})
	}
	res.Controller = md.Controller
	res.Leaders = map[string][]int32{}
	for name, td := range md.Topics {
		if td.Err != nil {
			t.Fatalf("kadm Metadata: topic %s: %v", name, td.Err)
		}
		leaders := make([]int32, len(td.Partitions))
		for _, p := range td.Partitions {
			leaders[p.Partition] = p.Leader
		}
		res.Leaders[name] = leaders
	}
}

// netnsProduce produces nsRecords records round-robin with kgo's default
// idempotent producer (acks=all).
func netnsProduce(ctx context.Context, t *testing.T, cl *kgo.Client, res *netnsClientsResult) {
	res.ProducedTo = map[int32]int{}
	pids := map[int64]bool{}
	for i := range nsRecords {
		r := &kgo.Record{Topic: nsIn, Value: []byte(fmt.Sprint(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		res.ProducedTo[r.Partition]++
		if !pids[r.ProducerID] {
			pids[r.ProducerID] = true
			res.ProducerIDs = append(res.ProducerIDs, r.ProducerID)
		}
	}
}

// netnsConsume polls until nsRecords records arrived, then commits what
// a group consumer took.
func netnsConsume(ctx context.Context, t *testing.T, cl *kgo.Client) int {
	got := 0
	for got < nsRecords {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d: %v", got, nsRecords, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s[%d]: %v", topic, p, err) })
		got += fs.NumRecords()
	}
	if _, grouped := cl.GroupMetadata(); grouped != -1 {
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	return got
}

func netnsCommitted(ctx context.Context, t *testing.T, adm *kadm.Client, group string) int64 {
	offs, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	return sum
}

// netnsTransform is a transactional consume-transform-produce loop from
// nsIn to nsOut: every batch read is written and its offsets committed in
// one transaction.
func netnsTransform(ctx context.Context, t *testing.T, seed string, res *netnsClientsResult) {
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seed),
		kgo.TransactionalID("ns-txn"), kgo.ConsumerGroup("ns-ctp"), kgo.ConsumeTopics(nsIn),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for res.Transformed < nsRecords {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("transformed %d of %d: %v", res.Transformed, nsRecords, ctx.Err())
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: nsOut, Value: append([]byte("t-"), r.Value...)}, nil)
			res.Transformed++
		})
		if committed, err := sess.End(ctx, kgo.TryCommit); err != nil || !committed {
			t.Fatalf("end transaction: committed %v, %v", committed, err)
		}
	}
}

// netnsPerBroker bootstraps from a port-per-broker listener (its
// bootstrap port is open) and produces to partition 0: Metadata answers,
// but the leader's broker port it names is closed. It returns when the
// produce ends or the client's dial to that leader is refused, whichever
// comes first (kgo would go on retrying the record for seconds).
func netnsPerBroker(ctx context.Context, t *testing.T, seed string) netnsPerBrokerResult {
	var res netnsPerBrokerResult
	var mu sync.Mutex
	leader := int32(-1)
	refused := make(chan struct{})
	var once sync.Once
	hook := brokerConnectHook(func(meta kgo.BrokerMetadata, err error) {
		if err == nil || meta.NodeID < 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		res.ConnectErrors = append(res.ConnectErrors, fmt.Sprintf("node %d at %s:%d: %v", meta.NodeID, meta.Host, meta.Port, err))
		if meta.NodeID == leader {
			once.Do(func() { close(refused) })
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.WithHooks(hook), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DisableIdempotentWrite()) // the Produce itself goes to the leader, not InitProducerId to any broker first
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, nsIn)
	if err != nil {
		t.Fatalf("Metadata through the port-per-broker bootstrap port: %v", err)
	}
	for _, b := range md.Brokers {
		res.Brokers = append(res.Brokers, netnsBroker{ID: b.NodeID, Host: b.Host, Port: b.Port})
	}
	p0, ok := md.Topics[nsIn].Partitions[0]
	if !ok {
		t.Fatalf("Metadata names no partition 0 of %s", nsIn)
	}
	mu.Lock()
	leader = p0.Leader
	mu.Unlock()
	done := make(chan error, 1)
	cl.Produce(ctx, &kgo.Record{Topic: nsIn, Partition: 0, Value: []byte("through a closed port")}, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			res.ProduceErr = err.Error()
		}
	case <-refused:
		res.ProduceErr = fmt.Sprintf("not acknowledged: the dial to the leader, node %d, was refused", leader)
	case <-ctx.Done():
		t.Fatalf("the produce neither ended nor reached the leader: %v", ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	return res
}

// brokerConnectHook adapts a function to kgo's HookBrokerConnect.
type brokerConnectHook func(kgo.BrokerMetadata, error)

func (h brokerConnectHook) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	h(meta, err)
}
