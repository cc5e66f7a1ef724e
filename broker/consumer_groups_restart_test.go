package broker

import (
	"fmt"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// reconcileMembers heartbeats every member with what it owns until each
// has its target and the epochs agree; it returns the assignments and
// epochs.
func reconcileMembers(t *testing.T, c *Conn, group string, members map[string]int32, owned map[string]map[[16]byte][]int32) {
	t.Helper()
	for range 20 {
		stable := true
		for id, epoch := range members {
			r := cgHeartbeat{member: id, epoch: epoch, owned: owned[id]}.send(t, c, group)
			if r.ErrorCode != 0 {
				t.Fatalf("%s heartbeat: %v", id, kerr.ErrorForCode(r.ErrorCode))
			}
			if a := assigned(r); a != nil {
				owned[id] = a
			}
			if r.MemberEpoch != epoch {
				stable = false
			}
			members[id] = r.MemberEpoch
		}
		if stable && count(owned["A"])+count(owned["B"]) == 4 && count(owned["A"]) == 2 {
			return
		}
	}
	t.Fatalf("members never settled: %v %v", members, owned)
}

// TestConsumerGroupMembershipSurvivesRestart: KIP-848 members keep their
// member ids, epochs and partitions across a broker restart; their first
// heartbeat after it is accepted at their epoch (no UNKNOWN_MEMBER_ID, no
// fencing, no rebalance), and a member that left before is not back.
func TestConsumerGroupMembershipSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := groupBroker(t, dir)
	c := b.NewConn("test")
	s, _ := b.checkCreate("cgr", 4, 1, nil)
	if _, err := b.createTopic(s); err != nil {
		t.Fatal(err)
	}
	sub := []string{"cgr"}
	members := map[string]int32{}
	owned := map[string]map[[16]byte][]int32{}
	for _, id := range []string{"A", "B", "C"} {
		r := cgHeartbeat{member: id, epoch: 0, topics: sub}.send(t, c, "g")
		if r.ErrorCode != 0 {
			t.Fatalf("%s join: %v", id, kerr.ErrorForCode(r.ErrorCode))
		}
		members[id], owned[id] = r.MemberEpoch, assigned(r)
	}
	if r := (cgHeartbeat{member: "C", epoch: -1}).send(t, c, "g"); r.ErrorCode != 0 {
		t.Fatalf("C leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	delete(members, "C")
	delete(owned, "C")
	reconcileMembers(t, c, "g", members, owned)
	before := fmt.Sprint(members, owned)
	c.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b2 := groupBroker(t, dir)
	c2 := b2.NewConn("test")
	defer c2.Close()

	for id, epoch := range members {
		r := cgHeartbeat{member: id, epoch: epoch, topics: sub, owned: owned[id]}.send(t, c2, "g")
		if r.ErrorCode != 0 || r.MemberEpoch != epoch {
			t.Fatalf("%s after restart: %v epoch %d, want epoch %d", id, kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, epoch)
		}
		if r.Assignment != nil {
			t.Fatalf("%s after restart: a new assignment %v (nothing changed)", id, assigned(r))
		}
	}
	if after := fmt.Sprint(members, owned); after != before {
		t.Fatalf("assignments after restart %s, before %s", after, before)
	}
	for id, m := range b2.groups.gs["g"].cg.members {
		if got, want := sortedAssignment(assignedOf(b2, m)), sortedAssignment(owned[id]); got != want {
			t.Fatalf("%s restored with %s, owned %s", id, got, want)
		}
	}
	if r := (cgHeartbeat{member: "C", epoch: 1}).send(t, c2, "g"); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("C, which left before the restart: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// assignedOf is m's assignment keyed by topic id.
func assignedOf(b *Broker, m *cgMember) map[[16]byte][]int32 {
	out := map[[16]byte][]int32{}
	for tp := range m.assigned {
		out[b.lookup(tp.topic).id] = append(out[b.lookup(tp.topic).id], tp.partition)
	}
	return out
}

func sortedAssignment(a map[[16]byte][]int32) string {
	var out []string
	for id, ps := range a {
		for _, p := range ps {
			out = append(out, fmt.Sprint(id[0], "/", p))
		}
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}
