package broker

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cgBroker opens a broker with fast KIP-848 timings.
func cgBroker(t testing.TB) *Broker {
	return groupBroker(t, t.TempDir(), func(c *Config) {
		c.ConsumerGroupHeartbeatInterval = 100 * time.Millisecond
		c.ConsumerGroupSessionTimeout = 1500 * time.Millisecond
	})
}

// cgHeartbeat is one ConsumerGroupHeartbeat v1.
type cgHeartbeat struct {
	member   string
	epoch    int32
	topics   []string // nil: unchanged
	regex    *string
	assignor *string
	owned    map[[16]byte][]int32 // nil: unchanged
}

func (h cgHeartbeat) send(t *testing.T, c *Conn, group string) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = group, h.member, h.epoch
	req.RebalanceTimeoutMillis = -1
	if h.epoch == 0 {
		req.RebalanceTimeoutMillis = 5000
	}
	req.SubscribedTopicNames, req.SubscribedTopicRegex, req.ServerAssignor = h.topics, h.regex, h.assignor
	if h.owned != nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for id, ps := range h.owned {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = id, ps
			req.Topics = append(req.Topics, rt)
		}
	}
	return mustCall[*kmsg.ConsumerGroupHeartbeatResponse](t, c, req)
}

// assigned flattens a heartbeat's assignment (nil: none sent).
func assigned(resp *kmsg.ConsumerGroupHeartbeatResponse) map[[16]byte][]int32 {
	if resp.Assignment == nil {
		return nil
	}
	out := map[[16]byte][]int32{}
	for _, t := range resp.Assignment.Topics {
		out[t.TopicID] = append(out[t.TopicID], t.Partitions...)
	}
	return out
}

