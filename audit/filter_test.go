package audit

import (
	"net/url"
	"testing"

	"github.com/tollgate-kafka/tollgate/configs"
)

func TestFilter(t *testing.T) {
	f, err := NewFilter(configs.AuditFilter{
		Listener: []string{"outside"},
		APINot:   []string{"Metadata", "heartbeat"},
		Topic:    configs.StringMatch{Exact: configs.Patterns{"audit"}, Prefix: configs.Patterns{"orders."}, Regex: configs.Patterns{`pay-[0-9]+`}},
		ClientID: configs.StringMatch{Prefix: configs.Patterns{"console-"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(listener string, key int16, client string, topics ...string) *Record {
		r := &Record{Event: EventRequest, Listener: listener, Key: key, ClientID: client}
		for _, n := range topics {
			r.Topics = append(r.Topics, Topic{Name: n})
		}
		return r
	}
	cases := []struct {
		name string
		r    *Record
		want bool
	}{
		{"all match", rec("outside", 0, "console-producer", "orders.eu"), true},
		{"exact topic", rec("outside", 1, "console-consumer", "x", "audit"), true},
		{"regex topic", rec("outside", 1, "console-consumer", "pay-42"), true},
		{"regex is anchored", rec("outside", 1, "console-consumer", "pay-42x"), false},
		{"other listener", rec("inside", 0, "console-producer", "orders.eu"), false},
		{"excluded api", rec("outside", 3, "console-producer", "orders.eu"), false},
		{"excluded api by lower-case name", rec("outside", 12, "console-producer", "orders.eu"), false},
		{"client prefix misses", rec("outside", 0, "kafka-go", "orders.eu"), false},
		{"no topic", rec("outside", 0, "console-producer"), false},
		{"topic misses", rec("outside", 0, "console-producer", "orders"), false},
		{"unknown key passes api_not", rec("outside", 999, "console-x", "audit"), true},
		{"connect: listener only", &Record{Event: EventConnect, Listener: "outside"}, true},
		{"connect elsewhere", &Record{Event: EventConnect, Listener: "inside"}, false},
	}
	for _, tc := range cases {
		if got := f.Match(tc.r); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !f.MatchHeader("outside", 0, "console-p") || f.MatchHeader("outside", 3, "console-p") {
		t.Error("MatchHeader disagrees with the api_not list")
	}
	if !f.NeedsTopics() || f.IsZero() {
		t.Error("NeedsTopics/IsZero")
	}
	var nilF *Filter
	if !nilF.Match(rec("x", 0, "")) || !nilF.MatchHeader("x", 0, "") || !nilF.IsZero() {
		t.Error("a nil filter must match everything")
	}
	if _, err := NewFilter(configs.AuditFilter{API: []string{"Fletch"}}); err == nil {
		t.Error("unknown API name accepted")
	}
	if _, err := NewFilter(configs.AuditFilter{Topic: configs.StringMatch{Regex: configs.Patterns{"a("}}}); err == nil {
		t.Error("bad regex accepted")
	}
	// API groups, as in policy rules.
	g, err := NewFilter(configs.AuditFilter{API: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	if !g.MatchHeader("x", 19, "") || g.MatchHeader("x", 0, "") {
		t.Error("the admin group must select CreateTopics and not Produce")
	}
}

func TestFilterFromQuery(t *testing.T) {
	q, _ := url.ParseQuery("api=Produce,fetch&topic=orders*&client=console&listener=default")
	f, err := FilterFromQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	ok := &Record{Event: EventRequest, Listener: "default", Key: 1, ClientID: "console", Topics: []Topic{{Name: "orders.eu"}}}
	if !f.Match(ok) {
		t.Fatal("query filter rejects a matching record")
	}
	for _, mutate := range []func(r *Record){
		func(r *Record) { r.Key = 3 },
		func(r *Record) { r.ClientID = "console-2" },
		func(r *Record) { r.Topics[0].Name = "payments" },
		func(r *Record) { r.Listener = "other" },
	} {
		r := *ok
		r.Topics = []Topic{ok.Topics[0]}
		mutate(&r)
		if f.Match(&r) {
			t.Fatalf("query filter accepts %+v", r)
		}
	}
	if _, err := FilterFromQuery(url.Values{"colour": {"red"}}); err == nil {
		t.Fatal("unknown parameter accepted")
	}
}
