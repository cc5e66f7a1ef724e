package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
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
// One journal record per group, key "k NUL group" (value cgRecord),
// written (without waiting for an fsync: nothing a client was told depends
// on it) after each heartbeat or member removal that changed it.

const consumerGroupKeyPrefix = "k\x00"

// cgRecord is the journal document of a consumer group.
type cgRecord struct {
	Epoch       int32            `json:"epoch"`
	AssignEpoch int32            `json:"assign_epoch"`
	Assignor    string           `json:"assignor"`
	SubMeta     string           `json:"sub_meta"`
	Members     []cgMemberRecord `json:"members"`
}

type cgMemberRecord struct {
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
	rec := cgRecord{Epoch: cg.epoch, AssignEpoch: cg.assignEpoch, Assignor: cg.assignor, SubMeta: cg.subMeta}
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		rec.Members = append(rec.Members, cgMemberRecord{ID: m.id, Instance: m.instance, Rack: m.rack, ClientID: m.clientID,
			Host: m.host, RebalanceMs: m.rebalanceTimeout.Milliseconds(), Topics: m.topics, Regex: m.regex, Assignor: m.assignor,
			Epoch: m.epoch, PrevEpoch: m.prevEpoch, Assigned: tpEntries(m.assigned), Revoking: tpEntries(m.revoking),
			Target: tpEntries(cg.target[m.id])})
	}
	return rec
}

// persistCG writes g's consumer-group state if it changed. Caller holds
// g.mu.
func (g *group) persistCG() {
	if g.cg == nil || g.dead {
		return
	}
	raw, err := json.Marshal(g.cg.record())
	if err != nil {
		g.c.b.log.Error("encode consumer group", "group", g.name, "err", err)
		return
	}
	s := &g.c.cgSaved
	s.mu.Lock()
	same := bytes.Equal(s.m[g.name], raw)
	if !same {
		if s.m == nil {
			s.m = map[string][]byte{}
		}
		s.m[g.name] = raw
	}
	s.mu.Unlock()
	if !same {
		g.c.j.put(consumerGroupKeyPrefix+g.name, raw)
	}
}

// forgetCG drops g's saved consumer-group record (group removal).
func (c *coordinator) forgetCG(name string) journalEntry {
	c.cgSaved.mu.Lock()
	delete(c.cgSaved.m, name)
	c.cgSaved.mu.Unlock()
	return journalEntry{consumerGroupKeyPrefix + name, nil}
}

// loadConsumerGroup restores one journal entry. A group that has classic
// members (it changed protocol since) ignores the record.
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
	for _, mr := range rec.Members {
		m := &cgMember{id: mr.ID, instance: mr.Instance, rack: mr.Rack, clientID: mr.ClientID, host: mr.Host,
			rebalanceTimeout: time.Duration(mr.RebalanceMs) * time.Millisecond, topics: mr.Topics, regex: mr.Regex,
			assignor: mr.Assignor, epoch: mr.Epoch, prevEpoch: mr.PrevEpoch, assigned: tpSet(mr.Assigned), revoking: tpSet(mr.Revoking)}
		if m.regex != nil {
			re, err := regexp.Compile("^(?:" + *m.regex + ")$")
			if err != nil {
				return fmt.Errorf("coordinator journal: consumer group %q member %s: regex: %w", name, m.id, err)
			}
			m.re = re
		}
		cg.members[m.id] = m
		cg.target[m.id] = tpSet(mr.Target)
		for tp := range m.assigned {
			cg.owner[tp] = m.id
		}
		for tp := range m.revoking {
			cg.owner[tp] = m.id
		}
		// Assignment epochs (KIP-1251 commit fencing) are not journaled:
		// a held partition counts as given at the member's previous epoch,
		// so commits from the epoch before the restart still land.
		m.assignedAt = map[tpKey]int32{}
		for tp := range m.assigned {
			m.assignedAt[tp] = m.prevEpoch
		}
		for tp := range m.revoking {
			m.assignedAt[tp] = m.prevEpoch
		}
		g.armCGSession(m)
	}
	g.syncCGState()
	c.cgSaved.mu.Lock()
	if c.cgSaved.m == nil {
		c.cgSaved.m = map[string][]byte{}
	}
	c.cgSaved.m[name] = e.val
	c.cgSaved.mu.Unlock()
	return nil
}
