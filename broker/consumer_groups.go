package broker

import (
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-848 consumer groups ("group.protocol=consumer"): the coordinator
// assigns partitions itself and members learn their assignment from
// ConsumerGroupHeartbeat (68_consumer_group_heartbeat.go), as Kafka's
// GroupMetadataManager / ConsumerGroup / CurrentAssignmentBuilder.
//
// A group is either classic or consumer: a consumer group is a *group
// whose cg field is set; it shares the group's lock, committed offsets and
// journal with the classic protocol, so OffsetCommit/OffsetFetch,
// ListGroups, DeleteGroups and offset expiry work for both.
//
// Epochs: the group epoch grows whenever membership, a subscription or the
// partition count of a subscribed topic changes; the target assignment is
// recomputed at once for that epoch (assignEpoch). Each member then
// reconciles towards its target one heartbeat at a time:
//  1. partitions it holds that the target gives elsewhere are revoked
//     first: removed from its assignment, kept "revoking" (still owned)
//     until a heartbeat's owned-partitions list no longer has them; the
//     member stays at its old epoch meanwhile;
//  2. then its epoch becomes the assignment epoch, and it gets every
//     target partition no other member still owns; partitions still held
//     by another member (being revoked there) follow on later heartbeats.
//
// So a partition is never owned by two members. Commits are fenced the
// same way (KIP-1251): at an older epoch a member may commit only what it
// still holds and was given by then (cgCommitAllowed), so a late commit
// from a member that released a partition cannot rewind the next owner's
// offset; a removed member's commits are UNKNOWN_MEMBER_ID. A member that does not
// finish revoking within its rebalance timeout is removed (Kafka fences
// it), as is one that does not heartbeat within the session timeout.
//
// Membership is persisted in the coordinator journal
// (consumer_groups_journal.go), so members keep their epochs and partitions
// across a restart. Differences from Kafka: a static member's leave
// (epoch -2) is a plain leave; classic and consumer protocols do not mix in one group
// (INCONSISTENT_GROUP_PROTOCOL / GROUP_ID_NOT_FOUND instead of Kafka's
// online migration); rack-aware assignment is not done.

// Defaults (Kafka's group.consumer.* broker configs).
const (
	defaultCGSessionTimeout    = 45 * time.Second // group.consumer.session.timeout.ms
	defaultCGHeartbeatInterval = 5 * time.Second  // group.consumer.heartbeat.interval.ms
	assignorUniform            = "uniform"
	assignorRange              = "range"
	groupTypeConsumer          = "consumer"
)

// tpKey names a partition by topic name (ids are looked up when a
// response is built, so a recreated topic is a different partition set).
type tpKey struct {
	topic     string
	partition int32
}

// cgMember is one member of a consumer group.
type cgMember struct {
	id               string
	instance, rack   *string
	clientID, host   string
	rebalanceTimeout time.Duration
	topics           []string // subscribed names, sorted
	regex            *string
	re               *regexp.Regexp
	assignor         string // requested server assignor, "" for none

	epoch, prevEpoch int32
	assigned         map[tpKey]bool  // what the member was told it owns
	revoking         map[tpKey]bool  // taken away, not yet released by the member
	assignedAt       map[tpKey]int32 // member epoch at which each held partition (assigned or revoking) was given (KIP-1251)

	session  *time.Timer
	revokeBy *time.Timer // rebalance timeout of a pending revocation
}

// consumerGroup is a group's KIP-848 state; guarded by group.mu.
type consumerGroup struct {
	epoch       int32 // group epoch
	assignEpoch int32 // epoch of target
	assignor    string
	members     map[string]*cgMember
	target      map[string]map[tpKey]bool // member id -> target partitions
	owner       map[tpKey]string          // partition -> member holding it
	subMeta     string                    // subscribed topics and partition counts at the last epoch bump
	dirty       bool                      // a change awaits the next epoch
	removed     []string                  // member ids removed since the last persistCG (consumer_groups_journal.go)
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*cgMember{}, target: map[string]map[tpKey]bool{},
		owner: map[tpKey]string{}, assignor: assignorUniform}
}

