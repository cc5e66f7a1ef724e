package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Share-group membership in the coordinator journal (as Kafka keeps
// ShareGroupMemberMetadata and ShareGroupMetadata records): one record per
// share group, key "h NUL group", with the group epoch, the subscription
// metadata and every member's id, client, subscription and epochs. The
// assignment is not stored: assignShare computes it from exactly these.
// After a restart the members are still there, so their heartbeats at
// their epochs are accepted; each gets a full session timeout. The record
// is written (without waiting for an fsync) whenever it changes, which a
// steady group's heartbeats do not do.

const shareGroupKeyPrefix = "h\x00"

type sgRecord struct {
	Epoch   int32            `json:"epoch"`
	SubMeta string           `json:"sub_meta"`
	Members []sgMemberRecord `json:"members"`
}

type sgMemberRecord struct {
	ID        string   `json:"id"`
	Rack      *string  `json:"rack,omitempty"`
	ClientID  string   `json:"client_id"`
	Host      string   `json:"host"`
	Topics    []string `json:"topics"`
	Epoch     int32    `json:"epoch"`
	PrevEpoch int32    `json:"prev_epoch"`
}

func (sg *shareGroup) record() sgRecord {
	rec := sgRecord{Epoch: sg.epoch, SubMeta: sg.subMeta}
	for _, id := range sortedKeys(sg.members) {
		m := sg.members[id]
		rec.Members = append(rec.Members, sgMemberRecord{ID: m.id, Rack: m.rack, ClientID: m.clientID, Host: m.host,
			Topics: m.topics, Epoch: m.epoch, PrevEpoch: m.prevEpoch})
	}
	return rec
}

// persistSG writes g's share-group membership if it changed. Caller holds
// g.mu.
func (g *group) persistSG() {
	if g.sg == nil || g.dead {
		return
	}
	raw, err := json.Marshal(g.sg.record())
	if err != nil {
		g.c.b.log.Error("encode share group", "group", g.name, "err", err)
		return
	}
	if bytes.Equal(raw, g.sg.saved) {
		return
	}
	// saved moves only once the record is written, so a failed write is
	// retried by the next persistSG (heartbeats call it).
	if _, err := g.c.j.write([]journalEntry{{shareGroupKeyPrefix + g.name, raw}}); err != nil {
		if g.c.share.writeFailed(time.Now()) {
			g.c.b.log.Error("write share group membership (retried on the next heartbeat; logged at most once a second)", "group", g.name, "err", err)
		}
		return
	}
	g.sg.saved = raw
}

// loadShareGroup restores a share group's members.
func (c *coordinator) loadShareGroup(e journalEntry) error {
	name := e.key[len(shareGroupKeyPrefix):]
	var rec sgRecord
	if err := json.Unmarshal(e.val, &rec); err != nil {
		return fmt.Errorf("coordinator journal: share group %q: %w", name, err)
	}
	g := c.gs[name]
	if g == nil {
		g = c.newGroup(name)
		c.gs[name] = g
	}
	if !g.becomeShare() {
		return nil // the id is in use by another protocol since
	}
	sg := g.sg
	sg.epoch, sg.subMeta, sg.saved = rec.Epoch, rec.SubMeta, e.val
	for _, mr := range rec.Members {
		m := &sgMember{id: mr.ID, rack: mr.Rack, clientID: mr.ClientID, host: mr.Host, topics: mr.Topics,
			epoch: mr.Epoch, prevEpoch: mr.PrevEpoch, assigned: map[tpKey]bool{}}
		sg.members[m.id] = m
		g.armSGSession(m)
	}
	if len(sg.members) > 0 {
		g.state = groupStable
		g.assignShare()
	}
	return nil
}
