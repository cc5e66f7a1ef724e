package broker

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-932 share groups ("queues for Kafka"): members of a share group
// consume the same partitions together; the broker hands each record to
// one member at a time under an acquisition lock and tracks, per record,
// whether it is available, acquired, acknowledged or archived. This file
// is the group side (membership, the server-side assignor, epochs), as
// Kafka's GroupMetadataManager share-group paths and SimpleAssignor;
// share_partition.go is the record state machine (Kafka's SharePartition),
// share_session.go the share sessions (ShareSessionCache).
//
// A share group is a *group whose sg field is set, guarded by group.mu like
// the classic and consumer protocols, so ListGroups, DescribeGroups and
// DeleteGroups see it and a group id names one type only.
//
// Assignment: there is no revocation phase in share groups (a partition
// may be read by several members at once; the record locks keep delivery
// exclusive), so each membership or subscription change bumps the group
// epoch and the new assignment applies at once. A member's epoch moves to
// the group epoch on its own heartbeat, which then carries the assignment.
//
// Durability: membership (share_groups_journal.go) and share-partition
// state (start offset and the state of every in-flight record,
// share_partition.go) are in the coordinator journal; share sessions are
// not (after a restart a member's ShareFetch gets SHARE_SESSION_NOT_FOUND
// and it opens a new session, as with Kafka's in-memory session cache).

// Defaults, as Kafka's broker and group configs of the same names.
const (
	defaultShareSessionTimeout   = 45 * time.Second // group.share.session.timeout.ms
	defaultShareHeartbeat        = 5 * time.Second  // group.share.heartbeat.interval.ms
	defaultShareLockDuration     = 30 * time.Second // group.share.record.lock.duration.ms
	defaultShareDeliveryLimit    = 5                // group.share.delivery.count.limit
	defaultShareMaxRecordLocks   = 2000             // group.share.partition.max.record.locks
	defaultShareMaxRecords       = 500              // ShareFetch MaxRecords when 0 (the client's default)
	shareFetchMaxBytes           = 55 << 20         // fetch.max.bytes: bounds ShareFetch MaxBytes, as Kafka's KafkaApis
	groupTypeShare               = "share"          // ListGroups v5 group type
	shareAssignorSimple          = "simple"         // Kafka's share-group assignor name
	shareMemberIDMaxLen          = 36               // a client-generated UUID string
	shareSweepInterval           = 100 * time.Millisecond
	shareGroupPartitionKeyPrefix = "s\x00" // journal key: s NUL group NUL topic NUL partition
)

// shareGroup is a group's KIP-932 state; guarded by group.mu.
type shareGroup struct {
	epoch       int32
	assignEpoch int32 // epoch of the members' assignments
	members     map[string]*sgMember
	subMeta     string                    // subscribed topics and partition counts at the last epoch
	parts       map[tpKey]*sharePartition // share-partition state, created on first fetch or load
	sessions    map[string]*shareSession  // by member id (share_session.go)
	wake        chan struct{}             // closed (and replaced) when records become available again
	saved       []byte                    // membership record last written (share_groups_journal.go)
}

// sgMember is one member of a share group.
type sgMember struct {
	id               string
	rack             *string
	clientID, host   string
	topics           []string // subscribed names, sorted
	epoch, prevEpoch int32
	assigned         map[tpKey]bool
	session          *time.Timer
}

func newShareGroup() *shareGroup {
	return &shareGroup{members: map[string]*sgMember{}, parts: map[tpKey]*sharePartition{},
		sessions: map[string]*shareSession{}, wake: make(chan struct{})}
}

