package policy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const tablePolicy = `
listeners:
  - name: inside
  - name: outside
    listen: 127.0.0.1:19092
policy:
  default: allow
  rules:
    - name: no-admin-from-outside
      match: { listener: outside, api: [admin] }
      action: deny
    - name: office-may-create
      match: { address: 10.1.0.0/16, api: [CreateTopics] }
      action: allow
    - name: nobody-else-creates
      match: { api: [CreateTopics] }
      action: deny
    - name: payments-writes-payments-only
      match: { principal: payments-svc, api: [Produce], topic_not: { prefix: payments. } }
      action: deny
    - name: secret-topics
      match: { client_id: { regex: "batch-[0-9]+" }, topic: [secret] }
      action: deny
    - name: old-fetch
      match: { api: [Fetch], api_versions: { max: 3 } }
      action: deny
    - name: group-lock
      match: { group: { prefix: locked- } }
      action: deny
`

func produceReq(version int16, topics ...string) *kmsg.ProduceRequest {
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks = version, -1
	for _, t := range topics {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = t
		rt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0}, {Partition: 1}}
		p.Topics = append(p.Topics, rt)
	}
	return p
}

func fetchReq(version int16, topics ...string) *kmsg.FetchRequest {
	f := kmsg.NewPtrFetchRequest()
	f.Version, f.SessionID, f.SessionEpoch = version, 7, 3
	for _, t := range topics {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = t
		rt.Partitions = []kmsg.FetchRequestTopicPartition{{Partition: 0}}
		f.Topics = append(f.Topics, rt)
	}
	return f
}

// TestRuleTable runs listener × address × client id × principal × API ×
// topic combinations through Check and compares the decision and rule.
func TestRuleTable(t *testing.T) {
	e := mustParse(t, tablePolicy)
	ct := func(v int16) kmsg.Request {
		r := kmsg.NewPtrCreateTopicsRequest()
		r.Version = v
		r.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "new"}}
		return r
	}
	oc := func(group string) kmsg.Request {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version, r.Group = 8, group
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0}}}}
		return r
	}
	cases := []struct {
		name                              string
		listener, addr, client, principal string
		key, version                      int16
		body                              kmsg.Request
		want                              Action
		rule                              string
		code                              int16 // expected first error code when denied
	}{
		{"admin outside", "outside", "10.1.2.3", "c", "", 19, 5, ct(5), Deny, "no-admin-from-outside", kerr.TopicAuthorizationFailed.Code},
		{"create from office inside", "inside", "10.1.2.3", "c", "", 19, 5, ct(5), Allow, "office-may-create", 0},
		{"create from elsewhere", "inside", "192.168.1.1", "c", "", 19, 5, ct(5), Deny, "nobody-else-creates", kerr.TopicAuthorizationFailed.Code},
		{"create ipv4-mapped office", "inside", "::ffff:10.1.9.9", "c", "", 19, 5, ct(5), Allow, "office-may-create", 0},
		{"describe acls outside", "outside", "10.9.9.9", "c", "", 29, 3, kmsg.NewPtrDescribeACLsRequest(), Deny, "no-admin-from-outside", kerr.ClusterAuthorizationFailed.Code},
		{"metadata outside", "outside", "10.9.9.9", "c", "", 3, 12, &kmsg.MetadataRequest{Version: 12}, Allow, "", 0},
		{"payments to payments", "inside", "10.9.9.9", "c", "payments-svc", 0, 9, produceReq(9, "payments.in"), Allow, "", 0},
		{"payments elsewhere", "inside", "10.9.9.9", "c", "payments-svc", 0, 9, produceReq(9, "orders"), Deny, "payments-writes-payments-only", kerr.TopicAuthorizationFailed.Code},
		{"other principal elsewhere", "inside", "10.9.9.9", "c", "alice", 0, 9, produceReq(9, "orders"), Allow, "", 0},
		{"batch client secret", "inside", "10.9.9.9", "batch-12", "", 0, 9, produceReq(9, "secret"), Deny, "secret-topics", kerr.TopicAuthorizationFailed.Code},
		{"regex is anchored", "inside", "10.9.9.9", "batch-12x", "", 0, 9, produceReq(9, "secret"), Allow, "", 0},
		{"batch client fetch secret", "inside", "10.9.9.9", "batch-1", "", 1, 11, fetchReq(11, "secret"), Deny, "secret-topics", kerr.TopicAuthorizationFailed.Code},
		{"old fetch", "inside", "10.9.9.9", "c", "", 1, 3, fetchReq(3, "orders"), Deny, "old-fetch", kerr.TopicAuthorizationFailed.Code},
		{"new fetch", "inside", "10.9.9.9", "c", "", 1, 4, fetchReq(4, "orders"), Allow, "", 0},
		{"locked group", "inside", "10.9.9.9", "c", "", 8, 8, oc("locked-1"), Deny, "group-lock", kerr.GroupAuthorizationFailed.Code},
		{"open group", "inside", "10.9.9.9", "c", "", 8, 8, oc("open"), Allow, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := subj(c.listener, c.addr, c.client, c.principal)
			body := roundTrip(t, c.body)
			v := e.Check(&Request{Subject: s, Key: c.key, Version: c.version, Body: body})
			if v.Action != c.want || v.Rule != c.rule {
				t.Fatalf("verdict %v rule %q; want %v rule %q", v.Action, v.Rule, c.want, c.rule)
			}
			if c.want == Deny {
				codes := map[string]int16{}
				errorCodes(reflectOf(v.Response), "", codes)
				found := false
				for _, code := range codes {
					found = found || code == c.code
				}
				if !found {
					t.Errorf("response codes %v; want %d", codes, c.code)
				}
			}
			if needs := e.NeedsBody(s, c.key, c.version); c.want == Deny && !needs {
				t.Error("NeedsBody is false for a request that is denied")
			}
		})
	}
}