func count(a map[[16]byte][]int32) int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// TestConsumerGroupReconciliation drives two members by hand through a
// join, a revocation and a leave, checking that a partition moves only
// after its previous owner released it, and the error answers.
func TestConsumerGroupReconciliation(t *testing.T) {
	b := cgBroker(t)
	c := b.NewConn("test")
	defer c.Close()
	s, _ := b.checkCreate("cg", 4, 1, nil)
	tp, err := b.createTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	sub := []string{"cg"}

	// Bad requests.
	for _, tc := range []struct {
		h    cgHeartbeat
		want *kerr.Error
	}{
		{cgHeartbeat{member: "", epoch: 0, topics: sub}, kerr.InvalidRequest},
		{cgHeartbeat{member: "x", epoch: 0}, kerr.InvalidRequest},
		{cgHeartbeat{member: "x", epoch: 0, topics: sub, owned: map[[16]byte][]int32{tp.id: {0}}}, kerr.InvalidRequest},
		{cgHeartbeat{member: "x", epoch: 0, topics: sub, assignor: kmsg.StringPtr("sticky")}, kerr.UnsupportedAssignor},
		{cgHeartbeat{member: "x", epoch: 0, regex: kmsg.StringPtr("(")}, kerr.InvalidRegularExpression},
		{cgHeartbeat{member: "x", epoch: 3, topics: sub}, kerr.UnknownMemberID},
	} {
		if r := tc.h.send(t, c, "g"); r.ErrorCode != tc.want.Code {
			t.Fatalf("%+v: %v, want %v", tc.h, kerr.ErrorForCode(r.ErrorCode), tc.want)
		}
	}

	// A joins alone and gets everything.
	ra := cgHeartbeat{member: "A", epoch: 0, topics: sub}.send(t, c, "g")
	if ra.ErrorCode != 0 || ra.MemberEpoch != 1 || count(assigned(ra)) != 4 || ra.HeartbeatIntervalMillis != 100 {
		t.Fatalf("A join: %v epoch %d assignment %v", kerr.ErrorForCode(ra.ErrorCode), ra.MemberEpoch, assigned(ra))
	}
	aOwned := assigned(ra)
	// B joins: the target splits 2/2 at epoch 2, but A still owns all, so
	// B gets nothing yet.
	rb := cgHeartbeat{member: "B", epoch: 0, topics: sub}.send(t, c, "g")
	if rb.ErrorCode != 0 || rb.MemberEpoch != 2 || count(assigned(rb)) != 0 {
		t.Fatalf("B join: %v epoch %d assignment %v", kerr.ErrorForCode(rb.ErrorCode), rb.MemberEpoch, assigned(rb))
	}
	// A's next heartbeat revokes two partitions; A stays at epoch 1.
	ra = cgHeartbeat{member: "A", epoch: 1, owned: aOwned}.send(t, c, "g")
	if ra.ErrorCode != 0 || ra.MemberEpoch != 1 || count(assigned(ra)) != 2 {
		t.Fatalf("A revocation: %v epoch %d assignment %v", kerr.ErrorForCode(ra.ErrorCode), ra.MemberEpoch, assigned(ra))
	}
	aKept := assigned(ra)
	// B still gets nothing: A has not released.
	if rb = (cgHeartbeat{member: "B", epoch: 2, owned: map[[16]byte][]int32{}}).send(t, c, "g"); count(assigned(rb)) != 0 {
		t.Fatalf("B got %v before A released", assigned(rb))
	}
	// A keepalive (owned unchanged) releases nothing either.
	if ra = (cgHeartbeat{member: "A", epoch: 1}).send(t, c, "g"); ra.MemberEpoch != 1 {
		t.Fatalf("A keepalive moved to epoch %d while revoking", ra.MemberEpoch)
	}
	// A acknowledges: epoch 2. Then B gets the released two.
	if ra = (cgHeartbeat{member: "A", epoch: 1, owned: aKept}).send(t, c, "g"); ra.ErrorCode != 0 || ra.MemberEpoch != 2 {
		t.Fatalf("A after release: %v epoch %d", kerr.ErrorForCode(ra.ErrorCode), ra.MemberEpoch)
	}
	rb = cgHeartbeat{member: "B", epoch: 2, owned: map[[16]byte][]int32{}}.send(t, c, "g")
	bGot := assigned(rb)
	if count(bGot) != 2 {
		t.Fatalf("B after release: %v", bGot)
	}
	for _, p := range bGot[tp.id] {
		for _, q := range aKept[tp.id] {
			if p == q {
				t.Fatalf("partition %d owned by both A %v and B %v", p, aKept, bGot)
			}
		}
	}
	// Describe: stable, epochs 2, disjoint assignments.
	dreq := kmsg.NewPtrConsumerGroupDescribeRequest()
	dreq.Version, dreq.Groups = 1, []string{"g", "nope"}
	d := mustCall[*kmsg.ConsumerGroupDescribeResponse](t, c, dreq)
	if g := d.Groups[0]; g.ErrorCode != 0 || g.State != "Stable" || g.Epoch != 2 || g.AssignmentEpoch != 2 || g.AssignorName != "uniform" || len(g.Members) != 2 {
		t.Fatalf("describe: %+v", g)
	}
	if d.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe unknown: %v", kerr.ErrorForCode(d.Groups[1].ErrorCode))
	}
	// A wrong epoch is fenced; the previous one with owned partitions it
	// still has is accepted (a lost response).
	if r := (cgHeartbeat{member: "A", epoch: 7}).send(t, c, "g"); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("epoch 7: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := (cgHeartbeat{member: "A", epoch: 1, owned: aKept}).send(t, c, "g"); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("previous epoch: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}

	// Offsets: members commit with their epoch; a newer epoch is stale,
	// an unknown member unknown.
	commit := func(member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 9, "g", member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "cg"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = aKept[tp.id][0], 5
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return mustCall[*kmsg.OffsetCommitResponse](t, c, req).Topics[0].Partitions[0].ErrorCode
	}
	if code := commit("A", 2); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	if code := commit("A", 3); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit at a future epoch: %v", kerr.ErrorForCode(code))
	}
	if code := commit("Z", 2); code != kerr.UnknownMemberID.Code {
		t.Fatalf("commit by an unknown member: %v", kerr.ErrorForCode(code))
	}
	// No mixing with the classic protocol while members exist.
	if r := mustCall[*kmsg.JoinGroupResponse](t, c, joinReq("g", "", 9, "range")); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join of a consumer group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version, lreq.TypesFilter = 5, []string{"consumer"}
	if l := mustCall[*kmsg.ListGroupsResponse](t, c, lreq); len(l.Groups) != 1 || l.Groups[0].Group != "g" || l.Groups[0].GroupType != "consumer" || l.Groups[0].GroupState != "Stable" {
		t.Fatalf("list consumer groups: %+v", l.Groups)
	}

	// A leaves: B gets all four on its next heartbeat, at epoch 3.
	if r := (cgHeartbeat{member: "A", epoch: -1}).send(t, c, "g"); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	rb = cgHeartbeat{member: "B", epoch: 2, owned: bGot}.send(t, c, "g")
	if rb.ErrorCode != 0 || rb.MemberEpoch != 3 || count(assigned(rb)) != 4 {
		t.Fatalf("B after A left: %v epoch %d assignment %v", kerr.ErrorForCode(rb.ErrorCode), rb.MemberEpoch, assigned(rb))
	}
	// B stops heartbeating: its session expires and the group empties.
	checkFor(t, func() bool {
		d := mustCall[*kmsg.ConsumerGroupDescribeResponse](t, c, dreq)
		return d.Groups[0].State == "Empty"
	})
}

