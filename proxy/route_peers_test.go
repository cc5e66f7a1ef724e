package proxy_test

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestSinglePortTransactions: a kgo consume-transform-produce loop
// (GroupTransactSession: InitProducerId with a transactional id,
// AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) through
// the one port; a read_committed consumer sees every transformed record
// once, and the group's offsets cover the input.
func TestSinglePortTransactions(t *testing.T) {
	const n = 60
	c, srv, scan := startSinglePort(t, "in", 6)
	ctx := ctxT(t, 90*time.Second)
	adm := kadm.NewClient(newClient(t, srv, nil))
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	spreadLeaders(t, c, "out", 6, 3)
	nodes := countNodes(c, kmsg.Produce, kmsg.Fetch)
	prod := newClient(t, srv, nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(srv.Addr(0).String()), kgo.Dialer(scan.dial),
		kgo.TransactionalID("ctp"), kgo.ConsumerGroup("ctp-group"), kgo.ConsumeTopics("in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for done := 0; done < n; {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("transformed %d of %d: %v", done, n, ctx.Err())
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: "out", Value: append([]byte("t-"), r.Value...)}, nil)
			done++
		})
		if committed, err := sess.End(ctx, kgo.TryCommit); err != nil || !committed {
			t.Fatalf("end transaction: committed %v, %v", committed, err)
		}
	}
	got := consumeAll(t, srv, scan, "out", n, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for i := range n {
		if got[fmt.Sprintf("t-%d", i)] != 1 {
			t.Errorf("t-%d read %d times", i, got[fmt.Sprintf("t-%d", i)])
		}
	}
	offs, err := adm.FetchOffsets(ctx, "ctp-group")
	if err != nil || offs.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, offs.Error())
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != n {
		t.Errorf("group offsets sum to %d, want %d", sum, n)
	}
	nodes.assertAll(t, 3)
	scan.assertClean(t)
}

// consumeAll reads topic from the start until want records arrived and
// returns how often each value was read.
func consumeAll(t *testing.T, srv *proxy.Server, scan *nodeScanner, topic string, want int, opts ...kgo.Opt) map[string]int {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	opts = append([]kgo.Opt{kgo.SeedBrokers(srv.Addr(0).String()), kgo.Dialer(scan.dial), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got, total := map[string]int{}, 0
	for total < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: read %d of %d", topic, total, want)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)]++; total++ })
	}
	return got
}

// TestSinglePortLeaderMove: an idempotent producer keeps producing while
// every partition's leader moves between the three brokers; every record
// arrives exactly once (the NOT_LEADER_OR_FOLLOWER answers refresh the
// gateway's view and are retried by the client against the same node).
func TestSinglePortLeaderMove(t *testing.T) {
	const parts, n = 6, 300
	c, srv, scan := startSinglePort(t, "mv", parts)
	ctx := ctxT(t, 90*time.Second)
	prod := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	// Records go out asynchronously, many in flight, and every 20 records
	// every partition's leader moves to the next broker: the moves are
	// deterministic (no timer), and happen while requests are in flight.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range n {
		if i%20 == 0 {
			for p := range int32(parts) {
				if err := c.MoveTopicPartition("mv", p, (p+int32(i/20))%3); err != nil {
					t.Fatal(err)
				}
			}
		}
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Topic: "mv", Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d produces failed during leader moves, first: %v", len(errs), errs[0])
	}
	got := consumeAll(t, srv, scan, "mv", n)
	for i := range n {
		if got[fmt.Sprint(i)] != 1 {
			t.Errorf("record %d read %d times", i, got[fmt.Sprint(i)])
		}
	}
	scan.assertClean(t)
}