// cgState is Kafka's ConsumerGroupState name.
func (cg *consumerGroup) state() string {
	if len(cg.members) == 0 {
		return "Empty"
	}
	if cg.dirty || cg.assignEpoch < cg.epoch {
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignEpoch || len(m.revoking) > 0 || len(m.assigned) != len(cg.target[m.id]) {
			return "Reconciling"
		}
	}
	return "Stable"
}

// cgSessionTimeout and cgHeartbeatInterval are the configured or default
// consumer-group timings.
func (c *coordinator) cgSessionTimeout() time.Duration {
	if d := c.b.cfg.ConsumerGroupSessionTimeout; d > 0 {
		return d
	}
	return defaultCGSessionTimeout
}

func (c *coordinator) cgHeartbeatInterval() time.Duration {
	if d := c.b.cfg.ConsumerGroupHeartbeatInterval; d > 0 {
		return d
	}
	return defaultCGHeartbeatInterval
}

// stopCGTimers stops every member timer (group removal, broker close).
func (cg *consumerGroup) stopTimers() {
	for _, m := range cg.members {
		m.stopTimers()
	}
}

func (m *cgMember) stopTimers() {
	if m.session != nil {
		m.session.Stop()
	}
	if m.revokeBy != nil {
		m.revokeBy.Stop()
	}
}

// bump asks for a new group epoch; refreshTarget starts it, so the
// changes one heartbeat makes (a join and its subscription) are one epoch.
func (cg *consumerGroup) bump() { cg.dirty = true }

// removeCGMember drops m, releasing every partition it holds, and starts
// a new epoch. Caller holds g.mu.
func (g *group) removeCGMember(m *cgMember, why string) {
	cg := g.cg
	if cg.members[m.id] != m {
		return
	}
	m.stopTimers()
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	for tp, id := range cg.owner {
		if id == m.id {
			delete(cg.owner, tp)
		}
	}
	cg.bump()
	g.c.b.log.Info("consumer group member removed", "group", g.name, "member", m.id, "reason", why)
	g.syncCGState()
	cg.removed = append(cg.removed, m.id)
	g.persistCG(nil) // consumer_groups_journal.go
}

// syncCGState mirrors the consumer group into the classic state field,
// which offset expiry and DeleteGroups read.
func (g *group) syncCGState() {
	if len(g.cg.members) == 0 {
		if g.state != groupEmpty {
			g.state, g.emptySince = groupEmpty, time.Now()
		}
		return
	}
	g.state = groupStable
}

// armCGSession (re)starts m's session timer.
func (g *group) armCGSession(m *cgMember) {
	if m.session != nil {
		m.session.Stop()
	}
	m.session = g.after(g.c.cgSessionTimeout(), func() {
		if g.cg != nil {
			g.removeCGMember(m, "session timeout")
		}
	})
}

// subscribedTopicsOf resolves m's subscription against the existing
// topics: its names that exist, plus every topic its regex matches
// entirely (Kafka matches with RE2J Matcher.matches). Internal topics are
// matched too, as Kafka's broker-side resolution does (franz-go's
// Test848RegexBrokerResolves expects __consumer_offsets assigned when the
// pattern names it); client-side regex consumers skip them themselves.
func (m *cgMember) subscribedTopicsOf(all map[string]int32) []string {
	var out []string
	for _, t := range m.topics {
		if _, ok := all[t]; ok {
			out = append(out, t)
		}
	}
	if m.re != nil {
		for t := range all {
			if m.re.MatchString(t) && !slices.Contains(m.topics, t) {
				out = append(out, t)
			}
		}
	}
	sort.Strings(out)
	return out
}

// topicPartitionCounts snapshots every topic's partition count.
func (b *Broker) topicPartitionCounts() map[string]int32 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make(map[string]int32, len(b.topics))
	for name, t := range b.topics {
		out[name] = int32(len(t.partitions))
	}
	return out
}