func TestNeedsBodyKeyOnly(t *testing.T) {
	e := mustParse(t, tablePolicy)
	inside := subj("inside", "10.9.9.9", "c", "")
	// Heartbeat: only the group rule could matter -> body needed.
	if !e.NeedsBody(inside, 12, 4) {
		t.Error("Heartbeat: a group rule applies, NeedsBody should be true")
	}
	e2 := mustParse(t, "listeners:\n  - name: inside\n  - name: outside\n    listen: 127.0.0.1:19092\npolicy:\n  rules:\n    - {match: {listener: outside, api: [admin]}, action: deny}\n")
	if e2.NeedsBody(inside, 0, 9) || e2.NeedsBody(inside, 19, 5) {
		t.Error("key-only policy: inside listener needs no body")
	}
	if !e2.NeedsBody(subj("outside", "10.9.9.9", "c", ""), 19, 5) {
		t.Error("outside CreateTopics is denied: body needed for the response")
	}
	if n := testing.AllocsPerRun(100, func() { e2.NeedsBody(inside, 0, 9) }); n != 0 {
		t.Errorf("NeedsBody allocates %.0f times", n)
	}
	if v := e2.Check(&Request{Subject: inside, Key: 0, Version: 9}); v.Action != Allow {
		t.Errorf("nil body allowed request: %v", v.Action)
	}
}

func TestDefaultDeny(t *testing.T) {
	e := mustParse(t, `
policy:
  default: deny
  rules:
    - {name: read-orders, match: {api: [Fetch, Metadata], topic: {prefix: orders.}}, action: allow}
`)
	s := subj("default", "10.0.0.1", "c", "")
	for _, key := range []int16{18, 17, 36} {
		if e.NeedsBody(s, key, 0) {
			t.Errorf("key %d is exempt from the default", key)
		}
		if v := e.Check(&Request{Subject: s, Key: key, Version: 0}); v.Action != Allow {
			t.Errorf("key %d: %v", key, v.Action)
		}
	}
	if d := e.DeniedKeys(s); len(d) == 0 || contains(d, 18) || contains(d, 3) || contains(d, 1) || !contains(d, 19) {
		t.Errorf("DeniedKeys = %v", d)
	}
	v := e.Check(&Request{Subject: s, Key: 1, Version: 11, Body: fetchReq(11, "orders.a", "payments")})
	if v.Action != Partial {
		t.Fatalf("fetch: %v", v.Action)
	}
}

