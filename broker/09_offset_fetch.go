package broker

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch: v0-10
//
// Behavior:
// * A group that does not exist or never committed a partition answers
//   offset -1, leader epoch -1, empty metadata and no error, as Kafka
//   does (so a brand-new consumer falls back to auto.offset.reset).
// * Topics null (v2+; every v8+ group entry) fetches every committed
//   partition of the group.
// * RequireStable (v7+, KIP-447): a partition with a pending transactional
//   commit answers UNSTABLE_OFFSET_COMMIT, which clients retry.
// * v8+ fetches several groups; each group has its own error.
// * v9 MemberID/MemberEpoch (KIP-848 groups) are not checked (Kafka
//   answers STALE_MEMBER_EPOCH for a wrong one; accepting it only lets a
//   member read offsets it could read anyway).
// * v10 names topics by id; a committed topic that no longer exists is
//   left out of an "all topics" answer, an unknown requested id gets
//   UNKNOWN_TOPIC_ID.
//
// Version notes:
// * v1: offsets from the coordinator (v0 read ZooKeeper in old Kafka; here
//   both read the journal); v2: ErrorCode, null Topics; v3: ThrottleMillis
// * v5: LeaderEpoch; v6: flexible; v7: RequireStable; v8: Groups;
//   v10: topic ids

func init() { regKey(9, 0, 10, syncHandler(handleOffsetFetch)) }

func handleOffsetFetch(c *Conn, req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		var topics []kmsg.OffsetFetchRequestGroupTopic
		for _, t := range req.Topics {
			topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
		if req.Topics == nil {
			topics = nil
		}
		g := c.fetchGroupOffsets(req, kmsg.OffsetFetchRequestGroup{Group: req.Group, Topics: topics})
		resp.ErrorCode = g.ErrorCode
		for _, t := range g.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	for _, rg := range req.Groups {
		resp.Groups = append(resp.Groups, c.fetchGroupOffsets(req, rg))
	}
	return resp, nil
}

// fetchGroupOffsets answers one group of an OffsetFetch.
func (c *Conn) fetchGroupOffsets(req *kmsg.OffsetFetchRequest, rg kmsg.OffsetFetchRequestGroup) kmsg.OffsetFetchResponseGroup {
	sg := kmsg.NewOffsetFetchResponseGroup()
	sg.Group = rg.Group
	if rg.Group == "" {
		sg.ErrorCode = kerr.InvalidGroupID.Code
		return sg
	}
	byID := req.Version >= 10
	// Copy what we need under the group lock; topic lookups happen after.
	var snapshot map[string]map[int32]committed
	if g := c.b.groups.lock(rg.Group, false); g != nil {
		snapshot = make(map[string]map[int32]committed, len(g.offsets))
		for t, ps := range g.offsets {
			cp := make(map[int32]committed, len(ps))
			for p, oc := range ps {
				cp[p] = oc
			}
			snapshot[t] = cp
		}
		g.mu.Unlock()
	}
	var unstable map[string]map[int32]bool
	if req.RequireStable && c.b.txns != nil {
		unstable = c.b.txns.pendingOffsets(rg.Group)
	}
	part := func(topic string, p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
		sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		sp.Partition, sp.Offset, sp.LeaderEpoch = p, -1, -1
		if oc, ok := snapshot[topic][p]; ok {
			sp.Offset, sp.LeaderEpoch, sp.Metadata = oc.Offset, oc.LeaderEpoch, oc.Metadata
		}
		if sp.Metadata == nil {
			sp.Metadata = kmsg.StringPtr("")
		}
		if unstable[topic][p] {
			sp.Offset, sp.ErrorCode = -1, kerr.UnstableOffsetCommit.Code
		}
		return sp
	}
	if rg.Topics == nil {
		for _, name := range sortedKeys(snapshot) {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic = name
			if byID {
				if st.TopicID = c.b.topicIDOf(name); st.TopicID == ([16]byte{}) {
					continue
				}
			}
			for _, p := range sortedKeys(snapshot[name]) {
				st.Partitions = append(st.Partitions, part(name, p))
			}
			sg.Topics = append(sg.Topics, st)
		}
		return sg
	}
	for _, rt := range rg.Topics {
		st := kmsg.NewOffsetFetchResponseGroupTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name := rt.Topic
		known := true
		if byID {
			var t *topic
			if t = c.b.lookupID(rt.TopicID); t != nil {
				name = t.name
			}
			known = t != nil
		}
		for _, p := range rt.Partitions {
			sp := part(name, p)
			if !known {
				sp.ErrorCode = kerr.UnknownTopicID.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		sg.Topics = append(sg.Topics, st)
	}
	return sg
}

// sortedKeys returns a map's keys in order.
func sortedKeys[K string | int32, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}
