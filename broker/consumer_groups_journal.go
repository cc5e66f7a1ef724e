package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// KIP-848 consumer-group membership in the coordinator journal, as Kafka
// keeps ConsumerGroupMemberMetadata, ConsumerGroupTargetAssignment and
// ConsumerGroupCurrentMemberAssignment records in __consumer_offsets: the
// group epoch, assignment epoch, assignor, and every member's subscription,
// epochs, assigned and revoking partitions and target. After a restart the
// members are still there: their next heartbeat at their epoch is accepted
// and they keep their partitions, instead of all being fenced and
// rejoining. A restored member gets a full session timeout to heartbeat.
//
// Records (written without waiting for an fsync: nothing a client was told
// depends on it): "k NUL group" holds the group (cgRecord), "m NUL group
// NUL member" each member (cgMemberRecord, which names its group and id, so
// ids holding NUL bytes are safe). A heartbeat writes its member's record if
// it changed, and every member's when the group's epoch or assignment
// moved, so a steady group costs one small write per changed heartbeat.

const (
	consumerGroupKeyPrefix  = "k\x00"
	consumerMemberKeyPrefix = "m\x00"
)

// cgRecord is the journal document of a consumer group.
type cgRecord struct {
	Epoch       int32  `json:"epoch"`
	AssignEpoch int32  `json:"assign_epoch"`
	Assignor    string `json:"assignor"`
	SubMeta     string `json:"sub_meta"`
}

type cgMemberRecord struct {
	Group       string    `json:"group"`
	ID          string    `json:"id"`
	Instance    *string   `json:"instance,omitempty"`
	Rack        *string   `json:"rack,omitempty"`
	ClientID    string    `json:"client_id"`
	Host        string    `json:"host"`
	RebalanceMs int64     `json:"rebalance_ms"`
	Topics      []string  `json:"topics"`
	Regex       *string   `json:"regex,omitempty"`
	Assignor    string    `json:"assignor,omitempty"`
	Epoch       int32     `json:"epoch"`
	PrevEpoch   int32     `json:"prev_epoch"`
	Assigned    []tpEntry `json:"assigned"`
	Revoking    []tpEntry `json:"revoking,omitempty"`
	Target      []tpEntry `json:"target"`
}

type tpEntry struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
}

