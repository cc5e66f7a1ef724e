package broker

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group coordinator: classic consumer groups (JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup) and committed offsets, as Kafka's
// GroupCoordinator / ClassicGroup.
//
// Ownership: coordinator.mu guards only the map of groups; each group's
// state is guarded by its own group.mu. A handler looks the group up, locks
// it, mutates it and writes what must be durable to the coordinator
// journal (a write(2)); replies that promise durability (OffsetCommit, the
// SyncGroup that completes a rebalance) wait for the journal's fsync in a
// goroutine, never while holding a lock. Timers (session, rebalance, pending
// sync) lock the group and check that what they were armed for still holds.
// Lock order: (txn.mu,) coordinator.mu, then group.mu, then Broker.mu,
// then journal.mu. A group
// removed from the map is marked dead; a handler that locked a dead group
// looks it up again.
//
// State machine (Kafka's ClassicGroupState):
//
//	Empty --join--> PreparingRebalance --all joined or rebalance timeout-->
//	CompletingRebalance --leader's SyncGroup--> Stable --join/leave/expiry-->
//	PreparingRebalance ...; a rebalance that ends with no members goes Empty.

type groupState int8

const (
	groupEmpty groupState = iota
	groupPreparingRebalance
	groupCompletingRebalance
	groupStable
	groupDead
)

func (s groupState) String() string {
	switch s {
	case groupEmpty:
		return "Empty"
	case groupPreparingRebalance:
		return "PreparingRebalance"
	case groupCompletingRebalance:
		return "CompletingRebalance"
	case groupStable:
		return "Stable"
	}
	return "Dead"
}

// Defaults, as Kafka's broker configs of the same names.
const (
	defaultGroupMinSession  = 6 * time.Second        // group.min.session.timeout.ms
	defaultGroupMaxSession  = 30 * time.Minute       // group.max.session.timeout.ms
	defaultOffsetsRetention = 7 * 24 * time.Hour     // offsets.retention.minutes
	maxOffsetMetadata       = 4096                   // offset.metadata.max.bytes
	groupExpiryCheckMax     = 10 * time.Minute       // offsets.retention.check.interval.ms
	groupExpiryCheckMin     = 100 * time.Millisecond // floor for tests with tiny retention
	groupOpsAuthorized      = 1<<3 | 1<<6 | 1<<8     // READ, DELETE, DESCRIBE (AclOperation codes)
	authorizedOpsOmitted    = int32(-2147483648)     // INT32_MIN: not requested
	memberIDSuffixBytes     = 16                     // random part of a member id
	consumerProtocolType    = "consumer"             // the protocol type whose metadata we parse
	offsetKeyPrefix         = "o\x00"                // journal key: o NUL group NUL topic NUL partition
	groupKeyPrefix          = "g\x00"                // journal key: g NUL group
	journalKeySep           = "\x00"
	groupTypeClassic        = "classic" // ListGroups v5 group type
)

