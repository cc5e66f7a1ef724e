package proxy

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/rewrite"
)

// Sending a single-port ShareFetch's parts and merging their answers
// (route_share.go has the session rules and the planning).

// followKey is the gather key of node n's follow-up acknowledge (node
// ids are never negative).
func followKey(n int32) int32 { return -1000 - n }

// scatterShare sends a plan's parts, each new session's follow-up
// acknowledge right after its part on the same connection, and merges
// once all are in; a part that cannot be sent or answered is left out of
// the merge (scatterPartial's rule).
func (t *tunnel) scatterShare(plan sharePlan, rep reply, merge func(map[int32]kmsg.Response) (kmsg.Response, error)) error {
	if len(plan.follow) == 0 {
		return t.scatterPartial(plan.parts, rep, merge)
	}
	type send struct {
		key, node int32
		req       kmsg.Request
	}
	var sends []send
	for n, req := range plan.parts {
		sends = append(sends, send{n, n, req})
		if f := plan.follow[n]; f != nil {
			sends = append(sends, send{followKey(n), n, f})
		}
	}
	for n, f := range plan.follow {
		if _, ok := plan.parts[n]; !ok { // an idle broker's acknowledgements alone
			sends = append(sends, send{followKey(n), n, f})
		}
	}
	g := &gather{got: make(map[int32]kmsg.Response, len(sends)), rep: rep, merge: merge, partial: true, trace: t.trace, real: map[int32]int32{}}
	for _, x := range sends {
		if x.key != x.node {
			g.real[x.key] = x.node // the trace and the logs name the broker
		}
	}
	g.left.Store(int32(len(sends)))
	for _, x := range sends {
		call := &partCall{node: x.key, req: x.req}
		call.done = func() { g.finish(t, call.node, call.resp, call.body, call.err) }
		bc, err := t.conn(x.node)
		queued := false
		if err == nil {
			queued, err = bc.send(call, true)
		}
		if err != nil && !queued {
			g.finish(t, x.key, nil, nil, err)
		}
	}
	return nil
}

// mergeFollowAcks puts the follow-up acknowledges' outcomes into the
// merged ShareFetch answer, as each partition's AcknowledgeErrorCode (a
// client takes a partition's presence as its acknowledgement's answer).
// A follow-up that failed as a whole fails the answer like any part.
func mergeFollowAcks(out *kmsg.ShareFetchResponse, plan sharePlan, m map[int32]kmsg.Response) {
	for n, f := range plan.follow {
		resp, ok := m[followKey(n)]
		if !ok {
			if out.ErrorCode == 0 {
				out.ErrorCode = kerr.ShareSessionNotFound.Code
			}
			continue
		}
		ar := resp.(*kmsg.ShareAcknowledgeResponse)
		out.ThrottleMillis = max(out.ThrottleMillis, ar.ThrottleMillis)
		if out.ErrorCode == 0 && ar.ErrorCode != 0 {
			out.ErrorCode, out.ErrorMessage = ar.ErrorCode, ar.ErrorMessage
		}
		codes := map[sharePart]int16{}
		for _, tp := range ar.Topics {
			for _, p := range tp.Partitions {
				codes[sharePart{tp.TopicID, p.Partition}] = p.ErrorCode
			}
		}
		for _, tp := range f.Topics {
			for _, p := range tp.Partitions {
				sp := sharePart{tp.TopicID, p.Partition}
				setShareFetchAck(out, sp, codes[sp])
			}
		}
	}
}

// dropShare ends the client's session after a failed part: the client
// gets the error and resets (kgo takes every record of the old session
// as lost), so its next epoch 0 opens new sessions everywhere. Every
// upstream session the gateway may still hold for it is closed (epoch
// -1), which releases the records it acquired, among them those of the
// answer the error dropped; else they would stay locked for the whole
// acquisition lock. Not closed: a broker whose part got no answer (its
// connection is gone, and a broker releases a disconnected session's
// records), or answered SHARE_SESSION_NOT_FOUND, or failed its epoch-0
// open (no session was made). The closes are queued for the read loop,
// which sends them before it routes the next request (sendShareCloses),
// so they reach each broker ahead of the new session. A session already
// replaced or closed is left alone.
func (st *shareState) dropShare(plan sharePlan, m map[int32]kmsg.Response, closeReq kmsg.Request) {
	if st == nil || plan.sess == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.sessions[plan.key] != plan.sess {
		return
	}
	delete(st.sessions, plan.key)
	for n := range plan.sess.brokers {
		if part, sent := plan.parts[n]; sent && !plan.closing[n] && !sessionSurvives(part, m[n]) {
			continue
		}
		st.closes = append(st.closes, shareClose{key: plan.key, node: n, req: closeReq})
	}
}