func contains(s []int16, k int16) bool {
	for _, x := range s {
		if x == k {
			return true
		}
	}
	return false
}

func TestPartialProduce(t *testing.T) {
	e := mustParse(t, "policy:\n  rules:\n    - {name: no-secret, match: {topic: {prefix: secret}}, action: deny}\n")
	s := subj("default", "10.0.0.1", "c", "")
	req := produceReq(9, "a", "secret.x", "b")
	v := e.Check(&Request{Subject: s, Key: 0, Version: 9, Body: req})
	if v.Action != Partial || v.Rule != "no-secret" {
		t.Fatalf("verdict %v %q", v.Action, v.Rule)
	}
	fwd := v.Forward.(*kmsg.ProduceRequest)
	if len(fwd.Topics) != 2 || fwd.Topics[0].Topic != "a" || fwd.Topics[1].Topic != "b" || len(req.Topics) != 3 {
		t.Fatalf("forward topics %v (original %d)", fwd.Topics, len(req.Topics))
	}
	resp := fwd.ResponseKind().(*kmsg.ProduceResponse)
	for _, tn := range []string{"a", "b"} {
		resp.Topics = append(resp.Topics, kmsg.ProduceResponseTopic{Topic: tn, Partitions: []kmsg.ProduceResponseTopicPartition{{Partition: 0}, {Partition: 1}}})
	}
	v.Merge(resp)
	got := map[string][]int16{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			got[tp.Topic] = append(got[tp.Topic], p.ErrorCode)
		}
	}
	if len(got["secret.x"]) != 2 || got["secret.x"][0] != kerr.TopicAuthorizationFailed.Code || got["a"][0] != 0 {
		t.Fatalf("merged = %v", got)
	}
	// acks=0 with a denied part: close.
	req.Acks = 0
	if v := e.Check(&Request{Subject: s, Key: 0, Version: 9, Body: req}); v.Action != Deny || !v.Close {
		t.Errorf("acks=0 partial: %v close=%v", v.Action, v.Close)
	}
}

func TestPartialFetch(t *testing.T) {
	e := mustParse(t, "policy:\n  rules:\n    - {name: no-secret, match: {topic: [secret]}, action: deny}\n")
	s := subj("default", "10.0.0.1", "c", "")
	v := e.Check(&Request{Subject: s, Key: 1, Version: 12, Body: fetchReq(12, "secret", "a")})
	if v.Action != Partial {
		t.Fatalf("verdict %v", v.Action)
	}
	fwd := v.Forward.(*kmsg.FetchRequest)
	if len(fwd.Topics) != 1 || fwd.Topics[0].Topic != "a" || fwd.SessionID != 0 || fwd.SessionEpoch != -1 {
		t.Fatalf("forward = %+v", fwd)
	}
	resp := &kmsg.FetchResponse{Version: 12, Topics: []kmsg.FetchResponseTopic{{Topic: "a", Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 0}}}}}
	v.Merge(resp)
	if len(resp.Topics) != 2 || resp.Topics[1].Topic != "secret" || resp.Topics[1].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("merged = %+v", resp.Topics)
	}
}

type names map[[16]byte]string

func (n names) TopicName(id [16]byte) (string, bool) { s, ok := n[id]; return s, ok }

