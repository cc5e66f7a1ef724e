package broker

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceValues produces "<prefix><i>" for i in [from, to) round-robin
// over the topic's partitions.
func produceValues(t testing.TB, cl *kgo.Client, topic, prefix string, from, to int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(prefix, i))})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// seen is a set of consumed values shared by a group's members.
type seen struct {
	mu sync.Mutex
	m  map[string]bool
}

func (s *seen) add(v string) {
	s.mu.Lock()
	s.m[v] = true
	s.mu.Unlock()
}

func (s *seen) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// groupMember runs a kgo group consumer until stopped; it records what it
// consumes and which partitions it owns.
type groupMember struct {
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}
}

func startMember(t testing.TB, addr, group, topic string, s *seen, opts ...kgo.Opt) *groupMember {
	cl := newClient(t, addr, append([]kgo.Opt{
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.AutoCommitInterval(200 * time.Millisecond),
	}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	m := &groupMember{cl: cl, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { s.add(string(r.Value)) })
		}
	}()
	return m
}

// leave stops polling and closes the client (LeaveGroup, final commit).
func (m *groupMember) leave() {
	m.stop()
	<-m.done
	m.cl.Close()
}

func TestGroupKgoBalancers(t *testing.T) {
	for _, bal := range []struct {
		name string
		b    kgo.GroupBalancer
	}{{"range", kgo.RangeBalancer()}, {"roundrobin", kgo.RoundRobinBalancer()}, {"cooperative-sticky", kgo.CooperativeStickyBalancer()}} {
		t.Run(bal.name, func(t *testing.T) {
			b := groupBroker(t, t.TempDir())
			addr := startGateway(t, b)
			topic := "bal-" + bal.name
			createTopic(t, addr, topic, 6, nil)
			prod := newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			produceValues(t, prod, topic, "v", 0, 300)
			s := &seen{m: map[string]bool{}}
			opt := kgo.Balancers(bal.b)
			a := startMember(t, addr, "g-"+bal.name, topic, s, opt)
			bm := startMember(t, addr, "g-"+bal.name, topic, s, opt)
			// Members join and leave while records keep coming.
			produceValues(t, prod, topic, "v", 300, 400)
			cm := startMember(t, addr, "g-"+bal.name, topic, s, opt)
			produceValues(t, prod, topic, "v", 400, 500)
			a.leave()
			produceValues(t, prod, topic, "v", 500, 600)
			checkFor(t, func() bool { return s.len() == 600 })
			// Two members remain and own all six partitions between them.
			adm := kadm.NewClient(newClient(t, addr))
			var owned []int32
			checkFor(t, func() bool {
				dg, err := adm.DescribeGroups(testCtx(t), "g-"+bal.name)
				if err != nil {
					return false
				}
				g := dg["g-"+bal.name]
				if g.State != "Stable" || len(g.Members) != 2 {
					return false
				}
				owned = owned[:0]
				for _, m := range g.Members {
					ca, ok := m.Assigned.AsConsumer()
					if !ok {
						return false
					}
					for _, tp := range ca.Topics {
						owned = append(owned, tp.Partitions...)
					}
				}
				sort.Slice(owned, func(i, j int) bool { return owned[i] < owned[j] })
				return fmt.Sprint(owned) == "[0 1 2 3 4 5]"
			})
			bm.leave()
			cm.leave()
			// Every partition's committed offset reached its end: no lag.
			checkFor(t, func() bool {
				lag := b.GroupLag()
				if len(lag) != 6 {
					return false
				}
				for _, l := range lag {
					if l.Lag != 0 || l.End <= 0 {
						return false
					}
				}
				return true
			})
		})
	}
}