// TestSinglePortSarama: IBM/sarama learns one broker at the gateway and
// produces and consumes across partitions led by three brokers.
func TestSinglePortSarama(t *testing.T) {
	c, srv, _ := startSinglePort(t, "sps", 3)
	nodes := countNodes(c, kmsg.Produce)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewRoundRobinPartitioner
	cl, err := sarama.NewClient([]string{srv.Addr(0).String()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if bs := cl.Brokers(); len(bs) != 1 || bs[0].ID() != testVirtual || bs[0].Addr() != srv.Addr(0).String() {
		t.Fatalf("sarama learned %d brokers (first %d at %s), want only the virtual node", len(bs), bs[0].ID(), bs[0].Addr())
	}
	prod, err := sarama.NewSyncProducerFromClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 30
	for i := range n {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sps", Partition: -1, Value: sarama.StringEncoder(fmt.Sprint(i))}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	cons, err := sarama.NewConsumerFromClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	for p := range int32(3) {
		pc, err := cons.ConsumePartition("sps", p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for range n / 3 {
			select {
			case <-pc.Messages():
				got++
			case err := <-pc.Errors():
				t.Fatalf("sarama consumer: %v", err)
			case <-time.After(20 * time.Second):
				t.Fatalf("partition %d: nothing for 20s after %d records", p, got)
			}
		}
		pc.Close()
	}
	if got != n {
		t.Fatalf("sarama consumed %d, want %d", got, n)
	}
	nodes.assertAll(t, 3)
}

// TestSinglePortKcat: librdkafka lists one broker (the virtual node at
// the gateway), produces and consumes through the one port.
func TestSinglePortKcat(t *testing.T) {
	c, srv, _ := startSinglePort(t, "spk", 3)
	nodes := countNodes(c, kmsg.Produce)
	addr := srv.Addr(0).String()
	meta := kcatRun(t, "", "-b", addr, "-L")
	brokers := regexp.MustCompile(`broker (\d+) at ([0-9.:]+)`).FindAllStringSubmatch(meta, -1)
	if len(brokers) != 1 || brokers[0][1] != fmt.Sprint(testVirtual) || brokers[0][2] != addr {
		t.Fatalf("kcat -L: want only broker %d at %s:\n%s", testVirtual, addr, meta)
	}
	var lines, keyed []string
	for i := range 60 {
		lines = append(lines, fmt.Sprintf("line-%02d", i))
		keyed = append(keyed, fmt.Sprintf("k%d:line-%02d", i, i))
	}
	// Keyed records hash over all three partitions (librdkafka batches
	// unkeyed ones to one sticky partition).
	kcatRun(t, strings.Join(keyed, "\n")+"\n", "-b", addr, "-t", "spk", "-P", "-K:", "-X", "acks=all")
	out := kcatRun(t, "", "-b", addr, "-t", "spk", "-C", "-o", "beginning", "-e", "-q")
	got := strings.Fields(out)
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(lines, " ") {
		t.Fatalf("kcat consumed %d records, want %d:\n%s", len(got), len(lines), out)
	}
	nodes.assertAll(t, 3)
}

// TestSinglePortSASLAndPolicy: SASL terminated at a single-port listener,
// and policy judging the client's request before it is split: alice's
// produce over three leaders succeeds, bob's is refused as a broker
// would, a wrong password fails authentication.
func TestSinglePortSASLAndPolicy(t *testing.T) {
	users := plainServer{users: map[string]string{"alice": "s3cret", "bob": "hunter2"}}
	c, srv, scan := startSinglePort(t, "spa", 3, withSASL(users))
	setPolicy(t, srv, "policy:\n  rules:\n    - name: bob-reads-only\n      match: { principal: bob, api: [Produce] }\n      action: deny\n")
	nodes := countNodes(c, kmsg.Produce)
	ctx := ctxT(t, 30*time.Second)
	alice := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.SASL(plain.Auth{User: "alice", Pass: "s3cret"}.AsMechanism()),
		kgo.DefaultProduceTopic("spa"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range 9 {
		if err := alice.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatalf("alice produce %d: %v", i, err)
		}
	}
	bob := newClient(t, srv, nil, kgo.SASL(plain.Auth{User: "bob", Pass: "hunter2"}.AsMechanism()), kgo.DefaultProduceTopic("spa"))
	if err := bob.ProduceSync(ctx, kgo.StringRecord("from bob")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	wrong := newClient(t, srv, nil, kgo.SASL(plain.Auth{User: "alice", Pass: "nope"}.AsMechanism()), kgo.DefaultProduceTopic("spa"),
		kgo.RecordDeliveryTimeout(3*time.Second))
	if err := wrong.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	nodes.assertAll(t, 3)
	scan.assertClean(t)
}

// TestSinglePortCoordinatorMove: a classic consumer group consumes and
// commits, and kfake moves every group coordinator after each commit
// (NOT_COORDINATOR answers make the gateway look the coordinator up
// again; the client retries the virtual node). Transactions are left out
// here: kfake loses open transactions when its coordinators are rehashed,
// with or without the gateway (checked directly against kfake).
func TestSinglePortCoordinatorMove(t *testing.T) {
	const n = 90
	c, srv, scan := startSinglePort(t, "cm", 3)
	ctx := ctxT(t, 60*time.Second)
	prod := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "cm", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rehashes := 0
	cons := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.ConsumeTopics("cm"), kgo.ConsumerGroup("cm-group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond), kgo.FetchMaxBytes(2000))
	got := map[string]int{}
	for total := 0; total < n; {
		fs := cons.PollRecords(ctx, 10)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", total, n)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)]++; total++ })
		if err := cons.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit offsets while coordinators move: %v", err)
		}
		c.RehashCoordinators() // the next commit and heartbeat find the coordinator moved
		rehashes++
	}
	if rehashes < 2 {
		t.Fatalf("coordinators moved only %d times while consuming", rehashes)
	}
	for i := range n {
		if got[fmt.Sprint(i)] != 1 {
			t.Errorf("record %d read %d times", i, got[fmt.Sprint(i)])
		}
	}
	adm := kadm.NewClient(cons)
	offs, err := adm.FetchOffsets(ctx, "cm-group")
	if err != nil || offs.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, offs.Error())
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != n {
		t.Errorf("committed offsets sum to %d, want %d", sum, n)
	}
	scan.assertClean(t)
}

// TestSinglePortGroupAdmin: batched group requests split per coordinator
// (OffsetFetch v8+ with several groups, DescribeGroups) and ListGroups
// fanned out to every broker and merged without duplicates.
func TestSinglePortGroupAdmin(t *testing.T) {
	c, srv, scan := startSinglePort(t, "ga", 3)
	ctx := ctxT(t, 60*time.Second)
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	adm := kadm.NewClient(cl)
	groups := []string{"ga-1", "ga-2", "ga-3", "ga-4", "ga-5", "ga-6"}
	coords := map[int32]bool{}
	for i, g := range groups {
		coords[c.CoordinatorFor(g)] = true
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "ga", Partition: int32(i % 3), At: int64(10 + i)})
		if _, err := adm.CommitOffsets(ctx, g, os); err != nil {
			t.Fatalf("commit %s: %v", g, err)
		}
	}
	if len(coords) < 2 {
		t.Fatalf("kfake put all %d groups on one coordinator: the split is not exercised", len(groups))
	}
	lists := countNodes(c, kmsg.ListGroups)
	fetched := adm.FetchManyOffsets(ctx, groups...)
	for i, g := range groups {
		r, ok := fetched[g]
		if !ok || r.Err != nil {
			t.Errorf("%s: %+v", g, r)
			continue
		}
		if o, _ := r.Fetched.Lookup("ga", int32(i%3)); o.At != int64(10+i) {
			t.Errorf("%s: offset %d, want %d", g, o.At, 10+i)
		}
	}
	described, err := adm.DescribeGroups(ctx, groups...)
	if err != nil || len(described) != len(groups) {
		t.Fatalf("describe groups: %d of %d, %v", len(described), len(groups), err)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := listed.Groups(); len(got) != len(groups) {
		t.Errorf("ListGroups: %v, want the %d groups once each", got, len(groups))
	}
	lists.assertAll(t, 3)
	scan.assertClean(t)
}

// TestSinglePortAcksZero: Produce with acks=0 is written to each leader
// and never answered (kgo's produce connection carries nothing else, so
// a stalled entry would show as a hung ProduceSync or Metadata after
// it), and every record arrives at the leaders of all three brokers.
func TestSinglePortAcksZero(t *testing.T) {
	const n = 60
	c, srv, scan := startSinglePort(t, "az", 3)
	nodes := countNodes(c, kmsg.Produce)
	ctx := ctxT(t, 60*time.Second)
	prod := newClient(t, srv, nil, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "az", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if _, err := kadm.NewClient(prod).Metadata(ctx, "az"); err != nil {
		t.Fatalf("metadata after acks=0 produces: %v", err)
	}
	got := consumeAll(t, srv, scan, "az", n)
	for i := range n {
		if got[fmt.Sprint(i)] != 1 {
			t.Errorf("record %d read %d times", i, got[fmt.Sprint(i)])
		}
	}
	nodes.assertAll(t, 3)
}

// TestSinglePortBrokerRemoved: an upstream broker leaves the cluster
// (kfake RemoveNode) between produces; the partitions it led are
// answered NOT_LEADER_OR_FOLLOWER, the view is refreshed, and the same
// client keeps producing to every partition.
func TestSinglePortBrokerRemoved(t *testing.T) {
	const parts = 6
	c, srv, scan := startSinglePort(t, "rm", parts)
	ctx := ctxT(t, 60*time.Second)
	prod := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "rm", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, 30)
	if err := c.RemoveNode(2); err != nil {
		t.Fatalf("remove node 2: %v", err)
	}
	produce(30, 60)
	got := consumeAll(t, srv, scan, "rm", 60)
	for i := range 60 {
		if got[fmt.Sprint(i)] < 1 {
			t.Errorf("record %d missing", i)
		}
	}
	scan.assertClean(t)
}
