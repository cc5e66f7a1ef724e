package proxy

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/wire"
)

// Single-port share groups (KIP-932). A share consumer holds ONE share
// session (group, member, ShareSessionEpoch) with the virtual node; the
// gateway owns it, and holds one upstream share session per broker that
// leads any of its partitions (Kafka keys a share session by group,
// member and broker, so no client epoch is ever handed to a broker).
//
//   - Client epoch 0 opens a new session: every broker leading one of its
//     partitions gets epoch 0 with its partitions; a broker that held the
//     old session and leads none of the new partitions gets epoch -1.
//   - Epoch > 0 is incremental: Topics add to the session, ForgottenTopics
//     remove. Each broker gets the difference between the partitions it
//     now leads and what its session holds (a leader move forgets the
//     partition on the old broker and adds it on the new one; a broker
//     with no session yet gets epoch 0 and its whole set).
//   - Epoch -1 closes every broker's session.
//
// Every broker whose session holds partitions gets a part on each client
// ShareFetch (each part's long poll capped at fetchPartWait when there
// are several; in KIP-1206 record-limit mode at most MaxRecords of them
// fetch, recordLimitIdle). Acknowledgements go to the partition's
// leader. A top-level error from any part (INVALID_SHARE_SESSION_EPOCH,
// SHARE_SESSION_NOT_FOUND, ...) reaches the client and ends the
// gateway's session, closing its upstream sessions (dropShare, which
// releases what they acquired), so the client's next epoch 0 rebuilds
// all of it.
//
// Kafka refuses acknowledgements on a session's first request (epoch 0),
// and ShareAcknowledge cannot open one: acknowledgements for a broker
// whose session this ShareFetch opens (a leader moved to it) follow at
// epoch 1 in a ShareAcknowledge on the same connection, which the broker
// processes right after the ShareFetch (scatterShare, mergeFollowAcks).
// An acknowledgement whose leader has no session to take it (in a
// ShareFetch: that broker leads none of the session's partitions; in a
// ShareAcknowledge: the session has not reached that broker yet, and
// only a ShareFetch, which acquires records, could open it) is answered
// NOT_LEADER_OR_FOLLOWER; those records come back when their
// acquisition lock ends.

// sharePart names one partition of a share session (share requests name
// topics by id, KIP-516).
type sharePart struct {
	topic     [16]byte
	partition int32
}

type shareMemberKey struct{ group, member string }

// maxShareSessions caps the share sessions one client connection may
// hold through the gateway (each costs one upstream session per broker).
// A share consumer holds one per broker connection (one here); Kafka's
// own cap is per broker (group.share.max.share.sessions, 2000). Past it,
// a new session is answered SHARE_SESSION_LIMIT_REACHED (retriable).
const maxShareSessions = 16

// shareState is one tunnel's gateway-owned share sessions.
// Ownership: created by the read loop (t.shares); planning runs in the
// read loop and merges on brokerConn readers, so sessions and everything
// in them are behind mu.
type shareState struct {
	mu       sync.Mutex
	sessions map[shareMemberKey]*shareSession
	// closes are upstream sessions of a dropped client session (an
	// upstream part failed) still to be closed, by the read loop before
	// it routes the next request (sendShareCloses).
	closes []shareClose
}

// shareClose is one upstream session to close (epoch -1, which releases
// the records it acquired).
type shareClose struct {
	key  shareMemberKey
	node int32
	req  kmsg.Request
}

// shareSession is the client's session with the virtual node.
type shareSession struct {
	epoch   int32               // the epoch the client must send next
	parts   map[sharePart]int32 // the session's partitions → PartitionMaxBytes (v0)
	brokers map[int32]*brokerShare
}

// brokerShare is the gateway's session with one upstream broker.
type brokerShare struct {
	epoch int32 // the epoch to send next (what the broker will expect)
	parts map[sharePart]bool
}

// nextShareEpoch is the epoch after e; Kafka wraps MaxInt32 to 1.
func nextShareEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

func (t *tunnel) shares() *shareState {
	if t.share == nil {
		t.share = &shareState{sessions: map[shareMemberKey]*shareSession{}}
	}
	return t.share
}