func TestGroupKgoStaticRestart(t *testing.T) {
	b := groupBroker(t, t.TempDir())
	addr := startGateway(t, b)
	createTopic(t, addr, "static", 4, nil)
	s := &seen{m: map[string]bool{}}
	var revokes sync.Map
	member := func(inst string) *groupMember {
		// An eager balancer: cooperative-sticky's follow-up rebalance
		// after the second member joins would race the generation check.
		return startMember(t, addr, "static-g", "static", s, kgo.InstanceID(inst), kgo.SessionTimeout(10*time.Second),
			kgo.Balancers(kgo.RangeBalancer()),
			kgo.OnPartitionsRevoked(func(context.Context, *kgo.Client, map[string][]int32) {
				n, _ := revokes.LoadOrStore(inst, new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
			}))
	}
	m1, m2 := member("i1"), member("i2")
	adm := kadm.NewClient(newClient(t, addr))
	describe := func() kadm.DescribedGroup {
		dg, err := adm.DescribeGroups(testCtx(t), "static-g")
		if err != nil {
			t.Fatal(err)
		}
		return dg["static-g"]
	}
	assigned := func(g kadm.DescribedGroup, inst string) string {
		for _, m := range g.Members {
			if m.InstanceID != nil && *m.InstanceID == inst {
				ca, _ := m.Assigned.AsConsumer()
				return fmt.Sprint(ca.Topics)
			}
		}
		return ""
	}
	var before kadm.DescribedGroup
	checkFor(t, func() bool {
		before = describe()
		return before.State == "Stable" && len(before.Members) == 2 && assigned(before, "i1") != "[]" && assigned(before, "i2") != "[]"
	})
	gen := groupGeneration(t, b, "static-g")
	revokedBefore := int32(0)
	if n, ok := revokes.Load("i2"); ok {
		revokedBefore = n.(*atomic.Int32).Load()
	}
	// A static member's Close does not leave the group (KIP-345): i1
	// restarts within its session timeout and gets its partitions back
	// without a rebalance.
	m1.leave()
	m1 = member("i1")
	produceValues(t, newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "static", "s", 0, 100)
	checkFor(t, func() bool { return s.len() == 100 })
	after := describe()
	if g2 := groupGeneration(t, b, "static-g"); g2 != gen {
		t.Fatalf("generation %d -> %d: the static restart rebalanced", gen, g2)
	}
	if assigned(after, "i1") != assigned(before, "i1") || assigned(after, "i2") != assigned(before, "i2") {
		t.Fatalf("assignments changed: %v -> %v", before.Members, after.Members)
	}
	if n, ok := revokes.Load("i2"); ok && n.(*atomic.Int32).Load() != revokedBefore {
		t.Fatalf("i2 was revoked during i1's restart")
	}
	m1.leave()
	m2.leave()
}

func groupGeneration(t testing.TB, b *Broker, name string) int32 {
	g := b.groups.lock(name, false)
	if g == nil {
		t.Fatalf("group %s missing", name)
	}
	defer g.mu.Unlock()
	return g.generation
}

type saramaHandler struct {
	s      *seen
	mu     sync.Mutex
	claims map[string][]int32 // member id -> partitions of the last session
}

func (h *saramaHandler) Setup(sess sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	h.claims[sess.MemberID()] = sess.Claims()["sg"]
	h.mu.Unlock()
	return nil
}
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.s.add(string(m.Value))
		sess.MarkMessage(m, "")
	}
	return nil
}

func TestGroupSaramaTwoMembers(t *testing.T) {
	b := groupBroker(t, t.TempDir())
	addr := startGateway(t, b)
	createTopic(t, addr, "sg", 4, nil)
	produceValues(t, newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "sg", "x", 0, 200)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 5 * time.Second
	h := &saramaHandler{s: &seen{m: map[string]bool{}}, claims: map[string][]int32{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		cg, err := sarama.NewConsumerGroup([]string{addr}, "sarama-g", cfg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{"sg"}, h); err != nil && ctx.Err() == nil {
					t.Errorf("sarama consume: %v", err)
					return
				}
			}
		}()
		defer cg.Close()
	}
	checkFor(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.claims) < 2 {
			return false
		}
		// The latest session of each live member: find two with 2 partitions each.
		two := 0
		for _, ps := range h.claims {
			if len(ps) == 2 {
				two++
			}
		}
		return two >= 2
	})
	checkFor(t, func() bool { return h.s.len() == 200 })
	checkFor(t, func() bool {
		lag := b.GroupLag()
		total := int64(0)
		for _, l := range lag {
			if l.Lag != 0 {
				return false
			}
			total += l.Committed
		}
		return len(lag) == 4 && total == 200
	})
	cancel()
	wg.Wait()
}

