package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// etlLedger is what every member of one group consumed: each
// (partition, offset) must be seen once, and each key once.
type etlLedger struct {
	mu      sync.Mutex
	offsets map[int64]string // partition<<32|offset -> member that consumed it
	keys    map[int]bool
	doubles []string
	n       atomic.Int64
}

func (l *etlLedger) add(member string, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	po := int64(r.Partition)<<32 | r.Offset
	if prev, ok := l.offsets[po]; ok {
		l.doubles = append(l.doubles, fmt.Sprintf("p%d o%d consumed by %s and %s", r.Partition, r.Offset, prev, member))
		return
	}
	l.offsets[po] = member
	k, _ := strconv.Atoi(string(r.Key))
	l.keys[k] = true
	l.n.Add(1)
}

// etlMember consumes like franz-go's TestGroupETL consumers: rebalances
// wait for the poll loop (BlockRebalanceOnPoll), every revocation commits
// what was processed, and the member may quit after a few polls without
// committing its last one — the records it polled but did not process
// must go to the next owner.
type etlMember struct {
	name string
	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}
}

func startETLMember(t *testing.T, addr, group, topic, name string, bal kgo.GroupBalancer, l *etlLedger, errs chan<- error) *etlMember {
	m := &etlMember{name: name, stop: make(chan struct{}), done: make(chan struct{})}
	var err error
	m.cl, err = kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.Balancers(bal),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.AutoCommitInterval(150*time.Millisecond),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && !errors.Is(err, context.Canceled) {
				select {
				case errs <- fmt.Errorf("%s: commit on revoke: %w", name, err):
				default:
				}
			}
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				m.cl.AllowRebalance()
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			fs := m.cl.PollRecords(ctx, 25)
			cancel()
			fs.EachError(func(tp string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kgo.ErrClientClosed) {
					select {
					case errs <- fmt.Errorf("%s: fetch %s/%d: %w", name, tp, p, err):
					default:
					}
				}
			})
			fs.EachRecord(func(r *kgo.Record) { l.add(name, r) })
			m.cl.AllowRebalance()
		}
	}()
	return m
}

// leave stops the poll loop and closes the client: LeaveGroup (epoch -1)
// after the revocation callback committed.
func (m *etlMember) leave() {
	close(m.stop)
	<-m.done
	m.cl.Close()
}

// TestConsumerGroup848ETL is franz-go's TestGroupETL shape against the
// built-in broker: records produced while a KIP-848 group's members join
// and leave must each be consumed exactly once (no (partition, offset)
// twice, none missing), for both server assignors, several rounds.
func TestConsumerGroup848ETL(t *testing.T) {
	const (
		records    = 6000
		partitions = 9
		rounds     = 2
	)
	for _, bal := range []struct {
		name string
		b    kgo.GroupBalancer
	}{{"range", kgo.RangeBalancer()}, {"uniform", kgo.CooperativeStickyBalancer()}} {
		for round := 0; round < rounds; round++ {
			t.Run(fmt.Sprintf("%s/%d", bal.name, round), func(t *testing.T) {
				b := cgBroker(t)
				addr := startGateway(t, b)
				topic := "etl-" + bal.name
				createTopic(t, addr, topic, partitions, nil)
				prod := newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
				produced := make(chan error, 1)
				go func() {
					var recs []*kgo.Record
					for i := 0; i < records; i++ {
						recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte("v")})
						if len(recs) == 100 {
							if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
								produced <- err
								return
							}
							recs = recs[:0]
						}
					}
					produced <- nil
				}()

				l := &etlLedger{offsets: map[int64]string{}, keys: map[int]bool{}}
				errs := make(chan error, 1)
				group := "etl-" + bal.name
				var members []*etlMember
				join := func() {
					members = append(members, startETLMember(t, addr, group, topic, fmt.Sprintf("m%d", len(members)), bal.b, l, errs))
				}
				waitConsumed := func(n int64) {
					checkFor(t, func() bool { return l.n.Load() >= n || len(errs) > 0 })
				}
				for i := 0; i < 3; i++ {
					join()
				}
				waitConsumed(records / 6)
				checkFor(t, func() bool { // a KIP-848 group with the asked-for assignor
					c := b.NewConn("check")
					defer c.Close()
					dreq := kmsg.NewPtrConsumerGroupDescribeRequest()
					dreq.Groups = []string{group}
					g := mustCall[*kmsg.ConsumerGroupDescribeResponse](t, c, dreq).Groups[0]
					return g.ErrorCode == 0 && g.AssignorName == bal.name && len(g.Members) == 3
				})
				join() // a rebalance under load
				join()
				waitConsumed(records / 3)
				members[0].leave() // leaves: its revocation commits
				waitConsumed(records / 2)
				join()
				members[1].leave()
				members[3].leave()
				waitConsumed(2 * records / 3)
				join()
				if err := <-produced; err != nil {
					t.Fatal(err)
				}
				checkFor(t, func() bool { return l.n.Load() >= records || len(errs) > 0 })
				for _, m := range members {
					select {
					case <-m.stop:
					default:
						m.leave()
					}
				}
				select {
				case err := <-errs:
					if !errors.Is(err, kerr.RebalanceInProgress) {
						t.Fatal(err)
					}
				default:
				}
				l.mu.Lock()
				defer l.mu.Unlock()
				if len(l.doubles) > 0 {
					t.Fatalf("%d records consumed twice, first: %s", len(l.doubles), l.doubles[0])
				}
				if len(l.keys) != records {
					t.Fatalf("consumed %d distinct keys, want %d", len(l.keys), records)
				}
			})
		}
	}
}