// committed is one committed offset.
type committed struct {
	Offset      int64   `json:"offset"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Metadata    *string `json:"metadata,omitempty"`
	CommitMs    int64   `json:"commit_ms"`
}

// member is one classic group member.
type member struct {
	id         string
	instance   *string
	clientID   string
	clientHost string
	rebalance  time.Duration
	session    time.Duration
	protocols  []kmsg.JoinGroupRequestProtocol
	assignment []byte

	join   *kmsg.JoinGroupRequest // waiting JoinGroup, or nil
	joinR  reply
	sync   *kmsg.SyncGroupRequest // waiting SyncGroup, or nil
	syncR  reply
	timer  *time.Timer // session expiry
	expiry time.Time   // when timer fires (for restored members)
}

// group is one consumer group; every field is guarded by mu.
type group struct {
	c    *coordinator
	name string

	mu           sync.Mutex
	state        groupState
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	pending      map[string]*time.Timer // KIP-394 member ids handed out, not yet joined
	static       map[string]string      // group.instance.id -> member id
	nJoining     int                    // members with a waiting JoinGroup
	rebalanceT   *time.Timer
	syncT        *time.Timer
	pendingSync  map[string]bool
	offsets      map[string]map[int32]committed
	emptySince   time.Time
	dead         bool
	// cg is set for a KIP-848 consumer group (consumer_groups.go); its
	// members are not in members.
	cg *consumerGroup
	// sg is set for a KIP-932 share group (share_groups.go).
	sg *shareGroup
}

// coordinator owns every group.
type coordinator struct {
	b  *Broker
	j  *journal
	mu sync.Mutex
	gs map[string]*group

	minSession, maxSession time.Duration
	retention              time.Duration

	gcfg       groupConfigs  // GROUP config resources (group_configs.go)
	cgSaved    cgSaved       // last KIP-848 records written (consumer_groups_journal.go)
	share      shareCounters // share-group totals (share_stats.go)
	shareConns shareConns    // share sessions by connection (share_session.go)
}

func newCoordinator(b *Broker, j *journal) *coordinator {
	c := &coordinator{b: b, j: j, gs: map[string]*group{},
		minSession: b.cfg.GroupMinSessionTimeout, maxSession: b.cfg.GroupMaxSessionTimeout, retention: b.cfg.OffsetsRetention}
	if c.minSession <= 0 {
		c.minSession = defaultGroupMinSession
	}
	if c.maxSession <= 0 {
		c.maxSession = defaultGroupMaxSession
	}
	if c.retention <= 0 {
		c.retention = defaultOffsetsRetention
	}
	return c
}

func (c *coordinator) newGroup(name string) *group {
	return &group{c: c, name: name, members: map[string]*member{}, pending: map[string]*time.Timer{},
		static: map[string]string{}, offsets: map[string]map[int32]committed{}, emptySince: time.Now()}
}

// lock returns the named group locked; create makes it (Empty) if absent.
// It returns nil if the group does not exist and create is false.
func (c *coordinator) lock(name string, create bool) *group {
	for {
		c.mu.Lock()
		g := c.gs[name]
		if g == nil {
			if !create {
				c.mu.Unlock()
				return nil
			}
			g = c.newGroup(name)
			c.gs[name] = g
		}
		c.mu.Unlock()
		g.mu.Lock()
		if !g.dead {
			return g
		}
		g.mu.Unlock()
	}
}

// groups returns every group (unlocked).
func (c *coordinator) groups() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*group, 0, len(c.gs))
	for _, g := range c.gs {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// removeLocked deletes g (locked by the caller) from the map and the
// journal. The caller holds g.mu but not c.mu; a concurrent lock of the
// same name sees g.dead and retries.
func (g *group) removeLocked() <-chan error {
	g.dead = true
	g.state = groupDead
	g.stopTimers()
	g.c.mu.Lock()
	if g.c.gs[g.name] == g {
		delete(g.c.gs, g.name)
	}
	g.c.mu.Unlock()
	es := append([]journalEntry{{groupKey(g.name), nil}}, g.c.forgetCG(g.name)...)
	var recs []mirrorRecord
	if g.isClassic() {
		recs = append(recs, mirrorRecord{key: groupMetadataKey(g.name)})
	}
	for t, ps := range g.offsets {
		for p := range ps {
			es = append(es, journalEntry{offsetKey(g.name, t, p), nil})
			recs = append(recs, offsetCommitRecord(g.name, t, p, nil))
		}
	}
	g.c.b.mirror.enqueue(recs) // offsets_topic.go
	g.offsets = map[string]map[int32]committed{}
	if g.sg != nil {
		for range g.sg.sessions {
			g.c.shareConns.release()
		}
		g.sg.sessions = map[string]*shareSession{}
		es = append(es, journalEntry{shareGroupKeyPrefix + g.name, nil})
		for tp := range g.sg.parts {
			es = append(es, journalEntry{sharePartKey(g.name, tp), nil})
		}
		g.sg.parts = map[tpKey]*sharePartition{}
	}
	return g.c.j.putMany(es)
}

func (g *group) stopTimers() {
	for _, m := range g.members {
		if m.timer != nil {
			m.timer.Stop()
		}
	}
	for _, t := range g.pending {
		t.Stop()
	}
	if g.rebalanceT != nil {
		g.rebalanceT.Stop()
	}
	if g.syncT != nil {
		g.syncT.Stop()
	}
	if g.cg != nil {
		g.cg.stopTimers()
	}
	if g.sg != nil {
		g.sg.stopTimers()
	}
}

// newMemberID is Kafka's shape: client id (or instance id) dash random.
func newMemberID(clientID string, instance *string) string {
	prefix := clientID
	if instance != nil {
		prefix = *instance
	}
	var u [memberIDSuffixBytes]byte
	_, _ = rand.Read(u[:])
	return prefix + "-" + hex.EncodeToString(u[:])
}

// timer arms fn to run under g.mu after d unless the group died.
func (g *group) after(d time.Duration, fn func()) *time.Timer {
	return time.AfterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.dead {
			fn()
		}
	})
}

// heartbeat (re)arms m's session timer.
func (g *group) heartbeat(m *member) {
	g.armSession(m, m.session)
}

func (g *group) armSession(m *member, d time.Duration) {
	if m.timer != nil {
		m.timer.Stop()
	}
	m.expiry = time.Now().Add(d)
	m.timer = g.after(d, func() {
		if g.members[m.id] != m {
			return
		}
		if m.join != nil || m.sync != nil {
			// A member waiting in JoinGroup or SyncGroup is alive
			// (Kafka's shouldKeepAlive): the rebalance deadlines bound it.
			g.armSession(m, m.session)
			return
		}
		g.c.b.log.Info("group member session expired", "group", g.name, "member", m.id)
		g.removeMember(m)
		g.rebalance()
	})
}

// addPending remembers a KIP-394 member id for one session timeout.
func (g *group) addPending(id string, session time.Duration) {
	g.pending[id] = g.after(session, func() { delete(g.pending, id) })
}

// removeMember drops m without starting a rebalance. A waiting JoinGroup
// or SyncGroup is answered UNKNOWN_MEMBER_ID.
func (g *group) removeMember(m *member) {
	delete(g.members, m.id)
	if m.instance != nil && g.static[*m.instance] == m.id {
		delete(g.static, *m.instance)
	}
	if m.timer != nil {
		m.timer.Stop()
	}
	if m.join != nil {
		g.nJoining--
		resp := m.join.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		m.joinR(encode(resp), nil)
		m.join, m.joinR = nil, nil
	}
	if m.sync != nil {
		resp := m.sync.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		m.syncR(encode(resp), nil)
		m.sync, m.syncR = nil, nil
	}
	delete(g.pendingSync, m.id)
	if g.leader == m.id {
		g.leader = ""
	}
}

// rebalance moves the group to PreparingRebalance (answering waiting
// SyncGroups REBALANCE_IN_PROGRESS) and completes the join phase at once if
// every member has rejoined, or when the rebalance timeout fires.
func (g *group) rebalance() {
	if g.state == groupCompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			if m.sync != nil {
				resp := m.sync.ResponseKind().(*kmsg.SyncGroupResponse)
				resp.ErrorCode = kerr.RebalanceInProgress.Code
				m.syncR(encode(resp), nil)
				m.sync, m.syncR = nil, nil
			}
		}
	}
	if g.syncT != nil {
		g.syncT.Stop()
		g.syncT = nil
	}
	g.pendingSync = nil
	entering := g.state != groupPreparingRebalance
	g.state = groupPreparingRebalance
	if g.nJoining >= len(g.members) {
		g.completeJoin()
		return
	}
	if entering {
		// Kafka's DelayedJoin: one deadline per rebalance, the longest
		// rebalance timeout of the members, not reset by later joins.
		gen := g.generation
		g.rebalanceT = g.after(g.maxRebalance(), func() {
			if g.generation == gen && g.state == groupPreparingRebalance {
				g.completeJoin()
			}
		})
	}
}

func (g *group) maxRebalance() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalance)
	}
	return d
}

// completeJoin ends the join phase: dynamic members that did not rejoin are
// removed (static ones keep their place, KIP-345), the generation moves on,
// a protocol is chosen and every waiting JoinGroup is answered.
func (g *group) completeJoin() {
	if g.rebalanceT != nil {
		g.rebalanceT.Stop()
		g.rebalanceT = nil
	}
	for _, m := range g.members {
		if m.join == nil && m.instance == nil {
			g.removeMember(m)
		}
	}
	g.generation++
	if g.nJoining == 0 {
		// Nobody is waiting: static members that did not rejoin cannot
		// form a generation either.
		for _, m := range g.members {
			g.removeMember(m)
		}
	}
	if len(g.members) == 0 {
		g.state = groupEmpty
		g.emptySince = time.Now()
		g.protocol, g.leader = "", ""
		// Kept until the expiry pass removes it (with its offsets).
		g.persist()
		return
	}
	g.state = groupCompletingRebalance
	g.protocol = g.selectProtocol()
	if m := g.members[g.leader]; m == nil || m.join == nil {
		g.leader = ""
		for _, id := range g.sortedMemberIDs() {
			if g.members[id].join != nil {
				g.leader = id
				break
			}
		}
	}
	g.nJoining = 0
	g.pendingSync = map[string]bool{}
	for _, m := range g.members {
		if m.join == nil {
			continue
		}
		g.pendingSync[m.id] = true
		resp := m.join.ResponseKind().(*kmsg.JoinGroupResponse)
		g.fillJoin(m.id, resp)
		m.joinR(encode(resp), nil)
		m.join, m.joinR = nil, nil
		g.heartbeat(m)
	}
	// Members that do not send SyncGroup within the rebalance timeout are
	// removed (Kafka's pending-sync expiry, KAFKA-13766).
	gen := g.generation
	g.syncT = g.after(g.maxRebalance(), func() {
		if g.generation != gen || g.state != groupCompletingRebalance || len(g.pendingSync) == 0 {
			return
		}
		for id := range g.pendingSync {
			if m := g.members[id]; m != nil {
				g.removeMember(m)
			}
		}
		g.rebalance()
	})
}

func (g *group) sortedMemberIDs() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// selectProtocol is Kafka's vote: among protocols every member supports,
// each member votes for the first one in its own preference order.
func (g *group) selectProtocol() string {
	support := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			support[p.Name]++
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if support[p.Name] == len(g.members) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for name, v := range votes {
		if v > bestVotes || v == bestVotes && name < best {
			best, bestVotes = name, v
		}
	}
	return best
}

// supportsGroupProtocols reports whether a joining member is compatible:
// same protocol type, and at least one protocol every current member
// supports (Kafka's ClassicGroup.supportsProtocols).
func (g *group) supportsGroupProtocols(protocolType string, ps []kmsg.JoinGroupRequestProtocol, self string) bool {
	if protocolType == "" || len(ps) == 0 {
		return false
	}
	if g.sg != nil {
		return false // a share group id is not usable by the classic protocol
	}
	if g.cg != nil {
		if len(g.cg.members) > 0 {
			return false // a KIP-848 group in use: no mixing of protocols
		}
		g.cg = nil // an empty consumer group becomes classic
	}
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	others := 0
	support := map[string]int{}
	for id, m := range g.members {
		if id == self {
			continue
		}
		others++
		for _, p := range m.protocols {
			support[p.Name]++
		}
	}
	if others == 0 {
		return true
	}
	for _, p := range ps {
		if support[p.Name] == others {
			return true
		}
	}
	return false
}

func (g *group) fillJoin(memberID string, resp *kmsg.JoinGroupResponse) {
	resp.Generation = g.generation
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.LeaderID = g.leader
	resp.MemberID = memberID
	if memberID != g.leader {
		return
	}
	for _, id := range g.sortedMemberIDs() {
		m := g.members[id]
		for _, p := range m.protocols {
			if p.Name == g.protocol {
				jm := kmsg.NewJoinGroupResponseMember()
				jm.MemberID, jm.InstanceID, jm.ProtocolMetadata = m.id, m.instance, p.Metadata
				resp.Members = append(resp.Members, jm)
				break
			}
		}
	}
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Metadata, b[i].Metadata) {
			return false
		}
	}
	return true
}

// checkInstance is Kafka's static membership check: a known instance id
// must come with the member id it was given, else FENCED_INSTANCE_ID.
func (g *group) checkInstance(instance *string, memberID string) int16 {
	if instance == nil {
		return 0
	}
	known, ok := g.static[*instance]
	switch {
	case !ok:
		return kerr.UnknownMemberID.Code
	case known != memberID:
		return kerr.FencedInstanceID.Code
	}
	return 0
}

// setEmptyIfNoMembers records when the group became empty, for expiry.
func (g *group) setEmptyIfNoMembers() {
	if len(g.members) == 0 && g.state != groupEmpty {
		g.state = groupEmpty
		g.emptySince = time.Now()
	}
}

// subscribedTopics is the union of every member's subscription, for a
// "consumer" group in a state where metadata is known; nil otherwise.
func (g *group) subscribedTopics() map[string]bool {
	if g.protocolType != consumerProtocolType || g.protocol == "" {
		return nil
	}
	out := map[string]bool{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if p.Name != g.protocol {
				continue
			}
			var md kmsg.ConsumerMemberMetadata
			if err := md.ReadFrom(p.Metadata); err != nil {
				continue
			}
			for _, t := range md.Topics {
				out[t] = true
			}
		}
	}
	return out
}

// --- persistence ---

func groupKey(name string) string { return groupKeyPrefix + name }

func offsetKey(groupName, topic string, p int32) string {
	return offsetKeyPrefix + groupName + journalKeySep + topic + journalKeySep + strconv.Itoa(int(p))
}

// splitOffsetKey returns the group, topic and partition of an offset key.
// It splits from the right: topic names and partition numbers never hold
// the separator, group ids may.
func splitOffsetKey(key string) ([3]string, bool) {
	rest := key[len(offsetKeyPrefix):]
	i := strings.LastIndex(rest, journalKeySep)
	if i < 0 {
		return [3]string{}, false
	}
	j := strings.LastIndex(rest[:i], journalKeySep)
	if j < 0 {
		return [3]string{}, false
	}
	return [3]string{rest[:j], rest[j+1 : i], rest[i+1:]}, true
}

// groupRecord is the journal document of a group's metadata.
type groupRecord struct {
	ProtocolType string         `json:"protocol_type"`
	Protocol     string         `json:"protocol"`
	Generation   int32          `json:"generation"`
	Leader       string         `json:"leader"`
	EmptySinceMs int64          `json:"empty_since_ms"`
	Members      []memberRecord `json:"members"`
}

type memberRecord struct {
	ID          string          `json:"id"`
	Instance    *string         `json:"instance,omitempty"`
	ClientID    string          `json:"client_id"`
	ClientHost  string          `json:"client_host"`
	RebalanceMs int64           `json:"rebalance_ms"`
	SessionMs   int64           `json:"session_ms"`
	Protocols   []protocolEntry `json:"protocols"`
	Assignment  []byte          `json:"assignment"`
}

type protocolEntry struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

// persist writes the group's metadata: members and assignments of a
// Stable group, or an Empty group's protocol type and generation. States
// in the middle of a rebalance are not written; a restart resumes from
// the last stable generation, whose members rejoin or expire.
func (g *group) persist() <-chan error {
	rec := groupRecord{ProtocolType: g.protocolType, Generation: g.generation, EmptySinceMs: g.emptySince.UnixMilli()}
	if g.state == groupStable {
		rec.Protocol, rec.Leader = g.protocol, g.leader
		for _, id := range g.sortedMemberIDs() {
			m := g.members[id]
			mr := memberRecord{ID: m.id, Instance: m.instance, ClientID: m.clientID, ClientHost: m.clientHost,
				RebalanceMs: m.rebalance.Milliseconds(), SessionMs: m.session.Milliseconds(), Assignment: m.assignment}
			for _, p := range m.protocols {
				mr.Protocols = append(mr.Protocols, protocolEntry{p.Name, p.Metadata})
			}
			rec.Members = append(rec.Members, mr)
		}
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		ch := make(chan error, 1)
		ch <- fmt.Errorf("encode group %s: %w", g.name, err)
		return ch
	}
	g.mirrorGroupMetadata() // offsets_topic.go
	return g.c.j.put(groupKey(g.name), raw)
}

// load rebuilds every group from the journal. Restored members get a full
// session timeout to heartbeat again.
func (c *coordinator) load(entries []journalEntry) error {
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.key, groupKeyPrefix):
			name := e.key[len(groupKeyPrefix):]
			var rec groupRecord
			if err := json.Unmarshal(e.val, &rec); err != nil {
				return fmt.Errorf("coordinator journal: group %q: %w", name, err)
			}
			g := c.gs[name]
			if g == nil {
				g = c.newGroup(name)
				c.gs[name] = g
			}
			g.restore(rec)
		case strings.HasPrefix(e.key, offsetKeyPrefix):
			parts, ok := splitOffsetKey(e.key)
			if !ok {
				return fmt.Errorf("coordinator journal: bad offset key %q", e.key)
			}
			p, err := strconv.ParseInt(parts[2], 10, 32)
			if err != nil {
				return fmt.Errorf("coordinator journal: bad offset key %q: %w", e.key, err)
			}
			var oc committed
			if err := json.Unmarshal(e.val, &oc); err != nil {
				return fmt.Errorf("coordinator journal: offset %q: %w", e.key, err)
			}
			g := c.gs[parts[0]]
			if g == nil {
				g = c.newGroup(parts[0])
				c.gs[parts[0]] = g
			}
			g.setOffset(parts[1], int32(p), oc)
		case strings.HasPrefix(e.key, shareGroupKeyPrefix):
			if err := c.loadShareGroup(e); err != nil {
				return err
			}
		case strings.HasPrefix(e.key, shareGroupPartitionKeyPrefix):
			if err := c.loadSharePart(e); err != nil {
				return err
			}
		case strings.HasPrefix(e.key, consumerGroupKeyPrefix):
			if err := c.loadConsumerGroup(e); err != nil {
				return err
			}
		case strings.HasPrefix(e.key, consumerMemberKeyPrefix):
			if err := c.loadConsumerMember(e); err != nil {
				return err
			}
		case strings.HasPrefix(e.key, groupConfigKeyPrefix):
			if err := c.loadGroupConfig(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *group) restore(rec groupRecord) {
	g.protocolType, g.protocol, g.generation, g.leader = rec.ProtocolType, rec.Protocol, rec.Generation, rec.Leader
	g.emptySince = time.UnixMilli(rec.EmptySinceMs)
	g.state = groupEmpty
	for _, mr := range rec.Members {
		m := &member{id: mr.ID, instance: mr.Instance, clientID: mr.ClientID, clientHost: mr.ClientHost,
			rebalance: time.Duration(mr.RebalanceMs) * time.Millisecond, session: time.Duration(mr.SessionMs) * time.Millisecond,
			assignment: mr.Assignment}
		for _, p := range mr.Protocols {
			m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		g.members[m.id] = m
		if m.instance != nil {
			g.static[*m.instance] = m.id
		}
		g.heartbeat(m)
	}
	if len(g.members) > 0 {
		g.state = groupStable
	}
}

func (g *group) setOffset(topic string, p int32, oc committed) {
	ps := g.offsets[topic]
	if ps == nil {
		ps = map[int32]committed{}
		g.offsets[topic] = ps
	}
	ps[p] = oc
}

// offsetCommit is one offset to store.
type offsetCommit struct {
	topic     string
	partition int32
	committed
}

// commit stores offsets in memory and the journal (one write).
func (g *group) commit(ocs []offsetCommit) <-chan error {
	es := make([]journalEntry, 0, len(ocs))
	recs := make([]mirrorRecord, 0, len(ocs))
	for _, oc := range ocs {
		g.setOffset(oc.topic, oc.partition, oc.committed)
		raw, _ := json.Marshal(oc.committed) // numbers and a string: cannot fail
		es = append(es, journalEntry{offsetKey(g.name, oc.topic, oc.partition), raw})
		recs = append(recs, offsetCommitRecord(g.name, oc.topic, oc.partition, &oc.committed))
	}
	durable := g.c.j.putMany(es)
	g.c.b.mirror.enqueue(recs) // offsets_topic.go
	return durable
}

// deleteOffset removes one committed offset.
func (g *group) deleteOffset(topic string, p int32) <-chan error {
	if ps := g.offsets[topic]; ps != nil {
		delete(ps, p)
		if len(ps) == 0 {
			delete(g.offsets, topic)
		}
	}
	durable := g.c.j.put(offsetKey(g.name, topic, p), nil)
	g.c.b.mirror.enqueue([]mirrorRecord{offsetCommitRecord(g.name, topic, p, nil)})
	return durable
}

// --- expiry ---

// expiryLoop expires the offsets of empty groups and drops empty groups
// with nothing committed (Kafka's offsets.retention.minutes, KIP-211).
func (c *coordinator) expiryLoop(stop <-chan struct{}) {
	every := min(max(c.retention/4, groupExpiryCheckMin), groupExpiryCheckMax)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			c.expire(now)
		}
	}
}

// expire runs one expiry pass. Groups with a protocol type lose all their
// offsets once they have been empty for the retention period; standalone
// groups (simple commits, no members ever) lose each offset the retention
// period after it was committed.
func (c *coordinator) expire(now time.Time) {
	expired := 0
	defer func() {
		// One line per pass: clients can create groups at will.
		if expired > 0 {
			c.b.log.Info("groups expired", "count", expired)
		}
	}()
	for _, g := range c.groups() {
		// Asked before locking the group: the transaction coordinator
		// takes txn.mu before group.mu.
		if c.b.txns != nil && c.b.txns.groupHasPending(g.name) {
			continue
		}
		g.mu.Lock()
		if g.dead || g.state != groupEmpty {
			g.mu.Unlock()
			continue
		}
		for t, ps := range g.offsets {
			for p, oc := range ps {
				base := g.emptySince
				if g.protocolType == "" {
					base = time.UnixMilli(oc.CommitMs)
				}
				if now.Sub(base) >= c.retention {
					g.deleteOffset(t, p)
				}
			}
		}
		if len(g.offsets) == 0 && len(g.pending) == 0 && (g.sg == nil || len(g.sg.parts) == 0) {
			c.b.log.Debug("group expired", "group", g.name)
			g.removeLocked()
			expired++
		}
		g.mu.Unlock()
	}
}

// GroupLag is one committed partition of one group, for metrics.
type GroupLag struct {
	Group     string
	Topic     string
	Partition int32
	// Committed is the group's committed offset; End is the partition's
	// high watermark (-1 if the topic or partition no longer exists).
	Committed int64
	End       int64
	// Lag is End - Committed (0 when End is unknown or behind).
	Lag int64
	// Members is the group's member count when it was read.
	Members int
}

// memberCount is the group's members, classic or KIP-848. Caller holds
// g.mu.
func (g *group) memberCount() int {
	n := len(g.members)
	if g.cg != nil {
		n += len(g.cg.members)
	}
	if g.sg != nil {
		n += len(g.sg.members)
	}
	return n
}

// GroupLag returns the lag of every committed partition of every group,
// sorted by group, topic and partition. It takes each group's lock in turn
// and no lock across partition reads.
func (b *Broker) GroupLag() []GroupLag {
	var out []GroupLag
	for _, g := range b.groups.groups() {
		g.mu.Lock()
		for t, ps := range g.offsets {
			for p, oc := range ps {
				out = append(out, GroupLag{Group: g.name, Topic: t, Partition: p, Committed: oc.Offset, End: -1, Members: g.memberCount()})
			}
		}
		g.mu.Unlock()
	}
	for i := range out {
		l := &out[i]
		if p := b.partitionOf(b.lookup(l.Topic), l.Partition); p != nil {
			l.End = p.log.HighWatermark()
			if l.Committed >= 0 && l.End > l.Committed {
				l.Lag = l.End - l.Committed
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return out
}

// waitThen runs fn once every channel has yielded, in its own goroutine;
// fn gets the first error.
func waitThen(chs []<-chan error, fn func(error)) {
	go func() {
		var first error
		for _, ch := range chs {
			if err := <-ch; err != nil && first == nil {
				first = err
			}
		}
		fn(first)
	}()
}

// openCoordinators opens the coordinator journal, restores groups and
// transactions (finishing transactions a crash interrupted) and starts the
// expiry and transaction-timeout loops.
func (b *Broker) openCoordinators() error {
	j, err := openJournal(b.cfg.DataDir, b.cfg.Fsync, b.cfg.FsyncInterval, b.log)
	if err != nil {
		return err
	}
	b.journal = j
	b.groups = newCoordinator(b, j)
	b.txns = newTxnCoordinator(b, j)
	b.mirror = newOffsetsMirror(b)
	entries := j.snapshot()
	if err := b.groups.load(entries); err != nil {
		b.groups.stop()
		_ = j.close()
		return err
	}
	if err := b.txns.load(entries); err != nil {
		b.groups.stop()
		_ = j.close()
		return err
	}
	b.syncOffsetsTopic()
	b.bg.Add(4)
	go func() {
		defer b.bg.Done()
		b.mirror.run(b.stop)
	}()
	go func() {
		defer b.bg.Done()
		b.groups.expiryLoop(b.stop)
	}()
	go func() {
		defer b.bg.Done()
		b.groups.shareSweepLoop(b.stop)
	}()
	go func() {
		defer b.bg.Done()
		b.txns.timeoutLoop(b.stop)
	}()
	return nil
}

// stop cancels every group timer (Close).
func (c *coordinator) stop() {
	for _, g := range c.groups() {
		g.mu.Lock()
		g.stopTimers()
		g.mu.Unlock()
	}
}