func TestSaramaOffsetManagerNewGroup(t *testing.T) {
	b := groupBroker(t, t.TempDir())
	addr := startGateway(t, b)
	createTopic(t, addr, "om", 1, nil)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	client, err := sarama.NewClient([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	om, err := sarama.NewOffsetManagerFromClient("brand-new", client)
	if err != nil {
		t.Fatal(err)
	}
	defer om.Close()
	pom, err := om.ManagePartition("om", 0)
	if err != nil {
		t.Fatalf("manage partition of a new group: %v", err)
	}
	if off, md := pom.NextOffset(); off != sarama.OffsetOldest || md != "" {
		t.Fatalf("next offset of a new group: %d %q, want the initial offset", off, md)
	}
	pom.MarkOffset(42, "meta")
	om.Commit()
	select {
	case err := <-pom.Errors():
		t.Fatalf("offset manager: %v", err)
	default:
	}
	pom.Close()
	checkFor(t, func() bool {
		lag := b.GroupLag()
		return len(lag) == 1 && lag[0].Committed == 42
	})
}

func TestKafkaGoReaderGroup(t *testing.T) {
	b := groupBroker(t, t.TempDir())
	addr := startGateway(t, b)
	createTopic(t, addr, "kg", 2, nil)
	produceValues(t, newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "kg", "k", 0, 50)
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: []string{addr}, GroupID: "kafkago-g", Topic: "kg",
		MaxWait: 200 * time.Millisecond, HeartbeatInterval: 300 * time.Millisecond,
		StartOffset: kafkago.FirstOffset, CommitInterval: 0,
	})
	defer r.Close()
	ctx := testCtx(t)
	got := map[string]bool{}
	for len(got) < 50 {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("fetch after %d: %v", len(got), err)
		}
		got[string(m.Value)] = true
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	lag := b.GroupLag()
	if len(lag) != 2 || lag[0].Lag != 0 || lag[1].Lag != 0 || lag[0].Committed+lag[1].Committed != 50 {
		t.Fatalf("kafka-go commits: %+v", lag)
	}
}

func TestKcatGroup(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed")
	}
	b := groupBroker(t, t.TempDir())
	addr := startGateway(t, b)
	createTopic(t, addr, "kc-g", 2, nil)
	produceValues(t, newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "kc-g", "c", 0, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", "-b", addr, "-G", "kcat-g", "-o", "beginning", "-c", "20", "-q",
		"-X", "session.timeout.ms=6000", "-X", "auto.commit.interval.ms=100", "kc-g")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -G: %v\n%s", err, out)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 20 {
		t.Fatalf("kcat -G read %d records:\n%s", len(lines), out)
	}
	// librdkafka commits on close: the group is at the end of both partitions.
	checkFor(t, func() bool {
		lag := b.GroupLag()
		return len(lag) == 2 && lag[0].Lag == 0 && lag[1].Lag == 0 && lag[0].Committed+lag[1].Committed == 20
	})
}

func TestGroupResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	b := groupBroker(t, dir)
	c := b.NewConn("test")
	r := mustCall[*kmsg.JoinGroupResponse](t, c, joinReq("resume", "", 3, "range"))
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "resume", r.MemberID, r.Generation
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: r.MemberID, MemberAssignment: []byte("mine")}}
	if s := mustCall[*kmsg.SyncGroupResponse](t, c, sync); s.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(s.ErrorCode))
	}
	for _, reopen := range []func() *Broker{
		func() *Broker { return groupBroker(t, crashCopy(t, dir)) },
		func() *Broker {
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			return groupBroker(t, dir)
		},
	} {
		b2 := reopen()
		c2 := b2.NewConn("test")
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID, hb.Generation = "resume", r.MemberID, r.Generation
		if h := mustCall[*kmsg.HeartbeatResponse](t, c2, hb); h.ErrorCode != 0 {
			t.Fatalf("heartbeat after restart: %v", kerr.ErrorForCode(h.ErrorCode))
		}
		// A late SyncGroup gets the stored assignment.
		if s := mustCall[*kmsg.SyncGroupResponse](t, c2, sync); s.ErrorCode != 0 || string(s.MemberAssignment) != "mine" {
			t.Fatalf("sync after restart: %v %q", kerr.ErrorForCode(s.ErrorCode), s.MemberAssignment)
		}
	}
}