func shareKeyOf(group, member *string) shareMemberKey {
	var k shareMemberKey
	if group != nil {
		k.group = *group
	}
	if member != nil {
		k.member = *member
	}
	return k
}

// sharePlan is what one client share request becomes upstream.
type sharePlan struct {
	key     shareMemberKey
	sess    *shareSession // the session the answers belong to
	parts   map[int32]kmsg.Request
	closing map[int32]bool // parts closing a stale upstream session: answers not merged
	unacked []sharePart    // acknowledgements the gateway could not deliver
	// follow are ShareAcknowledges sent right after the part opening a
	// new upstream session (epoch 0, which Kafka takes no acknowledgements
	// on), on the same connection, so that broker processes them next;
	// or alone, for a broker left idle in record-limit mode (ackOnly).
	follow  map[int32]*kmsg.ShareAcknowledgeRequest
	errCode int16 // non-zero: answered by the gateway, nothing sent
}

// shareLeaders resolves the leader of every partition in parts.
func (t *tunnel) shareLeaders(parts []sharePart) (map[sharePart]int32, error) {
	out := make(map[sharePart]int32, len(parts))
	for _, p := range parts {
		if _, ok := out[p]; ok {
			continue
		}
		n, err := t.leaderFor(t.topicName("", p.topic), p.partition)
		if err != nil {
			return nil, err
		}
		out[p] = n
	}
	return out, nil
}

// shareSnapshot lists the partitions a request may route: the session's
// and the request's own (read under mu, resolved outside it, since a
// leader lookup may ask the cluster).
func (st *shareState) shareSnapshot(key shareMemberKey, req []sharePart) []sharePart {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := slices.Clone(req)
	if s := st.sessions[key]; s != nil {
		for p := range s.parts {
			out = append(out, p)
		}
	}
	return out
}

func shareFetchParts(r *kmsg.ShareFetchRequest) []sharePart {
	var out []sharePart
	for _, tp := range r.Topics {
		for _, p := range tp.Partitions {
			out = append(out, sharePart{tp.TopicID, p.Partition})
		}
	}
	return out
}

func shareAckParts(r *kmsg.ShareAcknowledgeRequest) []sharePart {
	var out []sharePart
	for _, tp := range r.Topics {
		for _, p := range tp.Partitions {
			out = append(out, sharePart{tp.TopicID, p.Partition})
		}
	}
	return out
}

// routeShareFetch routes a ShareFetch (key 78) through the gateway's
// share session.
func (t *tunnel) routeShareFetch(r *kmsg.ShareFetchRequest, rep reply) error {
	st := t.shares()
	key := shareKeyOf(r.GroupID, r.MemberID)
	leaders, err := t.shareLeaders(st.shareSnapshot(key, shareFetchParts(r)))
	if err != nil {
		return err
	}
	st.mu.Lock()
	plan := st.planShareFetch(key, r, leaders)
	st.mu.Unlock()
	if plan.errCode == kerr.ShareSessionLimitReached.Code {
		t.event(routeShareLimit, "single-port: a client connection asked for more share sessions than the gateway keeps per connection", "conn", t.s.id, "limit", maxShareSessions)
	}
	if plan.errCode != 0 || len(plan.parts)+len(plan.follow) == 0 {
		if rep != nil {
			resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
			resp.ErrorCode = plan.errCode
			addShareFetchUnacked(resp, plan.unacked)
			rep(resp, nil)
		}
		return nil
	}
	return t.scatterShare(plan, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		return t.mergeShareFetch(r, plan, m), nil
	})
}

