package proxy

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/tollgate-kafka/tollgate/configs"
)

func testRouter(t testing.TB, pattern string, noSNIBootstrap bool) *sniRouter {
	t.Helper()
	r, err := newSNIRouter(&listener{}, &SNIOptions{BootstrapHost: "Kafka.Example.com.", BrokerHost: pattern, NoSNIBootstrap: noSNIBootstrap}, &tls.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSNIMatch(t *testing.T) {
	r := testRouter(t, "b{node}.kafka.example.com", false)
	cases := []struct {
		name   string
		node   int32
		reason string
	}{
		{"kafka.example.com", -1, ""},
		{"KAFKA.example.com.", -1, ""},
		{"b0.kafka.example.com", 0, ""},
		{"B12.Kafka.Example.Com.", 12, ""},
		{"b2147483647.kafka.example.com", 2147483647, ""},
		{"b2147483648.kafka.example.com", 0, sniUnknownName},
		{"b+1.kafka.example.com", 0, sniUnknownName},
		{"b-1.kafka.example.com", 0, sniUnknownName},
		{"b01.kafka.example.com", 0, sniUnknownName},
		{"b.kafka.example.com", 0, sniUnknownName},
		{"b1.kafka.example.com.evil", 0, sniUnknownName},
		{"xb1.kafka.example.com", 0, sniUnknownName},
		{strings.Repeat("b1", 40000) + ".kafka.example.com", 0, sniUnknownName},
		{"", 0, sniNoName},
	}
	for _, c := range cases {
		node, reason, ok := r.match(c.name)
		if ok != (c.reason == "") || reason != c.reason || (ok && node != c.node) {
			t.Errorf("match(%.40q) = %d, %q, %v; want %d, %q", c.name, node, reason, ok, c.node, c.reason)
		}
	}
	if node, _, ok := testRouter(t, "b{node}.kafka.example.com", true).match(""); !ok || node != -1 {
		t.Errorf("no_sni: bootstrap: match(\"\") = %d, %v", node, ok)
	}
	if got := r.brokerName(7); got != "b7.kafka.example.com" {
		t.Errorf("brokerName(7) = %q", got)
	}
}

// FuzzSNIMatch: any server name either is refused or maps to a node whose
// advertised name is the same name normalised, and the proxy agrees with
// the configuration's validator (configs.MatchBrokerHost).
func FuzzSNIMatch(f *testing.F) {
	for _, s := range []string{"b1.kafka.example.com", "kafka.example.com", "B007.kafka.example.com.", "b99999999999.kafka.example.com", "", ".", "b\x00.kafka.example.com"} {
		f.Add(s)
	}
	const pattern = "b{node}.kafka.example.com"
	r := testRouter(f, pattern, false)
	f.Fuzz(func(t *testing.T, name string) {
		node, reason, ok := r.match(name)
		norm := strings.ToLower(strings.TrimSuffix(name, "."))
		switch {
		case !ok && reason == "":
			t.Fatalf("refused %q without a reason", name)
		case ok && node >= 0 && r.brokerName(node) != norm:
			t.Fatalf("%q routed to node %d, advertised as %q", name, node, r.brokerName(node))
		case ok && node < 0 && norm != r.bootstrap:
			t.Fatalf("%q routed to bootstrap", name)
		}
		want := configs.MatchBrokerHost(pattern, name)
		if got := map[bool]int32{true: node, false: -1}[ok && node >= 0]; got != want {
			t.Fatalf("%q: proxy says node %d, configs says %d", name, got, want)
		}
	})
}