// TestConsumerGroupAssignors checks the range split and the uniform
// assignor's balance and stickiness.
func TestConsumerGroupAssignors(t *testing.T) {
	all := map[string]int32{"a": 5, "b": 3}
	r := assignRange(map[string][]string{"m1": {"a", "b"}, "m2": {"a"}}, all)
	if len(r["m1"]) != 3+3 || len(r["m2"]) != 2 || !r["m1"][tpKey{"a", 0}] || !r["m2"][tpKey{"a", 4}] {
		t.Fatalf("range: %v", r)
	}
	subs := map[string][]string{"m1": {"a", "b"}, "m2": {"a", "b"}}
	u := assignUniform(subs, all, nil)
	if len(u["m1"])+len(u["m2"]) != 8 || len(u["m1"]) != 4 || len(u["m2"]) != 4 {
		t.Fatalf("uniform of 8 over 2: %d and %d", len(u["m1"]), len(u["m2"]))
	}
	subs["m3"] = []string{"a", "b"}
	u2 := assignUniform(subs, all, u)
	sizes := []int{len(u2["m1"]), len(u2["m2"]), len(u2["m3"])}
	sort.Ints(sizes)
	if sizes[0] != 2 || sizes[2] != 3 || sizes[0]+sizes[1]+sizes[2] != 8 {
		t.Fatalf("uniform of 8 over 3: %v", sizes)
	}
	for _, m := range []string{"m1", "m2"} {
		for k := range u2[m] {
			if !u[m][k] {
				t.Fatalf("%s got %v, which it did not have before: not sticky (%v -> %v)", m, k, u[m], u2[m])
			}
		}
	}
	// Heterogeneous: m3 only on b, which it should then mostly own.
	u3 := assignUniform(map[string][]string{"m1": {"a", "b"}, "m3": {"b"}}, all, nil)
	owned := map[tpKey]int{}
	for m, ps := range u3 {
		for k := range ps {
			owned[k]++
			if m == "m3" && k.topic != "b" {
				t.Fatalf("m3 assigned unsubscribed %v", k)
			}
		}
	}
	if len(owned) != 8 || len(u3["m3"]) != 3 {
		t.Fatalf("heterogeneous: %v", u3)
	}
}

