package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeShareGroupOffsets: v0-1 (KIP-932, KIP-1226)
//
// Behavior:
// * Per partition, the share-partition start offset (SPSO) and (v1) the
//   lag: records between the SPSO and the high watermark not yet
//   acknowledged or archived. A partition without share state is
//   StartOffset -1 (and Lag -1); an unknown topic or partition
//   UNKNOWN_TOPIC_OR_PARTITION.
// * Topics null: every partition the group has state for.
// * An unknown group, or one that is not a share group,
//   GROUP_ID_NOT_FOUND.
//
// Version notes:
// * v1: Lag (KIP-1226)

func init() {
	regKey(int16(kmsg.DescribeShareGroupOffsets), 0, 1, syncHandler(handleDescribeShareGroupOffsets))
}

func handleDescribeShareGroupOffsets(c *Conn, req *kmsg.DescribeShareGroupOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, rg := range req.Groups {
		resp.Groups = append(resp.Groups, c.b.describeShareOffsets(rg))
	}
	return resp, nil
}

func (b *Broker) describeShareOffsets(rg kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.DescribeShareGroupOffsetsResponseGroup {
	out := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	out.GroupID = rg.GroupID
	g := b.groups.lock(rg.GroupID, false)
	if g == nil || g.sg == nil {
		if g != nil {
			g.mu.Unlock()
		}
		out.ErrorCode = kerr.GroupIDNotFound.Code
		out.ErrorMessage = kmsg.StringPtr("group " + rg.GroupID + " is not a share group")
		return out
	}
	defer g.mu.Unlock()
	topics := rg.Topics
	if topics == nil {
		by := map[string][]int32{}
		for tp := range g.sg.parts {
			by[tp.topic] = append(by[tp.topic], tp.partition)
		}
		for _, name := range sortedKeys(by) {
			ps := by[name]
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			topics = append(topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: name, Partitions: ps})
		}
	}
	for _, rt := range topics {
		ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		ot.Topic = rt.Topic
		t := b.lookup(rt.Topic)
		if t != nil {
			ot.TopicID = t.id
		}
		for _, idx := range rt.Partitions {
			op := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			op.Partition, op.StartOffset, op.LeaderEpoch, op.Lag = idx, -1, -1, -1
			p := b.partitionOf(t, idx)
			sp := g.sg.parts[tpKey{rt.Topic, idx}]
			switch {
			case p == nil:
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case sp != nil:
				sp.fixStart(p.log.LogStartOffset())
				op.StartOffset, op.LeaderEpoch = sp.spso, 0
				op.Lag = max(0, p.log.HighWatermark()-sp.end) + int64(sp.live)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		out.Topics = append(out.Topics, ot)
	}
	return out
}
