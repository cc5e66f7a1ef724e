package proxy_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// keysOnEveryCoordinator picks, for each of the cluster's three
// brokers, one key of prefix that kfake makes that broker coordinate.
func keysOnEveryCoordinator(t *testing.T, c *kfake.Cluster, prefix string) []string {
	t.Helper()
	by := map[int32]string{}
	for i := 0; len(by) < 3 && i < 1000; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		if n := c.CoordinatorFor(k); by[n] == "" {
			by[n] = k
		}
	}
	if len(by) < 3 {
		t.Fatalf("no %s keys on all three coordinators: %v", prefix, by)
	}
	return []string{by[0], by[1], by[2]}
}

// openTransaction starts a transactional producer with id and leaves a
// transaction open after writing one record to each of partitions.
func openTransaction(t *testing.T, srv *proxy.Server, id, topic string, partitions ...int32) *kgo.Client {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, srv, nil, kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, p := range partitions {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(id)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce to %s[%d]: %v", id, topic, p, err)
		}
	}
	return cl
}

func movedCode(c int16) bool {
	return c == kerr.NotCoordinator.Code || c == kerr.CoordinatorNotAvailable.Code
}

// TestSinglePortDescribeProducers: DescribeProducers (KIP-664) split by
// partition leader. A transactional producer has a transaction open on
// partitions leading on all three brokers (kfake lists only producers
// with an open transaction); every partition is described, at its real
// leader, with that producer.
func TestSinglePortDescribeProducers(t *testing.T) {
	const topic, parts = "dp", 6
	c, srv, scan := startSinglePort(t, topic, parts)
	ctx := ctxT(t, 60*time.Second)
	prod := openTransaction(t, srv, "dp-txn", topic, 0, 1, 2, 3, 4, 5)
	pid, _, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodes := countNodes(c, kmsg.DescribeProducers)
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	adm := kadm.NewClient(cl)
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []kmsg.Key{kmsg.DescribeProducers, kmsg.ListTransactions, kmsg.DescribeLogDirs, kmsg.ConsumerGroupDescribe, kmsg.DescribeTransactions} {
		v := vs[testVirtual]
		if _, ok := v.KeyMaxVersion(int16(k)); !ok {
			t.Errorf("single-port ApiVersions does not offer %s", k.Name())
		}
	}
	described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {}})
	if err != nil {
		t.Fatal(err)
	}
	ps := described[topic].Partitions
	if len(ps) != parts {
		t.Fatalf("described %d partitions, want %d: %+v", len(ps), parts, ps)
	}
	for p := range int32(parts) {
		d := ps[p]
		if d.Err != nil {
			t.Errorf("partition %d: %v", p, d.Err)
			continue
		}
		if _, ok := d.ActiveProducers[pid]; !ok || len(d.ActiveProducers) != 1 {
			t.Errorf("partition %d: producers %+v, want only %d", p, d.ActiveProducers, pid)
		}
		if d.Leader != testVirtual {
			t.Errorf("partition %d: leader %d, want the virtual node", p, d.Leader)
		}
	}
	nodes.assertAll(t, 3)
	// Every leader moves: the gateway's view sends each partition to its
	// old leader, whose NOT_LEADER_OR_FOLLOWER refreshes the view, so a
	// second request (to the virtual node directly, without kadm's
	// retries) describes every partition.
	for p := range int32(parts) {
		if err := c.MoveTopicPartition(topic, p, (p+1)%3); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 2 {
		req := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0, 1, 2, 3, 4, 5}
		req.Topics = append(req.Topics, rt)
		raw, err := cl.Broker(testVirtual).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		listed := 0
		for _, tp := range raw.(*kmsg.DescribeProducersResponse).Topics {
			for _, p := range tp.Partitions {
				listed++
				if round == 1 && (p.ErrorCode != 0 || len(p.ActiveProducers) != 1 || p.ActiveProducers[0].ProducerID != pid) {
					t.Errorf("after the leaders moved: partition %d error %d producers %+v", p.Partition, p.ErrorCode, p.ActiveProducers)
				}
			}
		}
		if listed != parts {
			t.Errorf("round %d: %d partitions listed, want %d", round, listed, parts)
		}
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	scan.assertClean(t)
}

