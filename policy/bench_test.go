package policy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// keyOnlyPolicy builds n rules on listener, address and API only, none of
// which matches the benchmark's subject, so every request walks them all.
func keyOnlyPolicy(n int) string {
	var b strings.Builder
	b.WriteString("listeners:\n  - name: inside\n  - name: outside\n    listen: 127.0.0.1:19092\npolicy:\n  rules:\n")
	for i := range n {
		fmt.Fprintf(&b, "    - {match: {listener: outside, address: 10.%d.0.0/16, api: [Produce, Fetch, admin]}, action: deny}\n", i%250)
	}
	return b.String()
}

func topicPolicy(n int) string {
	var b strings.Builder
	b.WriteString("policy:\n  rules:\n")
	for i := range n {
		fmt.Fprintf(&b, "    - {match: {topic: {prefix: team%d.}, client_id: {regex: \"svc-%d-.*\"}}, action: deny}\n", i, i)
	}
	return b.String()
}

func BenchmarkCheckKeyOnly(b *testing.B) {
	for _, n := range []int{0, 10, 100} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			e := mustParse(b, keyOnlyPolicy(n))
			s := subj("inside", "192.168.1.1", "producer-1", "")
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				if e.NeedsBody(s, 0, 9) {
					b.Fatal("key-only rules need no body")
				}
				if v := e.Check(&Request{Subject: s, Key: 0, Version: 9, Size: 1000, Now: now}); v.Action != Allow {
					b.Fatal(v.Action)
				}
			}
		})
	}
}

func BenchmarkCheckTopicRules(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			e := mustParse(b, topicPolicy(n))
			s := subj("default", "192.168.1.1", "svc-5-a", "")
			req := produceReq(9, "orders", "team7.events", "payments")
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				if v := e.Check(&Request{Subject: s, Key: 0, Version: 9, Size: 1000, Body: req, Now: now}); v.Action != Allow {
					b.Fatal(v.Action)
				}
			}
		})
	}
}

func BenchmarkCheckRate(b *testing.B) {
	e := mustParse(b, ratePolicy)
	s := subj("default", "10.0.0.1", "batch-1", "")
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		e.Check(&Request{Subject: s, Key: 0, Version: 9, Size: 1000, Now: now})
	}
}

// BenchmarkCheckMetadataAutoCreate: a named Metadata request (a producer's
// three topics, one it may not create) under a CreateTopics deny: the
// per-topic CreateTopics decisions and the forwarded copy with
// auto-creation withheld.
func BenchmarkCheckMetadataAutoCreate(b *testing.B) {
	e := mustParse(b, "policy:\n  rules:\n    - {match: {api: [CreateTopics], topic: {prefix: locked.}}, action: deny}\n")
	s := subj("default", "192.168.1.1", "producer-1", "")
	m := kmsg.NewPtrMetadataRequest()
	m.Version, m.AllowAutoTopicCreation = 12, true
	for _, name := range []string{"orders", "payments", "locked.audit"} {
		m.Topics = append(m.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(name)})
	}
	tried := triedSet{"orders": true, "payments": true}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if v := e.Check(&Request{Subject: s, Key: 3, Version: 12, Body: m, Creations: tried, Now: now}); v.Action != Partial {
			b.Fatal(v.Action)
		}
	}
}
