package policy

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

func name(n string) EntityPart { return EntityPart{Set: true, Name: n} }

var dflt = EntityPart{Set: true, Default: true}

// TestQuotaPrecedence: KIP-55's order, most specific first, and the
// metric tags (whose budget is shared) of each level, as Kafka's
// DefaultQuotaCallback. Each row removes the most specific quota left.
func TestQuotaPrecedence(t *testing.T) {
	levels := []struct {
		e    QuotaEntity
		tags [2]string
	}{
		{QuotaEntity{name("alice"), name("app")}, [2]string{"alice", "app"}},
		{QuotaEntity{name("alice"), dflt}, [2]string{"alice", "app"}},
		{QuotaEntity{name("alice"), EntityPart{}}, [2]string{"alice", ""}},
		{QuotaEntity{dflt, name("app")}, [2]string{"alice", "app"}},
		{QuotaEntity{dflt, dflt}, [2]string{"alice", "app"}},
		{QuotaEntity{dflt, EntityPart{}}, [2]string{"alice", ""}},
		{QuotaEntity{EntityPart{}, name("app")}, [2]string{"", "app"}},
		{QuotaEntity{EntityPart{}, dflt}, [2]string{"", "app"}},
	}
	q, err := OpenQuotas("")
	if err != nil {
		t.Fatal(err)
	}
	// Unrelated entities that must never match alice/app.
	for _, e := range []QuotaEntity{{name("bob"), name("app")}, {name("alice"), name("other")}, {EntityPart{}, name("other")}} {
		if err := q.Set(e, map[string]float64{QuotaProducerByteRate: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for i, l := range levels {
		if err := q.Set(l.e, map[string]float64{QuotaProducerByteRate: float64(1000 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, l := range levels {
		v, from, tags, ok := q.Resolve(QuotaProducerByteRate, "alice", "app")
		if !ok || v != float64(1000+i) || from != l.e || tags != l.tags {
			t.Errorf("level %d: got %v from %s tags %q ok=%v; want %v from %s tags %q", i, v, from, tags, ok, 1000+i, l.e, l.tags)
		}
		if _, _, _, ok := q.Resolve(QuotaConsumerByteRate, "alice", "app"); ok {
			t.Errorf("level %d: consumer_byte_rate resolved though only producer_byte_rate is set", i)
		}
		if err := q.Set(l.e, nil); err != nil {
			t.Fatal(err)
		}
	}
	if v, _, _, ok := q.Resolve(QuotaProducerByteRate, "alice", "app"); ok {
		t.Errorf("resolved %v with no matching quota left", v)
	}
}

// TestQuotaPrecedencePerKey: each key resolves on its own (Kafka has one
// quota manager per type): a user quota for one key does not hide a
// client-id quota for another.
func TestQuotaPrecedencePerKey(t *testing.T) {
	q, _ := OpenQuotas("")
	q.Set(QuotaEntity{User: name("alice")}, map[string]float64{QuotaProducerByteRate: 10})
	q.Set(QuotaEntity{ClientID: name("app")}, map[string]float64{QuotaConsumerByteRate: 20, QuotaProducerByteRate: 30})
	if v, _, _, _ := q.Resolve(QuotaProducerByteRate, "alice", "app"); v != 10 {
		t.Errorf("producer: %v, want the user's 10", v)
	}
	if v, _, _, _ := q.Resolve(QuotaConsumerByteRate, "alice", "app"); v != 20 {
		t.Errorf("consumer: %v, want the client id's 20", v)
	}
	if v, _, _, _ := q.Resolve(QuotaProducerByteRate, "bob", "app"); v != 30 {
		t.Errorf("producer for bob: %v, want the client id's 30", v)
	}
}

func alterEntry(ops []kmsg.AlterClientQuotasRequestEntryOp, ent ...string) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for i := 0; i+1 < len(ent); i += 2 {
		ee := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ee.Type = ent[i]
		if ent[i+1] != "<default>" {
			ee.Name = kmsg.StringPtr(ent[i+1])
		}
		e.Entity = append(e.Entity, ee)
	}
	e.Ops = ops
	return e
}

func op(key string, v float64, remove bool) kmsg.AlterClientQuotasRequestEntryOp {
	o := kmsg.NewAlterClientQuotasRequestEntryOp()
	o.Key, o.Value, o.Remove = key, v, remove
	return o
}

// TestQuotaAlterValidation: each bad entry gets Kafka's INVALID_REQUEST,
// the good entries of the same request still apply, validate_only stores
// nothing, and the state file survives a reopen.
func TestQuotaAlterValidation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.json")
	q, err := OpenQuotas(path)
	if err != nil {
		t.Fatal(err)
	}
	good := []kmsg.AlterClientQuotasRequestEntryOp{op(QuotaProducerByteRate, 1024, false)}
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{
		alterEntry(good, "user", "alice"), // 0 ok
		alterEntry([]kmsg.AlterClientQuotasRequestEntryOp{op("bogus_rate", 1, false)}, "user", "bob"),            // 1 unknown key
		alterEntry([]kmsg.AlterClientQuotasRequestEntryOp{op(QuotaProducerByteRate, 1.5, false)}, "user", "bob"), // 2 not a long
		alterEntry(good),                           // 3 empty entity
		alterEntry(good, "ip", "10.0.0.1"),         // 4 ip refused
		alterEntry(good, "user", "a", "user", "b"), // 5 duplicate type
		alterEntry(good, "user", ""),               // 6 empty name
		alterEntry(good, "group", "g"),             // 7 unknown type
		alterEntry([]kmsg.AlterClientQuotasRequestEntryOp{op(QuotaRequestPercentage, -1, false)}, "client-id", "c"),                                        // 8 negative
		alterEntry([]kmsg.AlterClientQuotasRequestEntryOp{op(QuotaRequestPercentage, 50, false), op(QuotaRequestPercentage, 60, false)}, "client-id", "c"), // 9 duplicate key
		alterEntry([]kmsg.AlterClientQuotasRequestEntryOp{op(QuotaControllerMutationRate, 2.5, false)}, "user", "<default>", "client-id", "<default>"),     // 10 ok
	}
	resp, _ := q.Alter(req)
	if len(resp.Entries) != len(req.Entries) {
		t.Fatalf("%d results for %d entries", len(resp.Entries), len(req.Entries))
	}
	for i, e := range resp.Entries {
		want := kerr.InvalidRequest.Code
		if i == 0 || i == 10 {
			want = 0
		}
		if e.ErrorCode != want {
			msg := ""
			if e.ErrorMessage != nil {
				msg = *e.ErrorMessage
			}
			t.Errorf("entry %d: code %d (%s), want %d", i, e.ErrorCode, msg, want)
		}
		if want != 0 && (e.ErrorMessage == nil || *e.ErrorMessage == "") {
			t.Errorf("entry %d: no error message", i)
		}
	}
	if q.Len() != 2 {
		t.Fatalf("%d entities stored, want 2: %+v", q.Len(), q.List())
	}
	// validate_only: checked, not stored.
	vreq := kmsg.NewPtrAlterClientQuotasRequest()
	vreq.ValidateOnly = true
	vreq.Entries = []kmsg.AlterClientQuotasRequestEntry{alterEntry(good, "user", "carol")}
	if r, _ := q.Alter(vreq); r.Entries[0].ErrorCode != 0 || q.Len() != 2 {
		t.Fatalf("validate_only: code %d, %d entities", r.Entries[0].ErrorCode, q.Len())
	}
	q2, err := OpenQuotas(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _, ok := q2.Resolve(QuotaProducerByteRate, "alice", "x"); !ok || v != 1024 {
		t.Errorf("after reopen: alice producer %v %v", v, ok)
	}
	if v, _, _, ok := q2.Resolve(QuotaControllerMutationRate, "zed", "x"); !ok || v != 2.5 {
		t.Errorf("after reopen: default mutation rate %v %v", v, ok)
	}
	// Removing the last key removes the entity, in the file too.
	rreq := kmsg.NewPtrAlterClientQuotasRequest()
	rreq.Entries = []kmsg.AlterClientQuotasRequestEntry{alterEntry([]kmsg.AlterClientQuotasRequestEntryOp{op(QuotaProducerByteRate, 0, true)}, "user", "alice")}
	if r, _ := q2.Alter(rreq); r.Entries[0].ErrorCode != 0 || q2.Len() != 1 {
		t.Fatalf("remove: code %d, %d entities", r.Entries[0].ErrorCode, q2.Len())
	}
	q3, _ := OpenQuotas(path)
	if q3.Len() != 1 {
		t.Errorf("after remove and reopen: %d entities, want 1", q3.Len())
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenQuotas(path); err == nil {
		t.Error("a corrupt state file opened")
	}
}

// TestQuotaDescribeFilters: EXACT, DEFAULT, ANY and strict, and Kafka's
// INVALID_REQUEST for bad filters.
func TestQuotaDescribeFilters(t *testing.T) {
	q, _ := OpenQuotas("")
	v := map[string]float64{QuotaConsumerByteRate: 1}
	q.Set(QuotaEntity{User: name("alice")}, v)
	q.Set(QuotaEntity{User: name("alice"), ClientID: name("app")}, v)
	q.Set(QuotaEntity{User: dflt}, v)
	q.Set(QuotaEntity{ClientID: dflt}, v)
	comp := func(typ string, mt int8, match *string) kmsg.DescribeClientQuotasRequestComponent {
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType, c.MatchType, c.Match = typ, kmsg.QuotasMatchType(mt), match
		return c
	}
	for _, tc := range []struct {
		name   string
		strict bool
		comps  []kmsg.DescribeClientQuotasRequestComponent
		want   int
		code   int16
	}{
		{"all", false, nil, 4, 0},
		{"exact alice", false, []kmsg.DescribeClientQuotasRequestComponent{comp("user", 0, kmsg.StringPtr("alice"))}, 2, 0},
		{"exact alice strict", true, []kmsg.DescribeClientQuotasRequestComponent{comp("user", 0, kmsg.StringPtr("alice"))}, 1, 0},
		{"default user", false, []kmsg.DescribeClientQuotasRequestComponent{comp("user", 1, nil)}, 1, 0},
		{"any user", false, []kmsg.DescribeClientQuotasRequestComponent{comp("user", 2, nil)}, 2, 0},
		{"any client-id", false, []kmsg.DescribeClientQuotasRequestComponent{comp("client-id", 2, nil)}, 1, 0},
		{"ip", false, []kmsg.DescribeClientQuotasRequestComponent{comp("ip", 2, nil)}, 0, 0},
		{"duplicate", false, []kmsg.DescribeClientQuotasRequestComponent{comp("user", 2, nil), comp("user", 1, nil)}, 0, kerr.InvalidRequest.Code},
		{"bad match type", false, []kmsg.DescribeClientQuotasRequestComponent{comp("user", 9, nil)}, 0, kerr.InvalidRequest.Code},
		{"exact without name", false, []kmsg.DescribeClientQuotasRequestComponent{comp("user", 0, nil)}, 0, kerr.InvalidRequest.Code},
		{"unknown type", false, []kmsg.DescribeClientQuotasRequestComponent{comp("group", 2, nil)}, 0, kerr.InvalidRequest.Code},
	} {
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Strict, req.Components = tc.strict, tc.comps
		resp := q.Describe(req)
		if resp.ErrorCode != tc.code || len(resp.Entries) != tc.want {
			t.Errorf("%s: code %d, %d entries; want %d, %d", tc.name, resp.ErrorCode, len(resp.Entries), tc.code, tc.want)
		}
	}
}

// TestQuotaThrottleAndMutation: a producer over producer_byte_rate gets a
// throttle; a strict controller mutation in debt is refused with
// THROTTLING_QUOTA_EXCEEDED, an old version only throttled.
func TestQuotaThrottleAndMutation(t *testing.T) {
	q, _ := OpenQuotas("")
	s := &Subject{ClientID: "app"}
	now := time.Unix(1000, 0)
	if v := q.Check(s, apis.Produce, 9, 5000, nil, now); v.Throttle != 0 {
		t.Fatalf("throttled with no quota set: %v", v)
	}
	q.Set(QuotaEntity{ClientID: name("app")}, map[string]float64{QuotaProducerByteRate: 1000, QuotaControllerMutationRate: 1})
	if v := q.Check(s, apis.Produce, 9, 500, nil, now); v.Throttle != 0 {
		t.Fatalf("first 500 bytes of a 1000 B/s budget throttled: %v", v.Throttle)
	}
	v := q.Check(s, apis.Produce, 9, 5000, nil, now)
	if v.Throttle <= 0 || v.Rule != "quota:producer_byte_rate" {
		t.Fatalf("5500 bytes at 1000 B/s: throttle %v rule %q", v.Throttle, v.Rule)
	}
	if v := q.Check(&Subject{ClientID: "other"}, apis.Produce, 9, 5000, nil, now); v.Throttle != 0 {
		t.Fatalf("another client id throttled: %v", v.Throttle)
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 7
	tp := kmsg.NewCreateTopicsRequestTopic()
	tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "t", 20, 1
	ct.Topics = append(ct.Topics, tp)
	if v := q.Check(s, apis.CreateTopics, 7, 100, ct, now); v.Response != nil {
		t.Fatal("first CreateTopics refused")
	}
	v = q.Check(s, apis.CreateTopics, 7, 100, ct, now)
	resp, ok := v.Response.(*kmsg.CreateTopicsResponse)
	if !ok || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || resp.ThrottleMillis <= 0 {
		t.Fatalf("second CreateTopics in debt: %+v", v)
	}
	ct.Version = 5
	v = q.Check(s, apis.CreateTopics, 5, 100, ct, now)
	if v.Response != nil || v.Throttle <= 0 {
		t.Fatalf("CreateTopics v5 in debt: want a throttle, no refusal: %+v", v)
	}
}

// BenchmarkQuotaCheck: one Produce charged with quotas set at three
// levels (the request, producer and no-match lookups).
func BenchmarkQuotaCheck(b *testing.B) {
	q, _ := OpenQuotas("")
	q.Set(QuotaEntity{User: dflt}, map[string]float64{QuotaRequestPercentage: 1e6})
	q.Set(QuotaEntity{ClientID: name("app")}, map[string]float64{QuotaProducerByteRate: 1e12})
	q.Set(QuotaEntity{User: name("bob")}, map[string]float64{QuotaConsumerByteRate: 1})
	s := &Subject{ClientID: "app", Principal: "alice"}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		q.Check(s, apis.Produce, 9, 1000, nil, now)
	}
}

// BenchmarkQuotaCheckNone: no quota set (the default): the stage's cost.
func BenchmarkQuotaCheckNone(b *testing.B) {
	q, _ := OpenQuotas("")
	s := &Subject{ClientID: "app"}
	b.ReportAllocs()
	for b.Loop() {
		if q.Active() {
			q.Check(s, apis.Produce, 9, 1000, nil, time.Time{})
		}
	}
}