// refreshTarget bumps the epoch if the subscribed topics' partitions
// changed (a topic created, deleted or grown) and recomputes the target
// assignment when the epoch moved. Caller holds g.mu.
func (g *group) refreshTarget() {
	cg := g.cg
	all := g.c.b.topicPartitionCounts()
	subs := map[string][]string{}
	used := map[string]bool{}
	for id, m := range cg.members {
		subs[id] = m.subscribedTopicsOf(all)
		for _, t := range subs[id] {
			used[t] = true
		}
	}
	var sig strings.Builder
	for _, t := range slices.Sorted(func(yield func(string) bool) {
		for t := range used {
			if !yield(t) {
				return
			}
		}
	}) {
		sig.WriteString(t)
		sig.WriteByte(0)
		sig.WriteString(strconv.Itoa(int(all[t])))
		sig.WriteByte(0)
	}
	if s := sig.String(); s != cg.subMeta {
		cg.subMeta = s
		cg.dirty = true
	}
	if !cg.dirty {
		return
	}
	cg.epoch++
	cg.dirty = false
	cg.assignor = cg.pickAssignor()
	if cg.assignor == assignorRange {
		cg.target = assignRange(subs, all)
	} else {
		cg.target = assignUniform(subs, all, cg.target)
	}
	cg.assignEpoch = cg.epoch
}

// pickAssignor is the assignor most members ask for (ties by name), or
// uniform, Kafka's first group.consumer.assignors entry.
func (cg *consumerGroup) pickAssignor() string {
	n := map[string]int{}
	for _, m := range cg.members {
		if m.assignor != "" {
			n[m.assignor]++
		}
	}
	best := assignorUniform
	for _, a := range []string{assignorRange, assignorUniform} {
		if n[a] > n[best] {
			best = a
		}
	}
	return best
}

// assignRange is Kafka's RangeAssignor (server side): per topic, the
// subscribed members in id order get consecutive ranges, the first
// (partitions % members) one partition more.
func assignRange(subs map[string][]string, all map[string]int32) map[string]map[tpKey]bool {
	out := map[string]map[tpKey]bool{}
	byTopic := map[string][]string{}
	for id, ts := range subs {
		out[id] = map[tpKey]bool{}
		for _, t := range ts {
			byTopic[t] = append(byTopic[t], id)
		}
	}
	for t, ids := range byTopic {
		sort.Strings(ids)
		n := int(all[t])
		per, extra := n/len(ids), n%len(ids)
		p := 0
		for i, id := range ids {
			k := per
			if i < extra {
				k++
			}
			for j := 0; j < k; j++ {
				out[id][tpKey{t, int32(p)}] = true
				p++
			}
		}
	}
	return out
}

// assignUniform spreads partitions evenly over the members subscribed to
// them, keeping each partition where the previous target had it when that
// stays balanced (Kafka's UniformAssignor is sticky the same way): keep
// previous owners up to an even share, give the rest to the least loaded
// eligible member, then move partitions from members with two or more
// above another eligible member until none is.
func assignUniform(subs map[string][]string, all map[string]int32, prev map[string]map[tpKey]bool) map[string]map[tpKey]bool {
	out := map[string]map[tpKey]bool{}
	eligible := map[tpKey][]string{}
	var parts []tpKey
	for id, ts := range subs {
		out[id] = map[tpKey]bool{}
		for _, t := range ts {
			for p := int32(0); p < all[t]; p++ {
				k := tpKey{t, p}
				if eligible[k] == nil {
					parts = append(parts, k)
				}
				eligible[k] = append(eligible[k], id)
			}
		}
	}
	if len(subs) == 0 || len(parts) == 0 {
		return out
	}
	for _, ids := range eligible {
		sort.Strings(ids)
	}
	// Partitions with the fewest candidates first, then by name.
	sort.Slice(parts, func(i, j int) bool {
		a, b := parts[i], parts[j]
		if la, lb := len(eligible[a]), len(eligible[b]); la != lb {
			return la < lb
		}
		if a.topic != b.topic {
			return a.topic < b.topic
		}
		return a.partition < b.partition
	})
	share := (len(parts) + len(subs) - 1) / len(subs)
	owner := map[tpKey]string{}
	for id, ps := range prev {
		if _, still := out[id]; !still {
			continue
		}
		for k := range ps {
			if slices.Contains(eligible[k], id) && len(out[id]) < share {
				out[id][k], owner[k] = true, id
			}
		}
	}
	for _, k := range parts {
		if _, ok := owner[k]; ok {
			continue
		}
		best := ""
		for _, id := range eligible[k] {
			if best == "" || len(out[id]) < len(out[best]) {
				best = id
			}
		}
		out[best][k], owner[k] = true, best
	}
	// Balance: bounded by the number of partitions per pass.
	for moved := true; moved; {
		moved = false
		for _, k := range parts {
			from := owner[k]
			for _, to := range eligible[k] {
				if len(out[from]) > len(out[to])+1 {
					delete(out[from], k)
					out[to][k], owner[k] = true, to
					moved = true
					break
				}
			}
		}
	}
	return out
}