// TestSinglePortTransactionAdmin: ListTransactions fans out to every
// broker and DescribeTransactions is split per transaction coordinator.
// Three transactional ids coordinated by the three brokers, two with a
// transaction open: every id is listed exactly once (kfake's brokers
// each list every transaction, so the merge must deduplicate) and
// described by its coordinator; an id whose coordinator lookup fails
// upstream is COORDINATOR_NOT_AVAILABLE, the others still described.
func TestSinglePortTransactionAdmin(t *testing.T) {
	const topic, lost = "ta", "ta-no-coordinator"
	c, srv, scan := startSinglePort(t, topic, 3)
	ids, pids := openTransactionsOnEveryCoordinator(t, c, srv, topic)
	failCoordinatorLookup(c, lost)
	lists := countNodes(c, kmsg.ListTransactions, kmsg.DescribeTransactions)
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	wantState := map[string]string{ids[0]: "Ongoing", ids[1]: "Ongoing", ids[2]: "Empty"}
	checkListTransactions(t, cl, ids, pids, wantState)
	checkDescribeTransactions(t, cl, topic, ids, pids, wantState)
	checkLostTransactionCoordinator(t, cl, ids[0], lost)
	lists.assertAll(t, 3)
	checkTransactionCoordinatorsMove(t, c, cl, ids)
	scan.assertClean(t)
}

// openTransactionsOnEveryCoordinator opens a transaction for an id on
// each coordinator, writing to partition i for the i-th, and commits the
// third (Empty); it returns the ids and their producer ids.
func openTransactionsOnEveryCoordinator(t *testing.T, c *kfake.Cluster, srv *proxy.Server, topic string) ([]string, map[string]int64) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	ids := keysOnEveryCoordinator(t, c, "ta-txn")
	pids := map[string]int64{}
	for i, id := range ids {
		cl := openTransaction(t, srv, id, topic, int32(i))
		pid, _, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pids[id] = pid
		if i == 2 {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ids, pids
}

// failCoordinatorLookup makes kfake answer FindCoordinator for key alone
// (v3, or v4+ naming only it) with COORDINATOR_NOT_AVAILABLE.
func failCoordinatorLookup(c *kfake.Cluster, key string) {
	c.ControlKey(int16(kmsg.FindCoordinator), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.FindCoordinatorRequest)
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		switch {
		case r.Version <= 3 && r.CoordinatorKey == key:
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		case r.Version >= 4 && slices.Equal(r.CoordinatorKeys, []string{key}):
			sc := kmsg.NewFindCoordinatorResponseCoordinator()
			sc.Key, sc.ErrorCode = key, kerr.CoordinatorNotAvailable.Code
			resp.Coordinators = append(resp.Coordinators, sc)
		default:
			return nil, nil, false
		}
		return resp, nil, true
	})
}

// checkListTransactions: the virtual node's ListTransactions lists each
// id once (asked directly: kgo's own sharded Request would merge answers
// itself), and kadm sees each with its producer and state.
func checkListTransactions(t *testing.T, cl *kgo.Client, ids []string, pids map[string]int64, wantState map[string]string) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	raw, err := cl.Broker(testVirtual).Request(ctx, kmsg.NewPtrListTransactionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	listedRaw := raw.(*kmsg.ListTransactionsResponse)
	seen := map[string]int{}
	for _, s := range listedRaw.TransactionStates {
		seen[s.TransactionalID]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("ListTransactions lists %s %d times, want once: %+v", id, seen[id], listedRaw.TransactionStates)
		}
	}
	listed, err := kadm.NewClient(cl).ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		l, ok := listed[id]
		if !ok || l.ProducerID != pids[id] || l.State != wantState[id] {
			t.Errorf("listed %s: %+v (present %v), want producer %d %s", id, l, ok, pids[id], wantState[id])
		}
	}
}

// checkDescribeTransactions: kadm describes each id at the virtual
// coordinator, with its partition while the transaction is open.
func checkDescribeTransactions(t *testing.T, cl *kgo.Client, topic string, ids []string, pids map[string]int64, wantState map[string]string) {
	t.Helper()
	described, err := kadm.NewClient(cl).DescribeTransactions(ctxT(t, 30*time.Second), ids...)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		d, ok := described[id]
		if !ok || d.Err != nil || d.ProducerID != pids[id] || d.State != wantState[id] || d.Coordinator != testVirtual {
			t.Errorf("described %s: %+v (present %v), want producer %d %s at the virtual node", id, d, ok, pids[id], wantState[id])
			continue
		}
		if _, has := d.Topics[topic][int32(i)]; has != (d.State == "Ongoing") {
			t.Errorf("described %s: topics %v, want %s[%d] while ongoing", id, d.Topics, topic, i)
		}
	}
}