// state is Kafka's ShareGroupState name.
func (sg *shareGroup) state() string {
	if len(sg.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// notify wakes every ShareFetch waiting for available records.
func (sg *shareGroup) notify() {
	close(sg.wake)
	sg.wake = make(chan struct{})
}

func (sg *shareGroup) stopTimers() {
	for _, m := range sg.members {
		if m.session != nil {
			m.session.Stop()
		}
	}
}

// becomeShare makes g a share group if it can be one: only a group with
// no state of another type can. Classic or consumer members, a generation,
// a protocol type or committed offsets (a standalone committer's group:
// OffsetCommit at generation -1 leaves the protocol type empty) keep it
// what it is; Kafka's GroupMetadataManager refuses to change a group's type
// ("Group x is not a share group", GROUP_ID_NOT_FOUND). Caller holds g.mu.
func (g *group) becomeShare() bool {
	if g.sg != nil {
		return true
	}
	if len(g.members) > 0 || len(g.pending) > 0 || (g.cg != nil && len(g.cg.members) > 0) ||
		g.generation > 0 || len(g.offsets) > 0 || (g.protocolType != "" && g.protocolType != groupTypeShare) {
		return false
	}
	g.cg = nil
	g.sg = newShareGroup()
	g.protocolType = groupTypeShare
	return true
}

// dropIfUnusedShare removes g if it is a share group holding nothing: no
// members, sessions, share-partition state or journal record (a group
// that a failed ShareFetch or a session on unknown partitions created).
// Without it any client could fill the coordinator with empty groups until
// the next expiry pass. Caller holds g.mu.
func (g *group) dropIfUnusedShare() {
	sg := g.sg
	if sg == nil || g.dead || len(sg.members) > 0 || len(sg.sessions) > 0 || len(sg.parts) > 0 || sg.saved != nil || len(g.offsets) > 0 {
		return
	}
	g.dead = true
	g.state = groupDead
	g.c.mu.Lock()
	if g.c.gs[g.name] == g {
		delete(g.c.gs, g.name)
	}
	g.c.mu.Unlock()
}

// removeSGMember drops m, releases every record it holds and ends its
// share session, then moves the group to a new epoch. Caller holds g.mu.
func (g *group) removeSGMember(m *sgMember, why string) {
	sg := g.sg
	if sg.members[m.id] != m {
		return
	}
	if m.session != nil {
		m.session.Stop()
	}
	delete(sg.members, m.id)
	g.closeShareSession(m.id)
	g.releaseMemberRecords(m.id)
	sg.epoch++
	g.assignShare()
	if len(sg.members) == 0 {
		g.state, g.emptySince = groupEmpty, time.Now()
	}
	g.persistSG()
	// Debug: any client can join and leave at will (classic LeaveGroup
	// logs at Debug too).
	g.c.b.log.Debug("share group member removed", "group", g.name, "member", m.id, "reason", why)
}

// armSGSession (re)starts m's session timer.
func (g *group) armSGSession(m *sgMember) {
	if m.session != nil {
		m.session.Stop()
	}
	m.session = g.after(g.c.shareConfig(g.name).sessionTimeout, func() {
		if g.sg != nil {
			g.removeSGMember(m, "session timeout")
		}
	})
}

// refreshShareEpoch bumps the group epoch (and reassigns) when the
// subscribed topics' partition counts changed. Caller holds g.mu.
func (g *group) refreshShareEpoch() {
	all := g.c.b.topicPartitionCounts()
	var names []string
	seen := map[string]bool{}
	for _, m := range g.sg.members {
		for _, t := range m.topics {
			if _, ok := all[t]; ok && !seen[t] {
				seen[t] = true
				names = append(names, t)
			}
		}
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, t := range names {
		sb.WriteString(t)
		sb.WriteByte(0)
		sb.WriteString(strconv.Itoa(int(all[t])))
		sb.WriteByte(0)
	}
	if meta := sb.String(); meta != g.sg.subMeta {
		g.sg.subMeta = meta
		g.sg.epoch++
		g.assignShare()
	}
}

// assignShare is the server-side share assignor (Kafka's SimpleAssignor,
// without its stickiness): per topic, with members m and partitions p
// sorted, partition i goes to member i mod m when m <= p; with more
// members than partitions, member j reads partition j mod p, so every
// member gets work and every partition has a reader. Caller holds g.mu.
func (g *group) assignShare() {
	sg := g.sg
	sg.assignEpoch = sg.epoch
	all := g.c.b.topicPartitionCounts()
	subs := map[string][]string{}
	ids := make([]string, 0, len(sg.members))
	for id := range sg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := sg.members[id]
		m.assigned = map[tpKey]bool{}
		for _, t := range m.topics {
			if _, ok := all[t]; ok {
				subs[t] = append(subs[t], id)
			}
		}
	}
	for t, members := range subs {
		n := int(all[t])
		if n == 0 {
			continue
		}
		if len(members) <= n {
			for p := 0; p < n; p++ {
				sg.members[members[p%len(members)]].assigned[tpKey{t, int32(p)}] = true
			}
			continue
		}
		for j, id := range members {
			sg.members[id].assigned[tpKey{t, int32(j % n)}] = true
		}
	}
}

// shareAssignment is m's assignment as a heartbeat response carries it.
func (b *Broker) shareAssignment(set map[tpKey]bool) *kmsg.ShareGroupHeartbeatResponseAssignment {
	a := kmsg.NewShareGroupHeartbeatResponseAssignment()
	a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
	for _, at := range b.assignmentTopics(set) {
		tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
		tp.TopicID, tp.Partitions = at.TopicID, at.Partitions
		a.TopicPartitions = append(a.TopicPartitions, tp)
	}
	return &a
}

// sortedTopics returns a sorted copy of names.
func sortedTopicNames(names []string) []string {
	out := slices.Clone(names)
	sort.Strings(out)
	return slices.Compact(out)
}