func TestTopicIDs(t *testing.T) {
	e := mustParse(t, "policy:\n  rules:\n    - {name: no-secret, match: {topic: [secret]}, action: deny}\n")
	s := subj("default", "10.0.0.1", "c", "")
	idA, idSecret, idUnknown := [16]byte{1}, [16]byte{2}, [16]byte{3}
	ids := names{idA: "a", idSecret: "secret"}
	f := kmsg.NewPtrFetchRequest()
	f.Version = 13
	for _, id := range [][16]byte{idA, idSecret, idUnknown} {
		f.Topics = append(f.Topics, kmsg.FetchRequestTopic{TopicID: id, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}, {Partition: 1}}})
	}
	v := e.Check(&Request{Subject: s, Key: 1, Version: 13, Body: f, Names: ids})
	if v.Action != Partial {
		t.Fatalf("verdict %v", v.Action)
	}
	if fwd := v.Forward.(*kmsg.FetchRequest); len(fwd.Topics) != 1 || fwd.Topics[0].TopicID != idA {
		t.Fatalf("forward = %+v", fwd.Topics)
	}
	resp := &kmsg.FetchResponse{Version: 13}
	v.Merge(resp)
	codes := map[[16]byte]int16{}
	for _, tp := range resp.Topics {
		if len(tp.Partitions) != 2 {
			t.Errorf("topic %x: %d partitions, want 2", tp.TopicID, len(tp.Partitions))
		}
		codes[tp.TopicID] = tp.Partitions[0].ErrorCode
	}
	if codes[idSecret] != kerr.TopicAuthorizationFailed.Code || codes[idUnknown] != kerr.UnknownTopicID.Code {
		t.Fatalf("codes = %v", codes)
	}
	// Produce v13 by id too.
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks = 13, 1
	p.Topics = []kmsg.ProduceRequestTopic{{TopicID: idSecret, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 4}}}}
	v = e.Check(&Request{Subject: s, Key: 0, Version: 13, Body: p, Names: ids})
	pr, _ := v.Response.(*kmsg.ProduceResponse)
	if v.Action != Deny || pr == nil || pr.Topics[0].TopicID != idSecret || pr.Topics[0].Partitions[0].Partition != 4 {
		t.Fatalf("produce by id: %v %+v", v.Action, pr)
	}
}

func TestMetadata(t *testing.T) {
	e := mustParse(t, "policy:\n  rules:\n    - {name: hide, match: {topic: {prefix: hidden.}}, action: deny}\n")
	s := subj("default", "10.0.0.1", "c", "")
	str := kmsg.StringPtr
	// Named: the hidden name must not be forwarded (auto-creation).
	m := &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: str("hidden.a")}, {Topic: str("ok")}}}
	v := e.Check(&Request{Subject: s, Key: 3, Version: 12, Body: m})
	if v.Action != Partial {
		t.Fatalf("named: %v", v.Action)
	}
	fwd := v.Forward.(*kmsg.MetadataRequest)
	if len(fwd.Topics) != 1 || *fwd.Topics[0].Topic != "ok" {
		t.Fatalf("named forward = %+v", fwd.Topics)
	}
	resp := &kmsg.MetadataResponse{Version: 12, Topics: []kmsg.MetadataResponseTopic{{Topic: str("ok")}}}
	v.Merge(resp)
	if len(resp.Topics) != 2 || *resp.Topics[1].Topic != "hidden.a" || resp.Topics[1].ErrorCode != kerr.TopicAuthorizationFailed.Code ||
		resp.Topics[1].TopicID != [16]byte{} {
		t.Fatalf("named merge = %+v", resp.Topics)
	}
	// Only hidden names: forward an empty, non-nil list (nil = all topics).
	m = &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: str("hidden.a")}}}
	v = e.Check(&Request{Subject: s, Key: 3, Version: 12, Body: m})
	if fwd := v.Forward.(*kmsg.MetadataRequest); fwd.Topics == nil || len(fwd.Topics) != 0 {
		t.Fatalf("all-hidden forward = %#v", fwd.Topics)
	}
	// All topics: forwarded as is, hidden ones removed from the answer.
	m = &kmsg.MetadataRequest{Version: 12}
	v = e.Check(&Request{Subject: s, Key: 3, Version: 12, Body: m})
	if v.Action != Partial || v.Forward.(*kmsg.MetadataRequest).Topics != nil {
		t.Fatalf("all: %v", v.Action)
	}
	resp = &kmsg.MetadataResponse{Version: 12, Topics: []kmsg.MetadataResponseTopic{{Topic: str("hidden.x")}, {Topic: str("a")}, {Topic: str("hidden.y")}}}
	v.Merge(resp)
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "a" {
		t.Fatalf("all merge = %+v", resp.Topics)
	}
	// v0: an empty list means all topics; with every name hidden the
	// merge must drop what the upstream sends back.
	m = &kmsg.MetadataRequest{Version: 0, Topics: []kmsg.MetadataRequestTopic{{Topic: str("hidden.a")}}}
	v = e.Check(&Request{Subject: s, Key: 3, Version: 0, Body: m})
	resp = &kmsg.MetadataResponse{Version: 0, Topics: []kmsg.MetadataResponseTopic{{Topic: str("a")}, {Topic: str("b")}}}
	v.Merge(resp)
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "hidden.a" {
		t.Fatalf("v0 merge = %+v", resp.Topics)
	}
	// Without topic rules, all-topics Metadata needs no filtering.
	e2 := mustParse(t, "policy:\n  rules:\n    - {match: {api: [admin]}, action: deny}\n")
	if v := e2.Check(&Request{Subject: s, Key: 3, Version: 12, Body: &kmsg.MetadataRequest{Version: 12}}); v.Action != Allow {
		t.Errorf("no topic rules: %v", v.Action)
	}
}