// TestConsumerGroupKgo848 runs kgo group consumers with the KIP-848
// protocol (ServerSideBalancer) through the gateway: members join and
// leave while records arrive, every record is consumed, the final
// assignment is disjoint and complete, and a regex subscriber picks up a
// topic created after it joined.
func TestConsumerGroupKgo848(t *testing.T) {
	for _, bal := range []struct {
		name string
		b    kgo.GroupBalancer
	}{{"uniform", kgo.CooperativeStickyBalancer()}, {"range", kgo.RangeBalancer()}} {
		t.Run(bal.name, func(t *testing.T) {
			b := cgBroker(t)
			addr := startGateway(t, b)
			topic := "k848-" + bal.name
			createTopic(t, addr, topic, 6, nil)
			prod := newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			produceValues(t, prod, topic, "v", 0, 200)
			s := &seen{m: map[string]bool{}}
			opts := []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(bal.b)}
			group := "g848-" + bal.name
			m1 := startMember(t, addr, group, topic, s, opts...)
			m2 := startMember(t, addr, group, topic, s, opts...)
			produceValues(t, prod, topic, "v", 200, 300)
			m3 := startMember(t, addr, group, topic, s, opts...)
			produceValues(t, prod, topic, "v", 300, 400)
			checkFor(t, func() bool { return s.len() == 400 })
			m1.leave()
			produceValues(t, prod, topic, "v", 400, 500)
			checkFor(t, func() bool { return s.len() == 500 })

			// The group is a KIP-848 group, stable, with the two members
			// left owning all six partitions exactly once.
			c := b.NewConn("check")
			defer c.Close()
			dreq := kmsg.NewPtrConsumerGroupDescribeRequest()
			dreq.Groups = []string{group}
			checkFor(t, func() bool {
				g := mustCall[*kmsg.ConsumerGroupDescribeResponse](t, c, dreq).Groups[0]
				if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != 2 || g.AssignorName != bal.name {
					return false
				}
				for _, l := range b.GroupLag() {
					if l.Group == group && l.Members != 2 {
						return false // the metrics view counts KIP-848 members too
					}
				}
				owned := map[int32]int{}
				for _, m := range g.Members {
					for _, tp := range m.Assignment.TopicPartitions {
						for _, p := range tp.Partitions {
							owned[p]++
						}
					}
				}
				for p := int32(0); p < 6; p++ {
					if owned[p] != 1 {
						return false
					}
				}
				return len(owned) == 6
			})
			m2.leave()
			m3.leave()
			// Commits went through the member epochs: no lag left.
			checkFor(t, func() bool {
				var lag, committed int64
				for _, l := range b.GroupLag() {
					if l.Group == group {
						lag += l.Lag
						committed += l.Committed
					}
				}
				return lag == 0 && committed == 500
			})
		})
	}

	t.Run("regex", func(t *testing.T) {
		b := cgBroker(t)
		addr := startGateway(t, b)
		createTopic(t, addr, "re-a", 2, nil)
		prod := newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		produceValues(t, prod, "re-a", "a", 0, 20)
		s := &seen{m: map[string]bool{}}
		m := startMember(t, addr, "g-re", "re-.*", s, kgo.ConsumeRegex(), kgo.ServerSideBalancer(),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
		defer m.leave()
		checkFor(t, func() bool { return s.len() == 20 })
		createTopic(t, addr, "re-b", 2, nil)
		produceValues(t, prod, "re-b", "b", 0, 20)
		checkFor(t, func() bool { return s.len() == 40 })
		c := b.NewConn("check")
		defer c.Close()
		dreq := kmsg.NewPtrConsumerGroupDescribeRequest()
		dreq.Groups = []string{"g-re"}
		g := mustCall[*kmsg.ConsumerGroupDescribeResponse](t, c, dreq).Groups[0]
		if len(g.Members) != 1 || g.Members[0].SubscribedTopicRegex == nil {
			t.Fatalf("regex member: %+v", g.Members)
		}
		topics := fmt.Sprint(g.Members[0].Assignment.TopicPartitions)
		if len(g.Members[0].Assignment.TopicPartitions) != 2 {
			t.Fatalf("regex member owns %s, want re-a and re-b", topics)
		}
	})
}