// planShareFetch turns a client ShareFetch into upstream parts, updating
// the gateway's session as the brokers will once they answer. Called
// with st.mu held.
func (st *shareState) planShareFetch(key shareMemberKey, r *kmsg.ShareFetchRequest, leaders map[sharePart]int32) sharePlan {
	plan := sharePlan{key: key, parts: map[int32]kmsg.Request{}, closing: map[int32]bool{}, follow: map[int32]*kmsg.ShareAcknowledgeRequest{}}
	s := st.sessions[key]
	switch e := r.ShareSessionEpoch; {
	case e == 0:
		if shareFetchHasAcks(r) { // as Kafka: no acknowledgements on a new session
			plan.errCode = kerr.InvalidRequest.Code
			return plan
		}
		old := s
		if old == nil && len(st.sessions) >= maxShareSessions {
			plan.errCode = kerr.ShareSessionLimitReached.Code
			return plan
		}
		s = &shareSession{parts: map[sharePart]int32{}, brokers: map[int32]*brokerShare{}}
		st.sessions[key] = s
		s.addTopics(r.Topics)
		st.planBrokers(s, r, leaders, &plan)
		if old != nil {
			for n := range old.brokers {
				if _, ok := plan.parts[n]; !ok {
					plan.parts[n], plan.closing[n] = closeShareFetch(r), true
				}
			}
		}
	case s == nil:
		plan.errCode = kerr.ShareSessionNotFound.Code
		return plan
	case e == -1:
		delete(st.sessions, key)
		st.planShareFetchClose(s, r, leaders, &plan)
		plan.sess = s
		return plan
	case e != s.epoch:
		plan.errCode = kerr.InvalidShareSessionEpoch.Code
		return plan
	default:
		s.addTopics(r.Topics)
		s.forget(r.ForgottenTopicsData)
		st.planBrokers(s, r, leaders, &plan)
	}
	s.epoch = nextShareEpoch(r.ShareSessionEpoch)
	plan.sess = s
	return plan
}

func shareFetchHasAcks(r *kmsg.ShareFetchRequest) bool {
	for _, tp := range r.Topics {
		for _, p := range tp.Partitions {
			if len(p.AcknowledgementBatches) > 0 {
				return true
			}
		}
	}
	return false
}

func (s *shareSession) addTopics(topics []kmsg.ShareFetchRequestTopic) {
	for _, tp := range topics {
		for _, p := range tp.Partitions {
			s.parts[sharePart{tp.TopicID, p.Partition}] = p.PartitionMaxBytes
		}
	}
}

func (s *shareSession) forget(fs []kmsg.ShareFetchRequestForgottenTopicsData) {
	for _, ft := range fs {
		for _, p := range ft.Partitions {
			delete(s.parts, sharePart{ft.TopicID, p})
		}
	}
}