func TestHideKeys(t *testing.T) {
	e := mustParse(t, `
listeners:
  - name: inside
  - name: outside
    listen: 127.0.0.1:19092
policy:
  hide_denied_apis: [outside]
  rules:
    - {match: {listener: outside, api: [admin]}, action: deny}
    - {match: {listener: outside, api: [Produce], topic: [x]}, action: deny}
`)
	if !e.HidesKeys("outside") || e.HidesKeys("inside") {
		t.Error("HidesKeys")
	}
	d := e.DeniedKeys(subj("outside", "10.0.0.1", "c", ""))
	if !contains(d, 19) || !contains(d, 32) || contains(d, 0) || contains(d, 1) || contains(d, 18) {
		t.Errorf("DeniedKeys = %v", d)
	}
	if d := e.DeniedKeys(subj("inside", "10.0.0.1", "c", "")); len(d) != 0 {
		t.Errorf("inside DeniedKeys = %v", d)
	}
}

// TestMetadataAutoCreate: a CreateTopics deny withholds auto-creation of
// the names it matches (issue 19): the request is forwarded with
// AllowAutoTopicCreation false, v0-3 raised to v4, decided by the
// CreateTopics rule; names it does not match, requests that do not ask
// for creation and all-topics requests are left alone.
func TestMetadataAutoCreate(t *testing.T) {
	e := mustParse(t, "policy:\n  rules:\n    - {name: hide, match: {topic: {prefix: hidden.}}, action: deny}\n"+
		"    - {name: no-create, match: {api: [CreateTopics], topic: {prefix: locked.}}, action: deny}\n")
	s := subj("default", "10.0.0.1", "c", "")
	if !e.NeedsBody(s, 3, 12) {
		t.Fatal("NeedsBody(Metadata) is false with a CreateTopics deny")
	}
	named := func(version int16, create bool, names ...string) *kmsg.MetadataRequest {
		m := &kmsg.MetadataRequest{Version: version, AllowAutoTopicCreation: create}
		for _, n := range names {
			m.Topics = append(m.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(n)})
		}
		return m
	}
	for _, c := range []struct {
		m        *kmsg.MetadataRequest
		withheld bool
		version  int16
		rule     string
	}{
		{named(12, true, "locked.a"), true, 12, "no-create"},
		{named(12, true, "open.a", "locked.a"), true, 12, "no-create"},
		{named(12, true, "hidden.a", "locked.a"), true, 12, "hide"},
		{named(1, false, "locked.a"), true, 4, "no-create"}, // v0-3 always create
		{named(3, false, "locked.a"), true, 4, "no-create"},
		{named(12, true, "open.a"), false, 12, ""},
		{named(12, false, "locked.a"), false, 12, ""},
		{named(12, true, "hidden.locked"), false, 12, "hide"}, // denied: never forwarded
	} {
		v := e.Check(&Request{Subject: s, Key: 3, Version: c.m.Version, Body: c.m})
		if v.Rule != c.rule {
			t.Errorf("%d %v: rule %q, want %q", c.m.Version, c.m.Topics, v.Rule, c.rule)
		}
		if !c.withheld {
			if fwd, ok := v.Forward.(*kmsg.MetadataRequest); ok && fwd.Version != c.m.Version {
				t.Errorf("%d: forwarded at v%d", c.m.Version, fwd.Version)
			}
			if v.Action == Allow || v.Forward == nil || v.Forward.(*kmsg.MetadataRequest).AllowAutoTopicCreation == c.m.AllowAutoTopicCreation {
				continue
			}
			t.Errorf("%d %v: auto-creation changed", c.m.Version, c.m.Topics)
			continue
		}
		if v.Action != Partial {
			t.Fatalf("%d %v: %v, want partial", c.m.Version, c.m.Topics, v.Action)
		}
		fwd := v.Forward.(*kmsg.MetadataRequest)
		if fwd.AllowAutoTopicCreation || fwd.Version != c.version {
			t.Errorf("%d %v: forwarded v%d allow_auto_topic_creation=%v, want v%d false", c.m.Version, c.m.Topics, fwd.Version, fwd.AllowAutoTopicCreation, c.version)
		}
		if c.m.Version < 4 && c.m.Version == fwd.Version {
			t.Errorf("the client's request was changed in place")
		}
	}
	// A request naming both kinds, with the creatable name not tried yet:
	// the creatable one is forwarded alone (auto-creation as asked), the
	// other answered LEADER_NOT_AVAILABLE; the next such request goes
	// whole with auto-creation withheld.
	tried := triedSet{}
	mixed := named(12, true, "open.a", "locked.a")
	v := e.Check(&Request{Subject: s, Key: 3, Version: 12, Body: mixed, Creations: tried})
	fwd, _ := v.Forward.(*kmsg.MetadataRequest)
	if v.Action != Partial || fwd == nil || len(fwd.Topics) != 1 || *fwd.Topics[0].Topic != "open.a" || !fwd.AllowAutoTopicCreation || !tried["open.a"] {
		t.Fatalf("mixed, first: %v %+v tried %v", v.Action, fwd, tried)
	}
	resp := &kmsg.MetadataResponse{Version: 12, Topics: []kmsg.MetadataResponseTopic{{Topic: kmsg.StringPtr("open.a")}}}
	v.Merge(resp)
	if len(resp.Topics) != 2 || *resp.Topics[1].Topic != "locked.a" || resp.Topics[1].ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Fatalf("mixed, first merge: %+v", resp.Topics)
	}
	v = e.Check(&Request{Subject: s, Key: 3, Version: 12, Body: mixed, Creations: tried})
	if fwd := v.Forward.(*kmsg.MetadataRequest); len(fwd.Topics) != 2 || fwd.AllowAutoTopicCreation {
		t.Fatalf("mixed, second: %+v", fwd)
	}
	// All topics never auto-create.
	if v := e.Check(&Request{Subject: s, Key: 3, Version: 12, Body: &kmsg.MetadataRequest{Version: 12, AllowAutoTopicCreation: true}}); v.Forward != nil && !v.Forward.(*kmsg.MetadataRequest).AllowAutoTopicCreation {
		t.Error("all-topics request: auto-creation withheld")
	}
	// A default deny denies CreateTopics unless a rule allows it.
	d := mustParse(t, "policy:\n  default: deny\n  rules:\n    - {match: {api: [Metadata, Produce]}, action: allow}\n")
	if v := d.Check(&Request{Subject: s, Key: 3, Version: 12, Body: named(12, true, "x")}); v.Action != Partial || v.Forward.(*kmsg.MetadataRequest).AllowAutoTopicCreation {
		t.Errorf("default deny: %v", v.Action)
	}
	a := mustParse(t, "policy:\n  default: deny\n  rules:\n    - {match: {api: [Metadata, Produce, CreateTopics]}, action: allow}\n")
	if a.NeedsBody(s, 3, 12) {
		t.Error("NeedsBody(Metadata) with CreateTopics allowed")
	}
}

// triedSet is a policy.Creations for tests.
type triedSet map[string]bool

func (s triedSet) CreationAttempted(name string) bool { return s[name] }
func (s triedSet) AttemptCreation(name string)        { s[name] = true }
