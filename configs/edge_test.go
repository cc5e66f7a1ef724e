package configs

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestSNISection(t *testing.T) {
	r := securityFiles(t)
	src := r.Replace(`listeners:
  - name: outside
    listen: 0.0.0.0:9093
    advertise: Kafka.Example.com:443
    brokers: sni
    sni: {bootstrap_host: Kafka.Example.com, broker_host: "b{node}.kafka.example.com", no_sni: bootstrap}
    tls: {cert: CERT, key: KEY}
upstream:
  bootstrap: [k:9092]
  proxy: "http://u:p@proxy.corp:3128"
  no_proxy: [".internal", 10.0.0.0/8, 192.168.1.1, "*", localhost]
`)
	c, err := Parse([]byte(src), "e.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l := c.Listeners[0]
	if l.SNI == nil || l.SNI.BrokerHost != "b{node}.kafka.example.com" || !l.SNI.BootstrapOnNoSNI() || l.AdvertisedPort(9093) != 443 {
		t.Errorf("sni = %+v, advertised port %d", l.SNI, l.AdvertisedPort(9093))
	}
	if c.Upstream.Proxy != "http://u:p@proxy.corp:3128" || len(c.Upstream.NoProxy) != 5 {
		t.Errorf("upstream = %+v", c.Upstream)
	}
}

func TestEdgeErrors(t *testing.T) {
	r := securityFiles(t)
	sni := func(extra string) string {
		return "listeners:\n  - brokers: sni\n    tls: {cert: CERT, key: KEY}\n" + extra
	}
	cases := []struct {
		name, yaml, pos, field, msg string
	}{
		{"sni plaintext", "listeners:\n  - brokers: sni\n    sni: {bootstrap_host: k.example.com, broker_host: \"b{node}.example.com\"}\n", "2:14", "listeners[0].brokers", "needs a tls section"},
		{"sni without brokers sni", "listeners:\n  - sni: {bootstrap_host: k.example.com, broker_host: \"b{node}.example.com\"}\n", "2:10", "listeners[0].sni", "set brokers: sni"},
		{"sni no placeholder", sni("    sni: {bootstrap_host: k.example.com, broker_host: b.example.com}\n"), "4:55", "listeners[0].sni.broker_host", "has no {node}"},
		{"sni placeholder twice", sni("    sni: {bootstrap_host: k.example.com, broker_host: \"b{node}.{node}.com\"}\n"), "4:55", "listeners[0].sni.broker_host", "2 times"},
		{"sni placeholder across labels", sni("    sni: {bootstrap_host: k.example.com, broker_host: \"b{node.}x.com\"}\n"), "4:55", "listeners[0].sni.broker_host", "has no {node}"},
		{"sni placeholder alone is a label", sni("    sni: {bootstrap_host: k.example.com, broker_host: \"b.{node}\"}\n"), "", "", ""},
		{"sni bad name", sni("    sni: {bootstrap_host: k.example.com, broker_host: \"b_{node}.example.com\"}\n"), "4:55", "listeners[0].sni.broker_host", "not a DNS name"},
		{"sni stray brace", sni("    sni: {bootstrap_host: k.example.com, broker_host: \"b{node}}.example.com\"}\n"), "4:55", "listeners[0].sni.broker_host", "brace"},
		{"sni bootstrap missing", sni("    sni: {broker_host: \"b{node}.example.com\"}\n"), "4:10", "listeners[0].sni.bootstrap_host", "required"},
		{"sni bootstrap ip", sni("    sni: {bootstrap_host: 10.0.0.1, broker_host: \"b{node}.example.com\"}\n"), "4:27", "listeners[0].sni.bootstrap_host", "IP address"},
		{"sni bootstrap is a broker name", sni("    sni: {bootstrap_host: b1.example.com, broker_host: \"b{node}.example.com\"}\n"), "4:27", "listeners[0].sni.bootstrap_host", "also a broker name"},
		{"sni no_sni", sni("    sni: {bootstrap_host: k.example.com, broker_host: \"b{node}.example.com\", no_sni: allow}\n"), "4:86", "listeners[0].sni.no_sni", `"allow": want refuse or bootstrap`},
		{"sni broker_port_base", sni("    broker_port_base: 10000\n    sni: {bootstrap_host: k.example.com, broker_host: \"b{node}.example.com\"}\n"), "4:23", "listeners[0].broker_port_base", "remove broker_port_base"},
		{"sni advertise other host", sni("    advertise: gw.example.com:443\n    sni: {bootstrap_host: k.example.com, broker_host: \"b{node}.example.com\"}\n"), "4:16", "listeners[0].advertise", "write k.example.com:PORT"},
		{"tls certificates entry without key", "listeners:\n  - tls:\n      cert: CERT\n      key: KEY\n      certificates:\n        - {cert: CERT}\n", "6:11", "listeners[0].tls.certificates[0].key", "a key is required"},
		{"tls certificates entry missing file", "listeners:\n  - tls:\n      cert: CERT\n      key: KEY\n      certificates:\n        - {cert: /nonexistent.pem, key: KEY}\n", "6:18", "listeners[0].tls.certificates[0].cert", "no such file"},
		{"proxy scheme", "upstream:\n  proxy: ftp://p:1\n", "2:10", "upstream.proxy", `scheme "ftp"`},
		{"proxy no scheme", "upstream:\n  proxy: p:1080\n", "2:10", "upstream.proxy", ""},
		{"proxy no port", "upstream:\n  proxy: socks5://p\n", "2:10", "upstream.proxy", "host:port"},
		{"proxy path", "upstream:\n  proxy: http://p:3128/x\n", "2:10", "upstream.proxy", "no path"},
		{"proxy password redacted", "upstream:\n  proxy: \"http://u:secret@p\"\n", "2:10", "upstream.proxy", "http://u:xxxxx@p"},
		{"proxy_ca without https", "upstream:\n  proxy: http://p:1\n  proxy_ca: CA\n", "3:13", "upstream.proxy_ca", "only used with an https"},
		{"no_proxy bad", "upstream:\n  no_proxy: [\"a b\"]\n", "2:14", "upstream.no_proxy[0]", "want a host name"},
		{"no_proxy bad cidr", "upstream:\n  no_proxy: [10.0.0.0/99]\n", "2:14", "upstream.no_proxy[0]", "not a CIDR"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(r.Replace(c.yaml)), "t.yaml")
			if c.pos == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse succeeded; want an error at %s", c.pos)
			}
			errs := unjoin(err)
			if len(errs) != 1 {
				t.Errorf("got %d errors, want 1:\n%v", len(errs), err)
			}
			want := fmt.Sprintf("t.yaml:%s: %s: ", c.pos, c.field)
			got := errs[0].Error()
			if !strings.HasPrefix(got, want) || !strings.Contains(got, c.msg) {
				t.Errorf("error:\n  %s\nwant prefix %q and %q", got, want, c.msg)
			}
			if strings.Contains(got, "secret") {
				t.Errorf("error shows the password: %s", got)
			}
			var fe *FieldError
			if !errors.As(errs[0], &fe) || fe.Field != c.field {
				t.Errorf("field %q, want %q", fieldOf(fe), c.field)
			}
		})
	}
}

func TestMatchBrokerHost(t *testing.T) {
	const p = "b{node}.kafka.example.com"
	cases := map[string]int32{
		"b0.kafka.example.com":          0,
		"b17.kafka.example.com":         17,
		"B17.Kafka.Example.COM.":        17,
		"b2147483647.kafka.example.com": 2147483647,
		"b2147483648.kafka.example.com": -1,
		"b017.kafka.example.com":        -1,
		"b.kafka.example.com":           -1,
		"b-1.kafka.example.com":         -1,
		"b1x.kafka.example.com":         -1,
		"b1.kafka.example.org":          -1,
		"xb1.kafka.example.com":         -1,
		"b1.b2.kafka.example.com":       -1,
		"kafka.example.com":             -1,
		"":                              -1,
	}
	for name, want := range cases {
		if got := MatchBrokerHost(p, name); got != want {
			t.Errorf("MatchBrokerHost(%q) = %d, want %d", name, got, want)
		}
	}
	if got := MatchBrokerHost("broker-{node}-x.example.com", "broker-3-x.example.com"); got != 3 {
		t.Errorf("mid-label placeholder: %d", got)
	}
}