// reconcile moves m one step towards its target (see the top of this
// file). owned is the member's reported partitions (nil: unchanged). It
// reports whether m's assignment or epoch changed. Caller holds g.mu.
func (g *group) reconcile(m *cgMember, owned map[tpKey]bool) bool {
	cg := g.cg
	changed := false
	if owned != nil {
		for tp := range m.revoking {
			if !owned[tp] {
				delete(m.revoking, tp)
				delete(m.assignedAt, tp)
				if cg.owner[tp] == m.id {
					delete(cg.owner, tp)
				}
			}
		}
		if len(m.revoking) == 0 && m.revokeBy != nil {
			m.revokeBy.Stop()
			m.revokeBy = nil
		}
	}
	if len(m.revoking) > 0 {
		return false
	}
	tgt := cg.target[m.id]
	if m.epoch != cg.assignEpoch {
		for tp := range m.assigned {
			if !tgt[tp] {
				delete(m.assigned, tp)
				m.revoking[tp] = true
			}
		}
		if len(m.revoking) > 0 {
			timeout := m.rebalanceTimeout
			if timeout <= 0 {
				timeout = g.c.cgSessionTimeout()
			}
			m.revokeBy = g.after(timeout, func() {
				if g.cg != nil && len(m.revoking) > 0 {
					g.removeCGMember(m, "partitions not revoked within the rebalance timeout")
				}
			})
			return true
		}
		m.prevEpoch, m.epoch = m.epoch, cg.assignEpoch
		changed = true
	}
	for tp := range tgt {
		if m.assigned[tp] {
			continue
		}
		if holder, ok := cg.owner[tp]; ok && holder != m.id {
			continue // still being revoked from holder
		}
		m.assigned[tp] = true
		if m.assignedAt == nil {
			m.assignedAt = map[tpKey]int32{}
		}
		m.assignedAt[tp] = m.epoch
		cg.owner[tp] = m.id
		changed = true
	}
	return changed
}

// assignmentTopics groups a partition set by topic id for a response;
// partitions of topics that no longer exist are left out.
func (b *Broker) assignmentTopics(set map[tpKey]bool) []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic {
	by := map[string][]int32{}
	for tp := range set {
		by[tp.topic] = append(by[tp.topic], tp.partition)
	}
	out := []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for t := range by {
			if !yield(t) {
				return
			}
		}
	}) {
		t := b.lookup(name)
		if t == nil {
			continue
		}
		ps := by[name]
		slices.Sort(ps)
		at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		at.TopicID, at.Partitions = t.id, ps
		out = append(out, at)
	}
	return out
}

// checkCGCommit validates an OffsetCommit from a consumer-group member
// as a whole: the member must exist (UNKNOWN_MEMBER_ID: a removed member
// is fenced) and not carry an epoch above its own (STALE_MEMBER_EPOCH).
// A commit with epoch < 0 and no member id is an admin commit, allowed
// while the group is empty. Each partition is then checked by
// cgCommitAllowed. Caller holds g.mu.
func (g *group) checkCGCommit(epoch int32, memberID string) int16 {
	if epoch < 0 && memberID == "" && len(g.cg.members) == 0 {
		return 0
	}
	m := g.cg.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case epoch > m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// cgCommitAllowed is the per-partition check of a member's commit
// (KIP-1251, Kafka 4.3): at the member's current epoch any partition may
// be committed, as Kafka allows; at an older epoch — a member commits its
// revoked partitions while its epoch moves on — only a partition the
// member still holds (assigned, or revoked and not yet released) and was
// given at or before that epoch. So once a member has released a
// partition, or was given it again later, a commit it sent earlier cannot
// move that partition's offset under the next owner. Admin commits (no
// member) pass. Caller holds g.mu and checkCGCommit passed.
func (g *group) cgCommitAllowed(epoch int32, memberID string, tp tpKey) bool {
	m := g.cg.members[memberID]
	if m == nil || epoch >= m.epoch {
		return true
	}
	at, held := m.assignedAt[tp]
	return held && at <= epoch
}
