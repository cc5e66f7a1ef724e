package proxy

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Single-port ShareAcknowledge (key 79): each partition's
// acknowledgements go to its leader's upstream share session
// (route_share.go has the session rules).

// routeShareAcknowledge routes a ShareAcknowledge (key 79): each
// partition's acknowledgements to its leader's upstream session.
func (t *tunnel) routeShareAcknowledge(r *kmsg.ShareAcknowledgeRequest, rep reply) error {
	st := t.shares()
	key := shareKeyOf(r.GroupID, r.MemberID)
	leaders, err := t.shareLeaders(shareAckParts(r))
	if err != nil {
		return err
	}
	st.mu.Lock()
	plan := st.planShareAck(key, r, leaders)
	st.mu.Unlock()
	if plan.errCode != 0 || len(plan.parts) == 0 {
		if rep != nil {
			resp := r.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
			resp.ErrorCode = plan.errCode
			addShareAckUnacked(resp, plan.unacked)
			rep(resp, nil)
		}
		return nil
	}
	return t.scatterPartial(plan.parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		return t.mergeShareAck(r, plan, m), nil
	})
}

// planShareAck splits a ShareAcknowledge by leader. Called with st.mu held.
func (st *shareState) planShareAck(key shareMemberKey, r *kmsg.ShareAcknowledgeRequest, leaders map[sharePart]int32) sharePlan {
	plan := sharePlan{key: key, parts: map[int32]kmsg.Request{}, closing: map[int32]bool{}}
	s := st.sessions[key]
	e := r.ShareSessionEpoch
	switch {
	case e == 0: // as Kafka: ShareAcknowledge cannot open a session
		plan.errCode = kerr.InvalidShareSessionEpoch.Code
		return plan
	case s == nil:
		plan.errCode = kerr.ShareSessionNotFound.Code
		return plan
	case e != -1 && e != s.epoch:
		plan.errCode = kerr.InvalidShareSessionEpoch.Code
		return plan
	}
	by := map[int32][]kmsg.ShareAcknowledgeRequestTopic{}
	for _, tp := range r.Topics {
		for _, p := range tp.Partitions {
			sp := sharePart{tp.TopicID, p.Partition}
			n := leaders[sp]
			if s.brokers[n] == nil {
				plan.unacked = append(plan.unacked, sp)
				continue
			}
			ts := by[n]
			if len(ts) == 0 || ts[len(ts)-1].TopicID != tp.TopicID {
				c := tp
				c.Partitions = nil
				ts = append(ts, c)
			}
			ts[len(ts)-1].Partitions = append(ts[len(ts)-1].Partitions, p)
			by[n] = ts
		}
	}
	for n, bs := range s.brokers {
		if _, ok := by[n]; !ok && e != -1 {
			continue
		}
		c := *r
		c.Topics, c.ShareSessionEpoch = by[n], -1
		if e != -1 {
			c.ShareSessionEpoch = bs.epoch
			bs.epoch = nextShareEpoch(bs.epoch)
		}
		plan.parts[n] = &c
	}
	if e == -1 {
		delete(st.sessions, key)
	} else {
		s.epoch = nextShareEpoch(e)
	}
	plan.sess = s
	return plan
}

func shareAckRespKey(x *kmsg.ShareAcknowledgeResponseTopic) string { return string(x.TopicID[:]) }
func shareAckRespParts(x *kmsg.ShareAcknowledgeResponseTopic) *[]kmsg.ShareAcknowledgeResponseTopicPartition {
	return &x.Partitions
}

// mergeShareAck joins ShareAcknowledge answers like mergeShareFetch.
func (t *tunnel) mergeShareAck(r *kmsg.ShareAcknowledgeRequest, plan sharePlan, m map[int32]kmsg.Response) *kmsg.ShareAcknowledgeResponse {
	out := r.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	stale := false // only the brokers' codes (mergeShareFetch)
	for _, resp := range m {
		ar := resp.(*kmsg.ShareAcknowledgeResponse)
		out.ThrottleMillis = max(out.ThrottleMillis, ar.ThrottleMillis)
		if out.ErrorCode == 0 && ar.ErrorCode != 0 {
			out.ErrorCode, out.ErrorMessage = ar.ErrorCode, ar.ErrorMessage
		}
		out.AcquisitionLockTimeoutMillis = minPositive(out.AcquisitionLockTimeoutMillis, ar.AcquisitionLockTimeoutMillis)
		out.Topics = mergeTopics(out.Topics, ar.Topics, shareAckRespKey, shareAckRespParts)
		for _, tp := range ar.Topics {
			for _, p := range tp.Partitions {
				stale = stale || staleCode(p.ErrorCode)
			}
		}
	}
	if len(m) < len(plan.parts) && out.ErrorCode == 0 {
		out.ErrorCode = kerr.ShareSessionNotFound.Code
	}
	if stale {
		t.view.invalidate(true, nil)
	}
	if out.ErrorCode != 0 {
		t.warnShareReset(out.ErrorCode)
		c := *r // sent later (closeShareFetch says why no tags)
		c.ShareSessionEpoch, c.Topics, c.IsRenewAck, c.UnknownTags = -1, nil, false, kmsg.Tags{}
		t.share.dropShare(plan, m, &c)
	}
	addShareAckUnacked(out, plan.unacked)
	t.virtualShare(out)
	return out
}

func addShareAckUnacked(out *kmsg.ShareAcknowledgeResponse, unacked []sharePart) {
	for _, u := range unacked {
		tp := kmsg.NewShareAcknowledgeResponseTopic()
		tp.TopicID = u.topic
		p := kmsg.NewShareAcknowledgeResponseTopicPartition()
		p.Partition, p.ErrorCode = u.partition, kerr.NotLeaderForPartition.Code
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		tp.Partitions = append(tp.Partitions, p)
		out.Topics = mergeTopics(out.Topics, []kmsg.ShareAcknowledgeResponseTopic{tp}, shareAckRespKey, shareAckRespParts)
	}
}