func tpEntries(set map[tpKey]bool) []tpEntry {
	out := make([]tpEntry, 0, len(set))
	for tp := range set {
		out = append(out, tpEntry{tp.topic, tp.partition})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func tpSet(es []tpEntry) map[tpKey]bool {
	out := make(map[tpKey]bool, len(es))
	for _, e := range es {
		out[tpKey{e.Topic, e.Partition}] = true
	}
	return out
}

// cgSaved is the last record written per consumer group, so an unchanged
// group is not written again; its own leaf lock.
type cgSaved struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (cg *consumerGroup) record() cgRecord {
	return cgRecord{Epoch: cg.epoch, AssignEpoch: cg.assignEpoch, Assignor: cg.assignor, SubMeta: cg.subMeta}
}

func (cg *consumerGroup) memberRecord(group string, m *cgMember) cgMemberRecord {
	return cgMemberRecord{Group: group, ID: m.id, Instance: m.instance, Rack: m.rack, ClientID: m.clientID,
		Host: m.host, RebalanceMs: m.rebalanceTimeout.Milliseconds(), Topics: m.topics, Regex: m.regex, Assignor: m.assignor,
		Epoch: m.epoch, PrevEpoch: m.prevEpoch, Assigned: tpEntries(m.assigned), Revoking: tpEntries(m.revoking),
		Target: tpEntries(cg.target[m.id])}
}

func cgMemberKey(group, member string) string {
	return consumerMemberKeyPrefix + group + journalKeySep + member
}

// persistCG writes what changed of g's consumer-group state: the group
// record, the member m (nil: none in particular) and, when the group
// record changed, every member (their targets moved with it); removed
// members get tombstones. Caller holds g.mu.
func (g *group) persistCG(m *cgMember) {
	if g.cg == nil || g.dead {
		return
	}
	s := &g.c.cgSaved
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	var es []journalEntry
	put := func(key string, v any) {
		raw, err := json.Marshal(v)
		if err != nil {
			g.c.b.log.Error("encode consumer group", "group", g.name, "err", err)
			return
		}
		if !bytes.Equal(s.m[key], raw) {
			s.m[key] = raw
			es = append(es, journalEntry{key, raw})
		}
	}
	put(consumerGroupKeyPrefix+g.name, g.cg.record())
	all := len(es) > 0
	for id, mm := range g.cg.members {
		if all || mm == m {
			put(cgMemberKey(g.name, id), g.cg.memberRecord(g.name, mm))
		}
	}
	for _, id := range g.cg.removed {
		key := cgMemberKey(g.name, id)
		delete(s.m, key)
		es = append(es, journalEntry{key, nil})
	}
	g.cg.removed = nil
	g.c.j.putMany(es)
}

// forgetCG drops g's saved consumer-group records (group removal) and
// returns their tombstones.
func (c *coordinator) forgetCG(name string) []journalEntry {
	c.cgSaved.mu.Lock()
	defer c.cgSaved.mu.Unlock()
	es := []journalEntry{{consumerGroupKeyPrefix + name, nil}}
	delete(c.cgSaved.m, consumerGroupKeyPrefix+name)
	prefix := consumerMemberKeyPrefix + name + journalKeySep
	for k := range c.cgSaved.m {
		if strings.HasPrefix(k, prefix) {
			delete(c.cgSaved.m, k)
			es = append(es, journalEntry{k, nil})
		}
	}
	return es
}

// loadConsumerGroup restores a group record. A group that has classic
// members (it changed protocol since) ignores it.
func (c *coordinator) loadConsumerGroup(e journalEntry) error {
	name := e.key[len(consumerGroupKeyPrefix):]
	var rec cgRecord
	if err := json.Unmarshal(e.val, &rec); err != nil {
		return fmt.Errorf("coordinator journal: consumer group %q: %w", name, err)
	}
	g := c.gs[name]
	if g == nil {
		g = c.newGroup(name)
		c.gs[name] = g
	}
	if len(g.members) > 0 || g.sg != nil {
		return nil
	}
	cg := newConsumerGroup()
	cg.epoch, cg.assignEpoch, cg.assignor, cg.subMeta = rec.Epoch, rec.AssignEpoch, rec.Assignor, rec.SubMeta
	if cg.assignor == "" {
		cg.assignor = assignorUniform
	}
	g.cg, g.protocolType = cg, groupTypeConsumer
	c.saveLoaded(e)
	return nil
}

// loadConsumerMember restores a member record (after its group's).
func (c *coordinator) loadConsumerMember(e journalEntry) error {
	var mr cgMemberRecord
	if err := json.Unmarshal(e.val, &mr); err != nil {
		return fmt.Errorf("coordinator journal: consumer group member %q: %w", e.key, err)
	}
	g := c.gs[mr.Group]
	if g == nil || g.cg == nil || len(g.members) > 0 {
		return nil // the group changed protocol or was removed
	}
	m := &cgMember{id: mr.ID, instance: mr.Instance, rack: mr.Rack, clientID: mr.ClientID, host: mr.Host,
		rebalanceTimeout: time.Duration(mr.RebalanceMs) * time.Millisecond, topics: mr.Topics, regex: mr.Regex,
		assignor: mr.Assignor, epoch: mr.Epoch, prevEpoch: mr.PrevEpoch, assigned: tpSet(mr.Assigned), revoking: tpSet(mr.Revoking)}
	if m.regex != nil {
		re, err := regexp.Compile("^(?:" + *m.regex + ")$")
		if err != nil {
			return fmt.Errorf("coordinator journal: consumer group %q member %s: regex: %w", mr.Group, m.id, err)
		}
		m.re = re
	}
	cg := g.cg
	cg.members[m.id] = m
	cg.target[m.id] = tpSet(mr.Target)
	for tp := range m.assigned {
		cg.owner[tp] = m.id
	}
	for tp := range m.revoking {
		cg.owner[tp] = m.id
	}
	// Assignment epochs (KIP-1251 commit fencing) are not journaled: a
	// held partition counts as given at the member's previous epoch, so
	// commits from the epoch before the restart still land.
	m.assignedAt = map[tpKey]int32{}
	for tp := range m.assigned {
		m.assignedAt[tp] = m.prevEpoch
	}
	for tp := range m.revoking {
		m.assignedAt[tp] = m.prevEpoch
	}
	g.armCGSession(m)
	g.syncCGState()
	c.saveLoaded(e)
	return nil
}

// saveLoaded remembers a loaded record as written.
func (c *coordinator) saveLoaded(e journalEntry) {
	c.cgSaved.mu.Lock()
	defer c.cgSaved.mu.Unlock()
	if c.cgSaved.m == nil {
		c.cgSaved.m = map[string][]byte{}
	}
	c.cgSaved.m[e.key] = e.val
}
