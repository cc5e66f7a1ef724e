package acl

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/policy"
)

// BenchmarkAuthorize: one topic unit of a Produce against 1,000 literal
// and 100 prefixed ACLs (the per-unit cost the policy engine adds).
func BenchmarkAuthorize(b *testing.B) {
	s, _ := Open("")
	var bs []Binding
	for i := range 1000 {
		bs = append(bs, lit(TypeTopic, fmt.Sprintf("topic-%d", i), fmt.Sprintf("User:u%d", i%50), "*", OpWrite, PermAllow))
	}
	for i := range 100 {
		bs = append(bs, pre(TypeTopic, fmt.Sprintf("p%d-", i), "User:u1", "*", OpRead, PermAllow))
	}
	if err := s.Create(bs); err != nil {
		b.Fatal(err)
	}
	a := NewAuthorizer(s, nil, false)
	subj := &policy.Subject{Principal: "u7", Addr: netip.MustParseAddr("10.1.2.3")}
	res := policy.Resource{Topic: "topic-7", HasTopic: true}
	b.ReportAllocs()
	for b.Loop() {
		if a.Authorize(subj, apis.Produce, 9, res, nil) != 0 {
			b.Fatal("denied")
		}
	}
}