// TestConsumerGroupCommitFencing: a member's commit at an older epoch
// lands only for a partition it still holds and was given at or before
// that epoch (KIP-1251); once it has released a partition to another
// member, its late commit is STALE_MEMBER_EPOCH and the new owner's
// offset stays.
func TestConsumerGroupCommitFencing(t *testing.T) {
	b := cgBroker(t)
	c := b.NewConn("test")
	defer c.Close()
	s, _ := b.checkCreate("fence", 2, 1, nil)
	tp, err := b.createTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	sub := []string{"fence"}
	assignor := kmsg.StringPtr("range")
	commit := func(member string, epoch int32, p int32, offset int64) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.MemberID, req.Generation = "g", member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "fence"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return mustCall[*kmsg.OffsetCommitResponse](t, c, req).Topics[0].Partitions[0].ErrorCode
	}
	committed := func(p int32) int64 {
		g := b.groups.lock("g", false)
		defer g.mu.Unlock()
		return g.offsets["fence"][p].Offset
	}

	// A alone owns both partitions at epoch 1.
	ra := cgHeartbeat{member: "A", epoch: 0, topics: sub, assignor: assignor}.send(t, c, "g")
	if ra.MemberEpoch != 1 || count(assigned(ra)) != 2 {
		t.Fatalf("A join: epoch %d %v", ra.MemberEpoch, assigned(ra))
	}
	if code := commit("A", 1, 1, 10); code != 0 {
		t.Fatalf("A commit at its epoch: %v", kerr.ErrorForCode(code))
	}
	// B joins (epoch 2, range: A p0, B p1). A revokes p1, still at epoch 1:
	// its commit of p1 at epoch 1 lands (the partition is still A's).
	cgHeartbeat{member: "B", epoch: 0, topics: sub, assignor: assignor}.send(t, c, "g")
	ra = cgHeartbeat{member: "A", epoch: 1, owned: assigned(ra)}.send(t, c, "g")
	if ra.MemberEpoch != 1 || count(assigned(ra)) != 1 {
		t.Fatalf("A revocation: epoch %d %v", ra.MemberEpoch, assigned(ra))
	}
	if code := commit("A", 1, 1, 20); code != 0 {
		t.Fatalf("A commit of a partition it is revoking: %v", kerr.ErrorForCode(code))
	}
	// A releases p1 and moves to epoch 2; B gets p1 and commits 30.
	ra = cgHeartbeat{member: "A", epoch: 1, owned: assigned(ra)}.send(t, c, "g")
	if ra.MemberEpoch != 2 {
		t.Fatalf("A after release: epoch %d", ra.MemberEpoch)
	}
	rb := cgHeartbeat{member: "B", epoch: 2, owned: map[[16]byte][]int32{}}.send(t, c, "g")
	if got := assigned(rb)[tp.id]; len(got) != 1 || got[0] != 1 {
		t.Fatalf("B after A released: %v", assigned(rb))
	}
	if code := commit("B", 2, 1, 30); code != 0 {
		t.Fatalf("B commit: %v", kerr.ErrorForCode(code))
	}
	// A's late commit of p1 at its old epoch must not move B's offset back.
	if code := commit("A", 1, 1, 20); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("A's late commit of a released partition: %v, want STALE_MEMBER_EPOCH", kerr.ErrorForCode(code))
	}
	if got := committed(1); got != 30 {
		t.Fatalf("p1 committed offset %d after a fenced commit, want 30", got)
	}
	// At an old epoch, A may still commit p0, which it has held since epoch 1.
	if code := commit("A", 1, 0, 5); code != 0 {
		t.Fatalf("A commit of p0 at epoch 1: %v", kerr.ErrorForCode(code))
	}
	// An epoch above the member's is STALE; an unknown member is UNKNOWN_MEMBER_ID.
	if code := commit("A", 9, 0, 6); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit above the member epoch: %v", kerr.ErrorForCode(code))
	}
	if code := commit("Z", 1, 0, 6); code != kerr.UnknownMemberID.Code {
		t.Fatalf("commit from an unknown member: %v", kerr.ErrorForCode(code))
	}
}