// checkLostTransactionCoordinator: an id whose coordinator lookup fails
// upstream is COORDINATOR_NOT_AVAILABLE, the other still described.
func checkLostTransactionCoordinator(t *testing.T, cl *kgo.Client, ok, lost string) {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{ok, lost}
	resp, err := cl.Broker(testVirtual).Request(ctxT(t, 30*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, s := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
		codes[s.TransactionalID] = s.ErrorCode
	}
	if len(codes) != 2 || codes[ok] != 0 || codes[lost] != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("describe with a lost coordinator: codes %v, want %s ok and %s COORDINATOR_NOT_AVAILABLE", codes, ok, lost)
	}
}

// checkTransactionCoordinatorsMove: the coordinators move; a
// NOT_COORDINATOR answer makes the gateway look again, so the second
// request reaches every new coordinator.
func checkTransactionCoordinatorsMove(t *testing.T, c *kfake.Cluster, cl *kgo.Client, ids []string) {
	t.Helper()
	c.RehashCoordinators()
	if c.CoordinatorFor(ids[0]) == 0 && c.CoordinatorFor(ids[1]) == 1 && c.CoordinatorFor(ids[2]) == 2 {
		t.Fatal("no transaction coordinator moved on a rehash")
	}
	for round := range 2 {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = ids
		resp, err := cl.Broker(testVirtual).Request(ctxT(t, 30*time.Second), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			if round == 1 && movedCode(s.ErrorCode) {
				t.Errorf("%s after the coordinators moved and one NOT_COORDINATOR: error %d", s.TransactionalID, s.ErrorCode)
			}
		}
	}
}

