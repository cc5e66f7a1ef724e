package policy

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// Produce, Fetch and Metadata are decided topic by topic: the allowed
// topics proceed and the denied ones get their error, as a broker does
// (KafkaApis handleProduceRequest / handleFetchRequest /
// handleTopicMetadataRequest authorize per topic).

// topicDecisions decides each topic of a request; txn is the request's
// transactional id (Produce).
func (e *Engine) topicDecisions(r *Request, bits []uint64, n int, topic func(i int) (string, [16]byte), ctx unitCtx, rates *rateHits) (ds []decision, denied int) {
	ds = make([]decision, n)
	x := extractor{names: r.Names}
	for i := range n {
		name, id := topic(i)
		u := x.topicUnit(name, id, ctx)
		ds[i] = e.decide(r.Subject, bits, r.Key, r.Version, &u, r.Body, nil)
		if ds[i].deny {
			denied++
		}
	}
	// Charge rates only for what goes ahead: walk again for allowed
	// units, collecting rate rules (cheap next to the decode).
	for i := range n {
		if !ds[i].deny {
			name, id := topic(i)
			u := x.topicUnit(name, id, ctx)
			e.decide(r.Subject, bits, r.Key, r.Version, &u, r.Body, rates)
		}
	}
	return ds, denied
}

func firstDenied(ds []decision) decision {
	for _, d := range ds {
		if d.deny {
			return d
		}
	}
	return decision{rule: -1}
}

func firstRule(ds []decision) int32 {
	if len(ds) == 0 {
		return -1
	}
	return ds[0].rule
}

func (e *Engine) checkProduce(r *Request, bits []uint64, p *kmsg.ProduceRequest, rates *rateHits) Verdict {
	var ctx unitCtx
	if p.TransactionID != nil {
		ctx.txn, ctx.hasTxn = *p.TransactionID, true
	}
	if len(p.Topics) == 0 {
		u := unit{txn: ctx.txn, hasTxn: ctx.hasTxn}
		d := e.decide(r.Subject, bits, r.Key, r.Version, &u, p, rates)
		if !d.deny {
			return Verdict{Action: Allow, Rule: e.ruleName(d.rule)}
		}
		return e.produceDenied(p, []decision{d}, d)
	}
	ds, denied := e.topicDecisions(r, bits, len(p.Topics), func(i int) (string, [16]byte) {
		return p.Topics[i].Topic, p.Topics[i].TopicID
	}, ctx, rates)
	if denied == 0 {
		return Verdict{Action: Allow, Rule: e.ruleName(firstRule(ds))}
	}
	first := firstDenied(ds)
	if denied == len(ds) || p.Acks == 0 {
		// A denied part of an acks=0 produce cannot be answered; Kafka
		// closes the connection when any partition of one fails (§3).
		return e.produceDenied(p, ds, first)
	}
	fwd := *p
	fwd.Topics = make([]kmsg.ProduceRequestTopic, 0, len(p.Topics)-denied)
	var deniedTopics []kmsg.ProduceResponseTopic
	for i, t := range p.Topics {
		if ds[i].deny {
			deniedTopics = append(deniedTopics, produceErrTopic(&t, ds[i].code))
		} else {
			fwd.Topics = append(fwd.Topics, t)
		}
	}
	return Verdict{Action: Partial, Rule: e.ruleName(first.rule), Forward: &fwd, Merge: func(resp kmsg.Response) {
		if pr, ok := resp.(*kmsg.ProduceResponse); ok {
			pr.Topics = append(pr.Topics, deniedTopics...)
		}
	}}
}

func (e *Engine) produceDenied(p *kmsg.ProduceRequest, ds []decision, first decision) Verdict {
	v := Verdict{Action: Deny, Rule: e.ruleName(first.rule)}
	if p.Acks == 0 {
		v.Close = true
		return v
	}
	resp := p.ResponseKind().(*kmsg.ProduceResponse)
	for i := range p.Topics {
		code := first.code
		if i < len(ds) {
			code = ds[i].code
			if !ds[i].deny {
				code = first.code // whole-request deny (transactional id)
			}
		}
		resp.Topics = append(resp.Topics, produceErrTopic(&p.Topics[i], code))
	}
	v.Response = resp
	return v
}