// sessionSurvives reports whether a broker may still hold the session
// its part was sent to, after answering resp (nil: no answer).
func sessionSurvives(part kmsg.Request, resp kmsg.Response) bool {
	var code int16
	switch r := resp.(type) {
	case nil:
		return false
	case *kmsg.ShareFetchResponse:
		code = r.ErrorCode
	case *kmsg.ShareAcknowledgeResponse:
		code = r.ErrorCode
	}
	if code == kerr.ShareSessionNotFound.Code {
		return false
	}
	f, ok := part.(*kmsg.ShareFetchRequest)
	return code == 0 || !ok || f.ShareSessionEpoch != 0
}

// sendShareCloses sends the queued closes of dropped sessions (called
// by the read loop before it routes a request). No one waits for their
// answers; a broker whose connection is gone is skipped (it released
// that session's records when the connection closed).
func (t *tunnel) sendShareCloses() {
	st := t.share
	if st == nil {
		return
	}
	st.mu.Lock()
	closes := st.closes
	st.closes = nil
	// A close queued while the read loop was already opening a new
	// session for the member (a client that reset before it read the
	// error) would end that one: the new session's epoch 0 replaced the
	// old upstream session already.
	closes = slices.DeleteFunc(closes, func(c shareClose) bool {
		s := st.sessions[c.key]
		return s != nil && s.brokers[c.node] != nil
	})
	st.mu.Unlock()
	for _, c := range closes {
		bc, ok := t.conns[c.node]
		if !ok || bc.isFailed() {
			continue
		}
		call := &partCall{node: c.node, req: c.req}
		call.done = func() { call.body.release() }
		bc.send(call, true) // a failed send fails the connection: nothing more to do
	}
}

func shareFetchRespKey(x *kmsg.ShareFetchResponseTopic) string { return string(x.TopicID[:]) }
func shareFetchRespParts(x *kmsg.ShareFetchResponseTopic) *[]kmsg.ShareFetchResponseTopicPartition {
	return &x.Partitions
}

// mergeShareFetch joins the parts' answers: every partition, the largest
// throttle, the shortest acquisition lock, the first top-level error
// (which breaks the gateway's session), only the virtual node.
func (t *tunnel) mergeShareFetch(r *kmsg.ShareFetchRequest, plan sharePlan, m map[int32]kmsg.Response) *kmsg.ShareFetchResponse {
	out := r.ResponseKind().(*kmsg.ShareFetchResponse)
	for n, resp := range m {
		fr, ok := resp.(*kmsg.ShareFetchResponse)
		if !ok { // a follow-up acknowledge (mergeFollowAcks)
			continue
		}
		out.ThrottleMillis = max(out.ThrottleMillis, fr.ThrottleMillis)
		if plan.closing[n] {
			continue
		}
		if out.ErrorCode == 0 && fr.ErrorCode != 0 {
			out.ErrorCode, out.ErrorMessage = fr.ErrorCode, fr.ErrorMessage
		}
		out.AcquisitionLockTimeoutMillis = minPositive(out.AcquisitionLockTimeoutMillis, fr.AcquisitionLockTimeoutMillis)
		out.Topics = mergeTopics(out.Topics, fr.Topics, shareFetchRespKey, shareFetchRespParts)
	}
	for n := range plan.parts {
		if _, ok := m[n]; !ok && !plan.closing[n] && out.ErrorCode == 0 {
			out.ErrorCode = kerr.ShareSessionNotFound.Code // that broker's connection, and session, is gone
		}
	}
	mergeFollowAcks(out, plan, m)
	// Only the brokers' codes say the view is stale: the gateway's own
	// NOT_LEADER_OR_FOLLOWER for an acknowledgement it had no session
	// for (plan.unacked, added below) does not, else a client could
	// clear the shared view with every request.
	stale := false
	for _, tp := range out.Topics {
		for _, p := range tp.Partitions {
			stale = stale || staleCode(p.ErrorCode) || staleCode(p.AcknowledgeErrorCode)
		}
	}
	if stale {
		t.view.invalidate(true, nil)
	}
	if out.ErrorCode != 0 {
		t.warnShareReset(out.ErrorCode)
		t.share.dropShare(plan, m, closeShareFetch(r))
		out.Topics = nil
	} else {
		addShareFetchUnacked(out, plan.unacked)
	}
	t.virtualShare(out)
	return out
}