// TestSinglePortLogDirs: DescribeLogDirs fans out to every broker; the
// virtual broker reports each upstream broker's directories, one entry
// per broker (kfake keeps every broker's data in "/mem/kfake", with
// every partition of the cluster).
func TestSinglePortLogDirs(t *testing.T) {
	const topic, parts = "ld", 3
	c, srv, scan := startSinglePort(t, topic, parts)
	ctx := ctxT(t, 60*time.Second)
	prod := newClient(t, srv, nil, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(parts) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: make([]byte, 100)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	nodes := countNodes(c, kmsg.DescribeLogDirs)
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	// Asked of the virtual broker directly: kgo's sharded Request joins
	// directories of the same name itself.
	raw, err := cl.Broker(testVirtual).Request(ctx, kmsg.NewPtrDescribeLogDirsRequest())
	if err != nil {
		t.Fatal(err)
	}
	dirs := raw.(*kmsg.DescribeLogDirsResponse).Dirs
	if len(dirs) != 3 {
		t.Fatalf("%d log dir entries, want one per upstream broker (3): %+v", len(dirs), dirs)
	}
	for _, d := range dirs {
		if d.Dir != "/mem/kfake" || d.ErrorCode != 0 {
			t.Errorf("dir %q error %d", d.Dir, d.ErrorCode)
		}
	}
	all, err := kadm.NewClient(cl).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[testVirtual] == nil {
		t.Fatalf("log dirs of brokers %v, want only the virtual node", slices.Collect(maps.Keys(all)))
	}
	for p := range int32(parts) {
		d, ok := all[testVirtual].Lookup("/mem/kfake", topic, p)
		if !ok || d.Size <= 0 || d.Broker != testVirtual {
			t.Errorf("%s[%d]: %+v (present %v), want a replica with data at the virtual node", topic, p, d, ok)
		}
	}
	nodes.assertAll(t, 3)
	scan.assertClean(t)
}

// TestSinglePortConsumerGroupDescribe: ConsumerGroupDescribe (KIP-848)
// split per group coordinator. Three kgo KIP-848 groups
// (ServerSideBalancer), coordinated by the three brokers, each consume;
// kadm describes every group as Stable with its one member, which owns
// every partition.
func TestSinglePortConsumerGroupDescribe(t *testing.T) {
	const topic, parts = "cgd", 3
	c, srv, scan := startSinglePort(t, topic, parts)
	ctx := ctxT(t, 60*time.Second)
	prod := newClient(t, srv, nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range parts {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	groups := keysOnEveryCoordinator(t, c, "cgd-group")
	for _, g := range groups {
		cons := newClient(t, srv, nil, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(g), kgo.ClientID("member-"+g),
			kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
		for got := 0; got < parts; {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s consumed %d of %d", g, got, parts)
			}
			got += fs.NumRecords()
		}
	}
	nodes := countNodes(c, kmsg.ConsumerGroupDescribe)
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	adm := kadm.NewClient(cl)
	describe := func(when string) {
		t.Helper()
		described, err := adm.DescribeConsumerGroups(ctx, groups...)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		for _, g := range groups {
			d, ok := described[g]
			if !ok || d.Err != nil || d.State != "Stable" || len(d.Members) != 1 {
				t.Errorf("%s: %s: %+v (present %v), want Stable with one member", when, g, d, ok)
				continue
			}
			m := d.Members[0]
			owned := 0 // kfake's assignments name topics by id only, so kadm files them under ""
			for _, ps := range m.Assignment {
				owned += len(ps)
			}
			if m.ClientID != "member-"+g || owned != parts {
				t.Errorf("%s: %s: member %s owns %v, want all %d partitions of %s", when, g, m.ClientID, m.Assignment, parts, topic)
			}
		}
	}
	describe("first")
	nodes.assertAll(t, 3)
	// The coordinators move: the gateway's cached ones answer
	// NOT_COORDINATOR, which makes it look again, so a second request
	// (asked of the virtual node directly, without kadm's retries) finds
	// every group.
	c.RehashCoordinators()
	moved := 0
	for i, g := range groups {
		if c.CoordinatorFor(g) != int32(i) {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no group's coordinator moved on a rehash")
	}
	virtual := cl.Broker(testVirtual)
	for round := range 2 {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = groups
		raw, err := virtual.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range raw.(*kmsg.ConsumerGroupDescribeResponse).Groups {
			if round == 1 && g.ErrorCode != 0 {
				t.Errorf("%s after the coordinators moved and one NOT_COORDINATOR: error %d", g.Group, g.ErrorCode)
			}
		}
	}
	describe("after the coordinators moved")
	scan.assertClean(t)
}

// TestSinglePortAuditUpstreamNodes: the audit record of a routed request
// names the upstream brokers it reached. One Produce carrying partitions
// led by all three brokers (acks=all, and again with acks=0) is recorded
// with nodes 0, 1 and 2; a FindCoordinator, answered by the gateway,
// with none; a Metadata, sent to one broker, with one.
func TestSinglePortAuditUpstreamNodes(t *testing.T) {
	sink := &syncBuffer{}
	trail, err := audit.New(configs.Audit{Level: "full", Mode: "best-effort", Queue: 10000}, nil, audit.WithSink(sink))
	if err != nil {
		t.Fatal(err)
	}
	_, srv, _ := startSinglePort(t, "au", 3, func(o *proxy.Options) { o.Audit = trail })
	ctx := ctxT(t, 30*time.Second)
	for _, acks := range []kgo.Acks{kgo.AllISRAcks(), kgo.NoAck()} {
		opts := []kgo.Opt{kgo.ClientID("audit-sp"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ManualFlushing(), kgo.RequiredAcks(acks)}
		if acks == kgo.NoAck() {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		prod := newClient(t, srv, nil, opts...)
		// One record per partition first, each flushed alone: then the
		// client knows every partition, and the next three records,
		// buffered and flushed together, leave in one Produce.
		for range 2 {
			for p := range int32(3) {
				prod.Produce(ctx, &kgo.Record{Topic: "au", Partition: p, Value: []byte("v")}, nil)
				if err := prod.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		for p := range int32(3) {
			prod.Produce(ctx, &kgo.Record{Topic: "au", Partition: p, Value: []byte("v")}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		prod.Close()
	}
	adm := kadm.NewClient(newClient(t, srv, nil, kgo.ClientID("audit-sp")))
	if fc := adm.FindGroupCoordinators(ctx, "au-group"); fc["au-group"].Err != nil || fc["au-group"].NodeID != testVirtual {
		t.Fatalf("find coordinator: %+v", fc)
	}
	adm.Close()
	// A record is logged after its answer is written, so the client may
	// be done before the last records are: wait for them.
	var got auditedRouting
	for got = auditRouting(sink.records(t)); !got.complete(); got = auditRouting(sink.records(t)) {
		select {
		case <-ctx.Done():
			t.Fatalf("audit records incomplete: Produce over three leaders recorded for acks %v, %d FindCoordinator, %d Metadata; Produce records: %v",
				got.spanning, got.finds, got.metas, got.produces)
		case <-time.After(10 * time.Millisecond):
		}
	}
	trail.Close()
	for _, e := range got.bad {
		t.Error(e)
	}
}

// auditedRouting is what TestSinglePortAuditUpstreamNodes found in the
// audit trail so far.
type auditedRouting struct {
	spanning     map[int16]bool // acks → a Produce over partitions 0-2 recorded with nodes [0 1 2]
	finds, metas int
	bad          []string
	produces     []string // every Produce record, for a failure message
}

func (a auditedRouting) complete() bool {
	return a.spanning[-1] && a.spanning[0] && a.finds > 0 && a.metas > 0
}

func auditRouting(recs []audit.Record) auditedRouting {
	a := auditedRouting{spanning: map[int16]bool{}}
	for _, r := range recs {
		if r.Event != audit.EventRequest || r.ClientID != "audit-sp" {
			continue
		}
		switch r.API {
		case "Produce":
			a.produces = append(a.produces, fmt.Sprintf("acks %v topics %+v nodes %v", r.Acks, r.Topics, r.UpstreamNodes))
			var leaders []int32 // partition p of "au" leads on node p (startSinglePort)
			for _, tp := range r.Topics {
				for _, p := range tp.Partitions {
					if !slices.Contains(leaders, p.Partition%3) {
						leaders = append(leaders, p.Partition%3)
					}
				}
			}
			slices.Sort(leaders)
			if !slices.Equal(r.UpstreamNodes, leaders) {
				a.bad = append(a.bad, fmt.Sprintf("Produce of %+v recorded with upstream nodes %v, want its leaders %v", r.Topics, r.UpstreamNodes, leaders))
			}
			if len(r.Topics) == 1 && r.Topics[0].Name == "au" && len(r.Topics[0].Partitions) == 3 && len(leaders) == 3 && r.Acks != nil {
				a.spanning[*r.Acks] = true
			}
		case "FindCoordinator":
			a.finds++
			if len(r.UpstreamNodes) != 0 {
				a.bad = append(a.bad, fmt.Sprintf("FindCoordinator answered by the gateway is recorded with upstream nodes %v", r.UpstreamNodes))
			}
		case "Metadata":
			a.metas++
			if len(r.UpstreamNodes) != 1 {
				a.bad = append(a.bad, fmt.Sprintf("Metadata recorded with upstream nodes %v, want the one broker it was sent to", r.UpstreamNodes))
			}
		}
	}
	return a
}

// TestSinglePortListTransactionsMerge: what one broker's ListTransactions
// answer says reaches the client. Broker 1 answers
// COORDINATOR_LOAD_IN_PROGRESS, broker 2 says it did not know the state
// filter "Bogus", broker 0 answers as kfake does: the merged answer
// carries the error and the unknown filter, and still lists every
// transaction the other brokers listed, once.
func TestSinglePortListTransactionsMerge(t *testing.T) {
	const topic = "lt"
	c, srv, scan := startSinglePort(t, topic, 3)
	ctx := ctxT(t, 60*time.Second)
	ids := keysOnEveryCoordinator(t, c, "lt-txn")
	for i, id := range ids {
		openTransaction(t, srv, id, topic, int32(i))
	}
	c.ControlKey(int16(kmsg.ListTransactions), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
		switch c.CurrentNode() {
		case 1:
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		case 2:
			resp.UnknownStateFilters = []string{"Bogus"}
		default:
			return nil, nil, false
		}
		return resp, nil, true
	})
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters = []string{"Ongoing", "Bogus"}
	raw, err := cl.Broker(testVirtual).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.ListTransactionsResponse)
	if resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("merged error %d, want broker 1's COORDINATOR_LOAD_IN_PROGRESS", resp.ErrorCode)
	}
	if !slices.Equal(resp.UnknownStateFilters, []string{"Bogus"}) {
		t.Errorf("unknown state filters %v, want broker 2's [Bogus]", resp.UnknownStateFilters)
	}
	seen := map[string]int{}
	for _, s := range resp.TransactionStates {
		seen[s.TransactionalID]++
		if s.TransactionState != "Ongoing" {
			t.Errorf("%s listed as %s", s.TransactionalID, s.TransactionState)
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("%s listed %d times, want once (from broker 0)", id, seen[id])
		}
	}
	scan.assertClean(t)
}