func produceErrTopic(t *kmsg.ProduceRequestTopic, code int16) kmsg.ProduceResponseTopic {
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, part := range t.Partitions {
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.BaseOffset = part.Partition, code, -1
		rp.LogAppendTime, rp.LogStartOffset = -1, -1
		msg := denyMessage
		rp.ErrorMessage = &msg
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func (e *Engine) checkFetch(r *Request, bits []uint64, f *kmsg.FetchRequest, rates *rateHits) Verdict {
	if len(f.Topics) == 0 {
		// An incremental fetch with nothing changed names no topic.
		d := e.decide(r.Subject, bits, r.Key, r.Version, &unit{}, f, rates)
		if !d.deny {
			return Verdict{Action: Allow, Rule: e.ruleName(d.rule)}
		}
		return Verdict{Action: Deny, Rule: e.ruleName(d.rule), Response: fetchDeny(f, nil, d.code)}
	}
	ds, denied := e.topicDecisions(r, bits, len(f.Topics), func(i int) (string, [16]byte) {
		return f.Topics[i].Topic, f.Topics[i].TopicID
	}, unitCtx{}, rates)
	if denied == 0 {
		return Verdict{Action: Allow, Rule: e.ruleName(firstRule(ds))}
	}
	first := firstDenied(ds)
	if denied == len(ds) {
		return Verdict{Action: Deny, Rule: e.ruleName(first.rule), Response: fetchDeny(f, ds, first.code)}
	}
	// Forward a sessionless full fetch (SessionID 0, epoch -1) of the
	// allowed topics. Dropping partitions from an incremental fetch
	// session would desynchronise the client's session from the broker's
	// (KIP-227, docs/protocol.md §4.3); a sessionless answer makes the client
	// drop its session and send full fetches, which stay correct.
	fwd := *f
	fwd.SessionID, fwd.SessionEpoch, fwd.ForgottenTopics = 0, -1, nil
	fwd.Topics = make([]kmsg.FetchRequestTopic, 0, len(f.Topics)-denied)
	var deniedTopics []kmsg.FetchResponseTopic
	for i, t := range f.Topics {
		if ds[i].deny {
			deniedTopics = append(deniedTopics, fetchErrTopic(&t, ds[i].code))
		} else {
			fwd.Topics = append(fwd.Topics, t)
		}
	}
	return Verdict{Action: Partial, Rule: e.ruleName(first.rule), Forward: &fwd, Merge: func(resp kmsg.Response) {
		if fr, ok := resp.(*kmsg.FetchResponse); ok {
			fr.Topics = append(fr.Topics, deniedTopics...)
		}
	}}
}

func fetchDeny(f *kmsg.FetchRequest, ds []decision, code int16) kmsg.Response {
	resp := f.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = 0 // the client's session, if any, is over
	for i := range f.Topics {
		c := code
		if i < len(ds) && ds[i].deny {
			c = ds[i].code
		}
		resp.Topics = append(resp.Topics, fetchErrTopic(&f.Topics[i], c))
	}
	if len(f.Topics) == 0 && f.Version >= 7 {
		resp.ErrorCode = code
	}
	return resp
}

func fetchErrTopic(t *kmsg.FetchRequestTopic, code int16) kmsg.FetchResponseTopic {
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, part := range t.Partitions {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.ErrorCode = part.Partition, code
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
		rp.RecordBatches = []byte{} // empty, not null: librdkafka refuses a null record set ("invalid MessageSetSize -1"), and Kafka sends MemoryRecords.EMPTY
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// checkMetadata: a Metadata request is never refused for its topics; a
// denied topic is hidden (all-topics requests) or answered with
// TOPIC_AUTHORIZATION_FAILED (named), and a denied name never reaches the
// upstream, where auto-creation could create it (§5.3). Only a rule that
// denies the Metadata key itself (no topic condition) refuses the request.
func (e *Engine) checkMetadata(r *Request, bits []uint64, m *kmsg.MetadataRequest, rates *rateHits) Verdict {
	d := e.decide(r.Subject, bits, r.Key, r.Version, nil, m, nil)
	if d.deny {
		return Verdict{Action: Deny, Rule: e.ruleName(d.rule), Response: metadataDeny(m, &resourceCodes{top: d.code})}
	}
	if m.Topics == nil || (m.Version == 0 && len(m.Topics) == 0) {
		return e.metadataAll(r, bits, m, rates, d)
	}
	return e.metadataNamed(r, bits, m, rates)
}

// metadataAll decides an all-topics Metadata request: forwarded as is,
// and the topics the subject may not see are dropped from the answer
// (docs/protocol.md §4.3).
func (e *Engine) metadataAll(r *Request, bits []uint64, m *kmsg.MetadataRequest, rates *rateHits, d decision) Verdict {
	e.decide(r.Subject, bits, r.Key, r.Version, nil, m, rates)
	if !e.topicRulesReachable(bits, r.Key, r.Version) && !e.governs(r.Subject, r.Key) {
		return Verdict{Action: Allow, Rule: e.ruleName(d.rule)}
	}
	subject := r.Subject
	return Verdict{Action: Partial, Rule: e.ruleName(d.rule), Forward: m, Merge: func(resp kmsg.Response) {
		mr, ok := resp.(*kmsg.MetadataResponse)
		if !ok {
			return
		}
		bits := e.subjectBits(subject)
		kept := mr.Topics[:0]
		for _, t := range mr.Topics {
			u := unit{hasTopic: true}
			if t.Topic != nil {
				u.topic = *t.Topic
			} else {
				u.unknownID = true
			}
			if !e.decide(subject, bits, apis.Metadata, mr.Version, &u, nil, nil).deny {
				kept = append(kept, t)
			}
		}
		mr.Topics = kept
	}}
}

// metadataNamed decides a Metadata request for named topics: denied
// topics are stripped from the forwarded request (so the upstream cannot
// auto-create them) and answered with their error in the merge.
func (e *Engine) metadataNamed(r *Request, bits []uint64, m *kmsg.MetadataRequest, rates *rateHits) Verdict {
	x := extractor{names: r.Names}
	ds := make([]decision, len(m.Topics))
	units := make([]unit, len(m.Topics))
	denied := 0
	for i, t := range m.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		units[i] = x.topicUnit(name, t.TopicID, unitCtx{})
		if t.Topic != nil && name == "" {
			units[i].hasTopic = true // an empty name is still a name
		}
		ds[i] = e.decide(r.Subject, bits, r.Key, r.Version, &units[i], m, rates)
		if ds[i].deny {
			denied++
		}
	}
	noCreate, createRule := e.withholdCreation(r, bits, m, ds)
	if n := e.splitCreation(r, bits, m, ds); n > 0 {
		// Topics the client may create are asked for alone, with
		// auto-creation as the client asked; the others wait a round.
		noCreate, denied = false, denied+n
	}
	if denied == 0 && !noCreate {
		return Verdict{Action: Allow, Rule: e.ruleName(firstRule(ds))}
	}
	fwd := *m
	if noCreate {
		noAutoCreate(&fwd)
	}
	if denied == 0 {
		// Only auto-creation is withheld: every topic goes ahead, and
		// the answer has nothing to add (a raised version is decoded and
		// re-encoded at the client's by the gateway).
		return Verdict{Action: Partial, Rule: e.ruleName(createRule), Forward: &fwd, Merge: func(kmsg.Response) {}}
	}
	fwd.Topics = make([]kmsg.MetadataRequestTopic, 0, len(m.Topics)-denied) // never nil: nil asks for all topics
	allowed := map[string]bool{}
	allowedIDs := map[[16]byte]bool{}
	var errs []kmsg.MetadataResponseTopic
	for i, t := range m.Topics {
		if !ds[i].deny {
			fwd.Topics = append(fwd.Topics, t)
			if t.Topic != nil {
				allowed[*t.Topic] = true
			} else {
				allowedIDs[t.TopicID] = true
			}
			continue
		}
		errs = append(errs, metadataErrTopic(t, ds[i].code))
	}
	return Verdict{Action: Partial, Rule: e.ruleName(firstDenied(ds).rule), Forward: &fwd, Merge: func(resp kmsg.Response) {
		mr, ok := resp.(*kmsg.MetadataResponse)
		if !ok {
			return
		}
		// Keep only what was asked and allowed: a v0 request whose
		// allowed list is empty asks for all topics.
		kept := mr.Topics[:0]
		for _, t := range mr.Topics {
			if (t.Topic != nil && allowed[*t.Topic]) || (t.TopicID != [16]byte{} && allowedIDs[t.TopicID]) {
				kept = append(kept, t)
			}
		}
		mr.Topics = append(kept, errs...)
	}}
}

// Auto-creation. A broker creates a topic a Metadata request names only
// when the caller may CREATE it, on the cluster or the topic
// (KafkaApis.getTopicMetadata: without the ACL the topic is answered,
// not created). The gateway decides that as the CreateTopics request
// naming the topic that a current client would send: when the policy
// denies it, the request goes to the backend with AllowAutoTopicCreation
// false, so a topic that does not exist comes back
// UNKNOWN_TOPIC_OR_PARTITION and is not created (what a broker with
// auto-creation off answers). Before v4 a Metadata request has no such
// field and always asks for auto-creation, so it is raised to v4 (the v4
// answer is the v3 answer, and the gateway re-encodes it at the client's
// version). One field covers the whole request: a request that names
// both topics the client may create and topics it may not is split over
// two rounds (splitCreation).

// createTopicsVersion is the CreateTopics version auto-creation is
// decided at.
var createTopicsVersion = kmsg.NewPtrCreateTopicsRequest().MaxVersion()

// autoCreateVersion is the first Metadata version that carries
// AllowAutoTopicCreation (KIP-204).
const autoCreateVersion = 4

// withholdCreation reports whether a named-topics Metadata request would
// auto-create a topic (by name, allowed for Metadata by ds) the subject
// may not create, and the rule that denies the first such topic.
func (e *Engine) withholdCreation(r *Request, bits []uint64, m *kmsg.MetadataRequest, ds []decision) (bool, int32) {
	if !asksCreation(m) {
		return false, -1
	}
	for i := range m.Topics {
		if d, ok := e.createDecision(r, bits, m, ds, i); ok && d.deny {
			return true, d.rule
		}
	}
	return false, -1
}

// asksCreation reports whether the backend would auto-create the missing
// topics m names (always before v4).
func asksCreation(m *kmsg.MetadataRequest) bool {
	return m.Version < autoCreateVersion || m.AllowAutoTopicCreation
}

// createDecision is the CreateTopics decision for topic i of m; ok is
// false for a topic that cannot be created by this request (denied for
// Metadata, so never forwarded, or named by id).
func (e *Engine) createDecision(r *Request, bits []uint64, m *kmsg.MetadataRequest, ds []decision, i int) (decision, bool) {
	t := m.Topics[i]
	if ds[i].deny || t.Topic == nil || *t.Topic == "" {
		return decision{}, false
	}
	u := unit{topic: *t.Topic, hasTopic: true}
	// The rules, then the ACLs: Kafka auto-creates a topic a Metadata
	// request names only for a principal with CREATE on the cluster or
	// the topic (KafkaApis handleTopicMetadataRequest).
	return e.decide(r.Subject, bits, apis.CreateTopics, createTopicsVersion, &u, nil, nil), true
}

// splitCreation handles a request that names both topics the subject may
// create and topics it may not: the one AllowAutoTopicCreation flag
// cannot serve both. When a creatable topic has not been asked for
// creation recently (r.Creations), the topics that may not be created are
// marked denied in ds with LEADER_NOT_AVAILABLE (retriable: the client
// asks again, as it does while a topic is being created), so the rest is
// forwarded with auto-creation as the client asked; the creatable names
// are recorded. The client's next request, its creatable topics now
// tried, goes whole with auto-creation withheld. It returns how many
// topics it marked.
func (e *Engine) splitCreation(r *Request, bits []uint64, m *kmsg.MetadataRequest, ds []decision) int {
	if r.Creations == nil || !asksCreation(m) {
		return 0
	}
	var fresh []string
	var held []int
	for i := range m.Topics {
		d, ok := e.createDecision(r, bits, m, ds, i)
		switch {
		case !ok:
		case d.deny:
			held = append(held, i)
		case !r.Creations.CreationAttempted(*m.Topics[i].Topic):
			fresh = append(fresh, *m.Topics[i].Topic)
		}
	}
	if len(fresh) == 0 || len(held) == 0 {
		return 0
	}
	for _, name := range fresh {
		r.Creations.AttemptCreation(name)
	}
	for _, i := range held {
		d, _ := e.createDecision(r, bits, m, ds, i)
		ds[i] = decision{deny: true, rule: d.rule, code: kerr.LeaderNotAvailable.Code}
	}
	return len(held)
}

// noAutoCreate turns auto-creation off in a forwarded Metadata request,
// raising a v0-3 request to v4 (the first with the field).
func noAutoCreate(m *kmsg.MetadataRequest) {
	m.AllowAutoTopicCreation = false
	if m.Version < autoCreateVersion {
		m.Version = autoCreateVersion
	}
}

// creationDeniable reports whether the policy may deny this subject the
// creation of some topic, so a named Metadata request must be decoded to
// withhold auto-creation (NeedsBody).
func (e *Engine) creationDeniable(bits []uint64) bool {
	for _, i := range e.rulesFor(apis.CreateTopics) {
		if !bitSet(bits, int(i)) {
			continue
		}
		r := &e.rules[i]
		if createTopicsVersion < r.vmin || createTopicsVersion > r.vmax || r.verb == verbRate {
			continue
		}
		switch {
		case r.hasTopicCond() && r.verb == verbDeny:
			return true // denies some topics
		case r.resourceCond():
			continue // allows some topics, or names a group or transactional id
		}
		return r.verb == verbDeny
	}
	return e.defaultDeny
}

// topicRulesReachable reports whether a rule with a topic condition, or a
// default deny, could hide a topic from this subject.
func (e *Engine) topicRulesReachable(bits []uint64, key, version int16) bool {
	for _, i := range e.rulesFor(key) {
		if !bitSet(bits, int(i)) {
			continue
		}
		r := &e.rules[i]
		if version < r.vmin || version > r.vmax {
			continue
		}
		if r.hasTopicCond() {
			return true
		}
		if r.resourceCond() {
			continue // group/txn rules never match a Metadata topic
		}
		if r.verb != verbRate {
			return false // decides every topic
		}
	}
	return e.defaultDeny
}

// metadataErrTopic answers a denied Metadata topic: by name with the
// name, no id and no partitions; by id with the id and a null name
// (KafkaApis handleTopicMetadataRequest: "do not disclose the existence of
// topics unauthorized for Describe"; topic ids are not sensitive).
func metadataErrTopic(t kmsg.MetadataRequestTopic, code int16) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	rt.ErrorCode = code
	if t.Topic != nil {
		name := *t.Topic
		rt.Topic = &name
	} else {
		rt.TopicID = t.TopicID
	}
	rt.Partitions = []kmsg.MetadataResponseTopicPartition{}
	return rt
}

// metadataDeny answers a Metadata request refused outright: the named
// topics with the error, no brokers, and the top-level error from v13
// (KIP-1102).
func metadataDeny(m *kmsg.MetadataRequest, codes *resourceCodes) kmsg.Response {
	resp := m.ResponseKind().(*kmsg.MetadataResponse)
	for _, t := range m.Topics {
		resp.Topics = append(resp.Topics, metadataErrTopic(t, codes.top))
	}
	if m.Version >= 13 {
		resp.ErrorCode = codes.top
	}
	if len(m.Topics) == 0 && m.Version < 13 {
		// Nothing carries the error below v13: answer the refused
		// all-topics request with one error entry rather than an empty,
		// successful-looking list.
		resp.Topics = append(resp.Topics, metadataErrTopic(kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr("*")}, codes.top))
	}
	return resp
}