func minPositive(a, b int32) int32 {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// addShareFetchUnacked answers the acknowledgements the gateway could not
// deliver with NOT_LEADER_OR_FOLLOWER.
func addShareFetchUnacked(out *kmsg.ShareFetchResponse, unacked []sharePart) {
	for _, u := range unacked {
		setShareFetchAck(out, u, kerr.NotLeaderForPartition.Code)
	}
}

// setShareFetchAck sets partition u's AcknowledgeErrorCode, adding the
// partition to the answer when no part listed it.
func setShareFetchAck(out *kmsg.ShareFetchResponse, u sharePart, code int16) {
	if q := findShareFetchPart(out, u); q != nil {
		if q.AcknowledgeErrorCode == 0 {
			q.AcknowledgeErrorCode = code
		}
		return
	}
	tp := kmsg.NewShareFetchResponseTopic()
	tp.TopicID = u.topic
	p := kmsg.NewShareFetchResponseTopicPartition()
	p.Partition, p.AcknowledgeErrorCode = u.partition, code
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
	tp.Partitions = append(tp.Partitions, p)
	out.Topics = mergeTopics(out.Topics, []kmsg.ShareFetchResponseTopic{tp}, shareFetchRespKey, shareFetchRespParts)
}

func findShareFetchPart(out *kmsg.ShareFetchResponse, u sharePart) *kmsg.ShareFetchResponseTopicPartition {
	for i := range out.Topics {
		if out.Topics[i].TopicID != u.topic {
			continue
		}
		for j := range out.Topics[i].Partitions {
			if out.Topics[i].Partitions[j].Partition == u.partition {
				return &out.Topics[i].Partitions[j]
			}
		}
	}
	return nil
}

// virtualShare makes the share answers' node ids the virtual node
// (KIP-951 CurrentLeader and NodeEndpoints): a partition naming a leader
// names the virtual node, and then the answer carries that one node's
// endpoint, at the listener's address (as the single-port Fetch answer
// does, route_nodes.go); with no leader named, no endpoint.
func (t *tunnel) virtualShare(resp kmsg.Response) {
	v := t.virtual
	named := false
	switch r := resp.(type) {
	case *kmsg.ShareFetchResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				p.CurrentLeader.LeaderID = virtualID(p.CurrentLeader.LeaderID, v)
				named = named || p.CurrentLeader.LeaderID >= 0
			}
		}
		r.NodeEndpoints = nil
		if named {
			e := kmsg.NewShareFetchResponseNodeEndpoint()
			e.NodeID = v
			e.Host, e.Port, _ = t.adv.Advertise(rewrite.Broker, v, "", 0)
			r.NodeEndpoints = append(r.NodeEndpoints, e)
		}
	case *kmsg.ShareAcknowledgeResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				p.CurrentLeader.LeaderID = virtualID(p.CurrentLeader.LeaderID, v)
				named = named || p.CurrentLeader.LeaderID >= 0
			}
		}
		r.NodeEndpoints = nil
		if named {
			e := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
			e.NodeID = v
			e.Host, e.Port, _ = t.adv.Advertise(rewrite.Broker, v, "", 0)
			r.NodeEndpoints = append(r.NodeEndpoints, e)
		}
	}
}

// warnShareReset logs (rate-limited: a client can cause it) that an
// upstream share session failed and the client's was reset; a refusal of
// what the client itself asked is logged at INFO under its own event.
func (t *tunnel) warnShareReset(code int16) {
	if t.s == nil { // the merge fuzz targets run without a session
		return
	}
	if shareClientCaused(code) {
		t.eventInfo(routeShareRefused, "single-port: an upstream broker refused a share request; the client's session is reset", "conn", t.s.id, "err", kerr.ErrorForCode(code))
		return
	}
	t.event(routeShareReset, "single-port: an upstream share session failed; the client's session is reset", "conn", t.s.id, "err", kerr.ErrorForCode(code))
}

// shareClientCaused reports the top-level share errors a broker answers
// for what the request asked (its member id, the client's rights, a
// group of another type), not for a session the gateway holds.
func shareClientCaused(code int16) bool {
	switch code {
	case kerr.InvalidRequest.Code, kerr.GroupAuthorizationFailed.Code, kerr.TopicAuthorizationFailed.Code, kerr.GroupIDNotFound.Code:
		return true
	}
	return false
}