// fetchAcks are a ShareFetch's piggybacked acknowledgements by partition.
type fetchAcks map[sharePart][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch

func fetchAcksOf(r *kmsg.ShareFetchRequest) fetchAcks {
	out := fetchAcks{}
	for _, tp := range r.Topics {
		for _, p := range tp.Partitions {
			if len(p.AcknowledgementBatches) > 0 {
				k := sharePart{tp.TopicID, p.Partition}
				out[k] = append(out[k], p.AcknowledgementBatches...)
			}
		}
	}
	return out
}

// planBrokers gives each broker its part of an epoch ≥ 0 ShareFetch.
func (st *shareState) planBrokers(s *shareSession, r *kmsg.ShareFetchRequest, leaders map[sharePart]int32, plan *sharePlan) {
	desired := map[int32]map[sharePart]bool{}
	for p := range s.parts {
		n := leaders[p]
		if desired[n] == nil {
			desired[n] = map[sharePart]bool{}
		}
		desired[n][p] = true
	}
	acks := fetchAcksOf(r)
	ackBy := map[int32][]sharePart{}
	for p := range acks {
		ackBy[leaders[p]] = append(ackBy[leaders[p]], p)
	}
	nodes := map[int32]bool{}
	for n := range desired {
		nodes[n] = true
	}
	for n := range s.brokers {
		nodes[n] = true
	}
	for n := range ackBy {
		nodes[n] = true
	}
	idle := recordLimitIdle(r, nodes, desired)
	fetching := 0 // parts with partitions to fetch (a forget-only part does not wait)
	for n := range nodes {
		if idle[n] {
			s.ackOnly(r, n, ackBy[n], acks, plan)
			continue
		}
		if part := s.brokerPart(r, n, desired[n], ackBy[n], acks, plan); part != nil {
			plan.parts[n] = part
			if len(desired[n]) > 0 {
				fetching++
			}
		}
	}
	if fetching > 1 {
		for _, p := range plan.parts {
			if c := p.(*kmsg.ShareFetchRequest); c.MaxWaitMillis > fetchPartWait {
				c.MaxWaitMillis = fetchPartWait
			}
		}
		splitRecordLimit(r, plan.parts, desired, fetching)
	}
	if len(plan.parts) == 0 && !r.IsRenewAck {
		st.planKeeper(s, r, plan)
	}
}

// shareAcquireRecordLimit is ShareFetch v2's ShareAcquireMode 1
// (KIP-1206): MaxRecords is a hard limit, not a target.
const shareAcquireRecordLimit = 1

// recordLimitIdle picks the brokers that do not fetch this round in
// KIP-1206 record-limit mode: with MaxRecords below the number of
// brokers that would fetch, only MaxRecords of them do (a broker reads
// MaxRecords 0 as "the default", so each must be allowed at least one),
// chosen in turn by the client's epoch so none starves. An idle broker
// gets no ShareFetch: its acknowledgements go in a ShareAcknowledge
// (ackOnly), and its session's changes wait for its turn.
func recordLimitIdle(r *kmsg.ShareFetchRequest, nodes map[int32]bool, desired map[int32]map[sharePart]bool) map[int32]bool {
	if r.Version < 2 || r.ShareAcquireMode != shareAcquireRecordLimit || r.MaxRecords <= 0 || r.IsRenewAck {
		return nil
	}
	var fetchers []int32
	for n := range nodes {
		if len(desired[n]) > 0 {
			fetchers = append(fetchers, n)
		}
	}
	if int(r.MaxRecords) >= len(fetchers) {
		return nil
	}
	slices.Sort(fetchers)
	idle := make(map[int32]bool, len(fetchers))
	for _, n := range fetchers {
		idle[n] = true
	}
	start := int(uint32(r.ShareSessionEpoch) % uint32(len(fetchers)))
	for i := range int(r.MaxRecords) {
		delete(idle, fetchers[(start+i)%len(fetchers)])
	}
	return idle
}

// ackOnly sends a ShareFetch's acknowledgements for broker n, which does
// not fetch this round, in a ShareAcknowledge at its session's epoch
// (merged like a follow-up, mergeFollowAcks).
func (s *shareSession) ackOnly(r *kmsg.ShareFetchRequest, n int32, ackHere []sharePart, acks fetchAcks, plan *sharePlan) {
	if len(ackHere) == 0 {
		return
	}
	bs := s.brokers[n]
	if bs == nil {
		plan.unacked = append(plan.unacked, ackHere...)
		return
	}
	plan.follow[n] = followAcks(r, bs.epoch, sortedParts(toSet(ackHere)), acks)
	bs.epoch = nextShareEpoch(bs.epoch)
}

// splitRecordLimit shares a record-limit ShareFetch's MaxRecords among
// the parts that fetch (lowest node ids take the remainder), so the
// merged answer keeps the client's limit (recordLimitIdle left at most
// MaxRecords of them fetching, so each gets at least one).
func splitRecordLimit(r *kmsg.ShareFetchRequest, parts map[int32]kmsg.Request, desired map[int32]map[sharePart]bool, fetching int) {
	if r.Version < 2 || r.ShareAcquireMode != shareAcquireRecordLimit || r.MaxRecords <= 0 {
		return
	}
	nodes := make([]int32, 0, fetching)
	for n := range parts {
		if len(desired[n]) > 0 {
			nodes = append(nodes, n)
		}
	}
	slices.Sort(nodes)
	each, extra := r.MaxRecords/int32(len(nodes)), r.MaxRecords%int32(len(nodes))
	for i, n := range nodes {
		c := parts[n].(*kmsg.ShareFetchRequest)
		c.MaxRecords = max(1, each)
		if int32(i) < extra {
			c.MaxRecords++
		}
	}
}

// brokerPart is broker n's part of a ShareFetch, or nil when n needs
// none; it updates n's session as the broker will.
func (s *shareSession) brokerPart(r *kmsg.ShareFetchRequest, n int32, want map[sharePart]bool, ackHere []sharePart, acks fetchAcks, plan *sharePlan) *kmsg.ShareFetchRequest {
	bs := s.brokers[n]
	if r.IsRenewAck { // KIP-1222: acknowledgements only, the session's set untouched
		if len(ackHere) == 0 {
			return nil
		}
		if bs == nil {
			plan.unacked = append(plan.unacked, ackHere...)
			return nil
		}
		part := s.shareFetchPart(r, bs.epoch, ackHere, acks, nil)
		for _, p := range ackHere {
			bs.parts[p] = true
		}
		bs.epoch = nextShareEpoch(bs.epoch)
		return part
	}
	if bs == nil {
		return s.openBroker(r, n, want, ackHere, acks, plan)
	}
	send, forget := bs.diff(want, ackHere)
	if len(want) == 0 && len(forget) == 0 && len(ackHere) == 0 {
		return nil
	}
	part := s.shareFetchPart(r, bs.epoch, sortedParts(toSet(send)), acks, sortedParts(toSet(forget)))
	if len(want) == 0 {
		part.MaxWaitMillis = 0 // nothing to fetch there: answer at once
	}
	for p := range want {
		bs.parts[p] = true
	}
	for _, p := range forget {
		delete(bs.parts, p)
	}
	bs.epoch = nextShareEpoch(bs.epoch)
	return part
}

// diff is what a broker's part lists (partitions it should hold and does
// not, and every acknowledged one) and forgets (what it holds and should
// not). A broker adds every listed partition to its session before it
// removes the forgotten ones (KIP-932; kfake and kgo do the same), so a
// partition listed only for its acknowledgements, which the session
// neither wants nor holds, is forgotten in the same request: else the
// broker would add it back and acquire records the client throws away.
func (bs *brokerShare) diff(want map[sharePart]bool, ackHere []sharePart) (send, forget []sharePart) {
	for p := range want {
		if !bs.parts[p] {
			send = append(send, p)
		}
	}
	for p := range bs.parts {
		if !want[p] {
			forget = append(forget, p)
		}
	}
	for _, p := range ackHere {
		send = append(send, p)
		if !want[p] && !bs.parts[p] {
			forget = append(forget, p)
		}
	}
	return send, forget
}

// openBroker opens a new upstream session on n: epoch 0 with every
// partition n leads and no acknowledgements (Kafka refuses them on epoch
// 0); those follow at epoch 1 in a ShareAcknowledge on the same
// connection (plan.follow), with the part's wait capped so they are not
// held back by a long poll.
func (s *shareSession) openBroker(r *kmsg.ShareFetchRequest, n int32, want map[sharePart]bool, ackHere []sharePart, acks fetchAcks, plan *sharePlan) *kmsg.ShareFetchRequest {
	if len(want) == 0 { // n leads none of the session's partitions: nothing to open
		plan.unacked = append(plan.unacked, ackHere...)
		return nil
	}
	bs := &brokerShare{epoch: 1, parts: want}
	s.brokers[n] = bs
	part := s.shareFetchPart(r, 0, sortedParts(want), nil, nil)
	if len(ackHere) > 0 {
		plan.follow[n] = followAcks(r, bs.epoch, sortedParts(toSet(ackHere)), acks)
		bs.epoch = nextShareEpoch(bs.epoch)
		part.MaxWaitMillis = min(part.MaxWaitMillis, fetchPartWait)
	}
	return part
}

// followAcks is the ShareAcknowledge carrying a ShareFetch's
// acknowledgements for list (the batches have the same fields).
func followAcks(r *kmsg.ShareFetchRequest, epoch int32, list []sharePart, acks fetchAcks) *kmsg.ShareAcknowledgeRequest {
	a := kmsg.NewPtrShareAcknowledgeRequest()
	// ShareFetch and ShareAcknowledge versions moved together (v1 when
	// KIP-932 became generally available, v2 for KIP-1222), so a broker
	// serving the client's ShareFetch version serves this one; never
	// above the ShareAcknowledge versions this build encodes.
	a.SetVersion(min(r.Version, wire.MaxVersion(apis.ShareAcknowledge)))
	a.GroupID, a.MemberID, a.ShareSessionEpoch = r.GroupID, r.MemberID, epoch
	for _, p := range list {
		rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
		rp.Partition = p.partition
		for _, b := range acks[p] {
			ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
		}
		if i := len(a.Topics) - 1; i >= 0 && a.Topics[i].TopicID == p.topic {
			a.Topics[i].Partitions = append(a.Topics[i].Partitions, rp)
			continue
		}
		tp := kmsg.NewShareAcknowledgeRequestTopic()
		tp.TopicID, tp.Partitions = p.topic, []kmsg.ShareAcknowledgeRequestTopicPartition{rp}
		a.Topics = append(a.Topics, tp)
	}
	return a
}

// planKeeper: a ShareFetch no broker needs (an empty session) goes to a
// broker holding this member's session, for its throttle and lock
// timeout; with none, the gateway answers it (an empty answer), and opens
// no empty session upstream.
func (st *shareState) planKeeper(s *shareSession, r *kmsg.ShareFetchRequest, plan *sharePlan) {
	nodes := make([]int32, 0, len(s.brokers))
	for n := range s.brokers {
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return
	}
	slices.Sort(nodes)
	bs := s.brokers[nodes[0]]
	plan.parts[nodes[0]] = s.shareFetchPart(r, bs.epoch, nil, nil, nil)
	bs.epoch = nextShareEpoch(bs.epoch)
}

// planShareFetchClose closes every upstream session (epoch -1), each
// with the acknowledgements for the partitions its broker leads.
func (st *shareState) planShareFetchClose(s *shareSession, r *kmsg.ShareFetchRequest, leaders map[sharePart]int32, plan *sharePlan) {
	acks := fetchAcksOf(r)
	ackBy := map[int32][]sharePart{}
	for p := range acks {
		n := leaders[p]
		if s.brokers[n] == nil {
			plan.unacked = append(plan.unacked, p)
			continue
		}
		ackBy[n] = append(ackBy[n], p)
	}
	for n := range s.brokers {
		plan.parts[n] = s.shareFetchPart(r, -1, sortedParts(toSet(ackBy[n])), acks, nil)
	}
}

// shareFetchPart copies r for one broker: its epoch, the partitions to
// list (with their acknowledgements) and to forget.
func (s *shareSession) shareFetchPart(r *kmsg.ShareFetchRequest, epoch int32, list []sharePart, acks fetchAcks, forget []sharePart) *kmsg.ShareFetchRequest {
	c := *r
	c.ShareSessionEpoch, c.Topics, c.ForgottenTopicsData = epoch, nil, nil
	for _, p := range list {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.AcknowledgementBatches = p.partition, s.parts[p], acks[p]
		if i := len(c.Topics) - 1; i >= 0 && c.Topics[i].TopicID == p.topic {
			c.Topics[i].Partitions = append(c.Topics[i].Partitions, rp)
			continue
		}
		tp := kmsg.NewShareFetchRequestTopic()
		tp.TopicID, tp.Partitions = p.topic, []kmsg.ShareFetchRequestTopicPartition{rp}
		c.Topics = append(c.Topics, tp)
	}
	for _, p := range forget {
		if i := len(c.ForgottenTopicsData) - 1; i >= 0 && c.ForgottenTopicsData[i].TopicID == p.topic {
			c.ForgottenTopicsData[i].Partitions = append(c.ForgottenTopicsData[i].Partitions, p.partition)
			continue
		}
		ft := kmsg.NewShareFetchRequestForgottenTopicsData()
		ft.TopicID, ft.Partitions = p.topic, []int32{p.partition}
		c.ForgottenTopicsData = append(c.ForgottenTopicsData, ft)
	}
	return &c
}

// closeShareFetch closes a stale upstream session (no partitions). It may
// be sent with the client's next request, after r's frame went back to
// its pool: nothing in it aliases the frame (kmsg copies strings; unknown
// tagged fields, which alias it, are dropped).
func closeShareFetch(r *kmsg.ShareFetchRequest) *kmsg.ShareFetchRequest {
	c := *r
	c.ShareSessionEpoch, c.Topics, c.ForgottenTopicsData, c.MaxWaitMillis, c.IsRenewAck = -1, nil, nil, 0, false
	c.UnknownTags = kmsg.Tags{}
	return &c
}

func toSet(ps []sharePart) map[sharePart]bool {
	m := make(map[sharePart]bool, len(ps))
	for _, p := range ps {
		m[p] = true
	}
	return m
}

// sortedParts lists a set by topic id, then partition.
func sortedParts(m map[sharePart]bool) []sharePart {
	out := make([]sharePart, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b sharePart) int {
		if c := slices.Compare(a.topic[:], b.topic[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	return out
}
