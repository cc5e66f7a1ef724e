package broker

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareAcknowledge: v1-2 (KIP-932, KIP-1222)
//
// Behavior:
// * Applies acknowledgements (accept, release, reject; renew with
//   IsRenewAck at v2) in the member's share session, each partition all or
//   nothing (share_partition.go acknowledge): INVALID_RECORD_STATE when an
//   offset is not acquired by the member, INVALID_REQUEST for a malformed
//   batch. The answer waits until the new state is durable in the
//   coordinator journal.
// * ShareSessionEpoch must be the session's current one (epoch 0 opens
//   sessions only in ShareFetch: INVALID_SHARE_SESSION_EPOCH); -1 applies
//   the acknowledgements and closes the session, releasing what the member
//   still holds on its partitions.
// * An unknown group, or one that is not a share group, is
//   GROUP_ID_NOT_FOUND.
//
// Version notes:
// * v0 (Kafka 4.0 early access) was removed in Kafka 4.1.
// * v2: IsRenewAck, AcquisitionLockTimeoutMillis (KIP-1222)

func init() { regKey(int16(kmsg.ShareAcknowledge), 1, 2, handleShareAcknowledge) }

func handleShareAcknowledge(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	group, member := deref(req.GroupID), deref(req.MemberID)
	cfg := c.b.groups.shareConfig(group)
	resp.AcquisitionLockTimeoutMillis = int32(cfg.lockDuration.Milliseconds())
	done := func(code int16) {
		resp.ErrorCode = code
		r(encode(resp), nil)
	}
	switch {
	case strings.TrimSpace(group) == "":
		done(kerr.InvalidGroupID.Code)
		return
	case member == "" || len(member) > shareMemberIDMaxLen:
		done(kerr.InvalidRequest.Code)
		return
	case req.ShareSessionEpoch == 0:
		done(kerr.InvalidShareSessionEpoch.Code)
		return
	}
	g := c.b.groups.lock(group, false)
	if g == nil || g.sg == nil {
		if g != nil {
			g.mu.Unlock()
		}
		done(kerr.GroupIDNotFound.Code)
		return
	}
	s := g.sg.sessions[member]
	switch {
	case s == nil:
		g.mu.Unlock()
		done(kerr.ShareSessionNotFound.Code)
		return
	case req.ShareSessionEpoch > 0 && s.epoch != req.ShareSessionEpoch:
		g.mu.Unlock()
		done(kerr.InvalidShareSessionEpoch.Code)
		return
	}
	waits := g.ackShareTopics(req, resp, member, cfg)
	if req.ShareSessionEpoch == -1 {
		g.closeShareSession(member)
	} else {
		s.bump()
	}
	if closing := g.persistShareParts(); req.ShareSessionEpoch == -1 {
		waits = append(waits, closing) // the close's releases
	}
	g.mu.Unlock()
	waitThen(waits, func(err error) {
		if err != nil {
			c.b.log.Error("share acknowledgements not durable", "group", group, "err", err)
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					if resp.Topics[i].Partitions[j].ErrorCode == 0 {
						resp.Topics[i].Partitions[j].ErrorCode = kerr.CoordinatorNotAvailable.Code
					}
				}
			}
		}
		r(encode(resp), nil)
	})
}

// ackShareTopics applies every partition's acknowledgements of req, fills
// resp and returns the journal writes to wait for. Caller holds g.mu.
func (g *group) ackShareTopics(req *kmsg.ShareAcknowledgeRequest, resp *kmsg.ShareAcknowledgeResponse, member string, cfg shareSettings) []<-chan error {
	var waits []<-chan error
	for _, t := range req.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			bs := make([]ackBatch, 0, len(p.AcknowledgementBatches))
			for _, b := range p.AcknowledgementBatches {
				bs = append(bs, ackBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes})
			}
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			var durable <-chan error
			rp.ErrorCode, durable = g.ackShare(t.TopicID, p.Partition, member, bs, req.IsRenewAck, cfg)
			if durable != nil {
				waits = append(waits, durable)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return waits
}
