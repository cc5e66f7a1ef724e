package configs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every example file in this folder must load cleanly, and its effective
// form (YAML) must parse back to the same effective form.
func TestExampleFiles(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d example files, want at least builtin, gateway, minimal", len(files))
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			c, err := Load(f)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			assertRoundTrip(t, c)
		})
	}
}

func assertRoundTrip(t *testing.T, c *Config) {
	t.Helper()
	out, err := c.YAML()
	if err != nil {
		t.Fatalf("YAML: %v", err)
	}
	c2, err := Parse(out, "effective.yaml")
	if err != nil {
		t.Fatalf("Parse(YAML()) failed: %v\n%s", err, out)
	}
	out2, err := c2.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(out2) {
		t.Fatalf("effective config changed on a round trip:\n%s\n---\n%s", out, out2)
	}
}

func TestExampleContents(t *testing.T) {
	min, err := Load("minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !min.UpstreamMode() || !reflect.DeepEqual(min.Upstream.Bootstrap, []string{"kafka-1.internal:9092"}) {
		t.Errorf("minimal.yaml: upstream = %+v", min.Upstream)
	}
	if min.Upstream.DialTimeout != DefaultDialTimeout || min.Upstream.MetadataRefresh != DefaultMetadataRefresh {
		t.Errorf("minimal.yaml: upstream timeouts %v %v; want the defaults", min.Upstream.DialTimeout, min.Upstream.MetadataRefresh)
	}
	data, _ := os.ReadFile("minimal.yaml")
	if n := strings.Count(strings.TrimSpace(string(data)), "\n") + 1; n > 2 {
		t.Errorf("minimal.yaml has %d lines, want at most 2", n)
	}

	gw, err := Load("gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(gw.Listeners) != 2 || gw.Listeners[0].Name != "outside" || gw.Listeners[1].Name != "inside" {
		t.Fatalf("gateway.yaml listeners: %+v", gw.Listeners)
	}
	if got := gw.Listeners[0].AdvertisedHost(); got != "gw.example.com" {
		t.Errorf("outside advertises %q", got)
	}
	if got := gw.Listeners[1].AdvertisedHost(); got != "10.0.0.5" {
		t.Errorf("inside advertises %q, want its listen host", got)
	}
	if p, err := gw.Listeners[0].BrokerPort(3); err != nil || p != 9103 {
		t.Errorf("outside node 3 port = %d, %v; want 9103", p, err)
	}

	bi, err := Load("builtin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if bi.UpstreamMode() {
		t.Error("builtin.yaml is in upstream mode")
	}
	want := map[string]string{
		"num.partitions": "1", "retention.ms": "604800000", "retention.bytes": "-1",
		"segment.bytes": "1073741824", "cleanup.policy": "delete", "message.timestamp.type": "CreateTime",
	}
	if !reflect.DeepEqual(bi.Broker.Defaults, want) {
		t.Errorf("builtin.yaml topic defaults (canonical) = %v; want %v", bi.Broker.Defaults, want)
	}
}

// An empty file, comments, a lone "---" or null are the default config.
func TestParseEmptyIsDefault(t *testing.T) {
	want, err := Default().YAML()
	if err != nil {
		t.Fatal(err)
	}
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default() does not validate: %v", err)
	}
	for _, src := range []string{"", "\n\n", "# nothing\n# at all\n", "---\n", "~\n", "---\n# c\n...\n", "x-unused: 1\n"} {
		c, err := Parse([]byte(src), "e.yaml")
		if err != nil {
			t.Errorf("Parse(%q): %v", src, err)
			continue
		}
		got, _ := c.YAML()
		if string(got) != string(want) {
			t.Errorf("Parse(%q) differs from Default():\n%s", src, got)
		}
	}
}

func TestDefaults(t *testing.T) {
	c := Default()
	l := c.Listeners[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"listener name", l.Name, "default"},
		{"listen", l.Listen, "127.0.0.1:9092"},
		{"brokers", l.Brokers, BrokersPortPerBroker},
		{"advertised host", l.AdvertisedHost(), "127.0.0.1"},
		{"broker port base", l.BrokerPortBaseOrDefault(), 9093},
		{"upstream", c.Upstream == nil, true},
		{"upstream mode", c.UpstreamMode(), false},
		{"data dir", c.Broker.DataDir, "./tollgate-data"},
		{"fsync", c.Broker.Fsync, "always"},
		{"fsync interval", c.Broker.FsyncInterval.D(), 50 * time.Millisecond},
		{"auto create", c.Broker.AutoCreateTopics, true},
		{"admin", c.Admin.Listen, "127.0.0.1:9089"},
		{"admin enabled", c.Admin.Enabled(), true},
		{"max frame", c.Limits.MaxFrameBytes, 100 * MiB},
		{"max preauth", c.Limits.MaxPreauthFrameBytes, 512 * KiB},
		{"max conns", c.Limits.MaxConnections, 10000},
		{"max conns per addr", c.Limits.MaxConnectionsPerAddress, 0},
		{"max in flight", c.Limits.MaxInFlight, 100},
		{"idle", c.Limits.IdleTimeout.D(), 10 * time.Minute},
		{"frame timeout", c.Limits.FrameTimeout.D(), 30 * time.Second},
		{"drain", c.Limits.DrainTimeout.D(), 15 * time.Second},
		{"log level", c.Log.Level, "info"},
		{"log format", c.Log.Format, "text"},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v; want %v", ch.name, ch.got, ch.want)
		}
	}
}

// Every field set in a file comes out in the Config.
func TestParseAllFields(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := writeTLSFiles(t, dir)
	src := `
listeners:
  - name: out
    listen: 0.0.0.0:19092
    advertise: gw.example.com:29092
    brokers: port-per-broker
    broker_port_base: 19100
  - name: in
    listen: "[::1]:0"
    broker_port_base: 0
upstream:
  bootstrap: "k1:9092, k2:9093"
  tls:
    ca: ` + ca + `
    cert: ` + cert + `
    key: ` + key + `
    server_name: kafka.internal
  dial_timeout: 3s
  metadata_refresh: 1m
broker:
  data_dir: /var/lib/tollgate
  fsync: interval
  fsync_interval: 5ms
  auto_create_topics: false
  defaults:
    retention.bytes: 10MB
    cleanup.policy: compact, delete, compact
    max.message.bytes: 1MiB
    segment.ms: 1h
admin:
  listen: "off"
limits:
  max_frame_bytes: 1.5MiB
  max_preauth_frame_bytes: 1000
  max_connections: 5
  max_connections_per_address: 0
  max_in_flight: 1
  idle_timeout: 1h30m
  frame_timeout: 250ms
  drain_timeout: 2s
log:
  level: debug
  format: json
`
	c, err := Parse([]byte(src), "all.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := c.Listeners[0]
	if out.Name != "out" || out.Listen != "0.0.0.0:19092" || out.AdvertisedHost() != "gw.example.com" ||
		out.AdvertisedPort(19092) != 29092 || *out.BrokerPortBase != 19100 {
		t.Errorf("listener 0 = %+v", out)
	}
	in := c.Listeners[1]
	if in.Brokers != BrokersPortPerBroker || in.AdvertisedHost() != "::1" || in.AdvertisedPort(41000) != 41000 {
		t.Errorf("listener 1 = %+v (advertised %s)", in, in.AdvertisedHost())
	}
	if p, err := in.BrokerPort(7); err != nil || p != 0 {
		t.Errorf("base 0: BrokerPort = %d, %v; want 0 (kernel-chosen)", p, err)
	}
	u := c.Upstream
	if !reflect.DeepEqual(u.Bootstrap, []string{"k1:9092", "k2:9093"}) || u.DialTimeout.D() != 3*time.Second ||
		u.MetadataRefresh.D() != time.Minute {
		t.Errorf("upstream = %+v", u)
	}
	if u.TLS == nil || u.TLS.CA != ca || u.TLS.Cert != cert || u.TLS.Key != key || u.TLS.ServerName != "kafka.internal" || u.TLS.InsecureSkipVerify {
		t.Errorf("upstream tls = %+v", u.TLS)
	}
	b := c.Broker
	wantDefaults := map[string]string{"retention.bytes": "10000000", "cleanup.policy": "compact,delete", "max.message.bytes": "1048576", "segment.ms": "3600000"}
	if b.DataDir != "/var/lib/tollgate" || b.Fsync != FsyncInterval || b.FsyncInterval.D() != 5*time.Millisecond ||
		b.AutoCreateTopics || !reflect.DeepEqual(b.Defaults, wantDefaults) {
		t.Errorf("broker = %+v", b)
	}
	if c.Admin.Enabled() {
		t.Error("admin is enabled; want off")
	}
	l := c.Limits
	if l.MaxFrameBytes != 3*MiB/2 || l.MaxPreauthFrameBytes != 1000 || l.MaxConnections != 5 || l.MaxConnectionsPerAddress != 0 ||
		l.MaxInFlight != 1 || l.IdleTimeout.D() != 90*time.Minute || l.FrameTimeout.D() != 250*time.Millisecond || l.DrainTimeout.D() != 2*time.Second {
		t.Errorf("limits = %+v", l)
	}
	if c.Log.Level != "debug" || c.Log.Format != "json" || c.Log.SlogLevel().String() != "DEBUG" {
		t.Errorf("log = %+v", c.Log)
	}
	assertRoundTrip(t, c)
}

// A listener or upstream the file adds starts from that section's
// defaults; a null value keeps the default.
func TestSectionDefaults(t *testing.T) {
	c, err := Parse([]byte("listeners:\n  - name: a\n    broker_port_base:\n  - name: b\n    listen: 127.0.0.1:9292\nupstream:\n  bootstrap: [k:1]\nlimits:\n  max_connections: ~\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listeners[0].Listen != DefaultListen || c.Listeners[0].Brokers != BrokersPortPerBroker || c.Listeners[0].BrokerPortBase != nil {
		t.Errorf("listener a = %+v", c.Listeners[0])
	}
	if c.Listeners[1].Brokers != BrokersPortPerBroker || c.Listeners[1].BrokerPortBaseOrDefault() != 9293 {
		t.Errorf("listener b = %+v", c.Listeners[1])
	}
	if c.Upstream.DialTimeout != DefaultDialTimeout {
		t.Errorf("upstream dial timeout = %v", c.Upstream.DialTimeout)
	}
	if c.Limits.MaxConnections != DefaultMaxConnections {
		t.Errorf("null max_connections = %d; want the default", c.Limits.MaxConnections)
	}
	// An upstream section with no bootstrap leaves the built-in broker in charge.
	c, err = Parse([]byte("upstream:\n  dial_timeout: 1s\n"), "u.yaml")
	if err != nil || c.UpstreamMode() {
		t.Errorf("upstream without bootstrap: err %v, upstream mode %v", err, c != nil && c.UpstreamMode())
	}
}

func TestAliasesAndMerges(t *testing.T) {
	src := `
x-timeouts: &t
  idle_timeout: 1m
  frame_timeout: 2s
x-more: &m
  frame_timeout: 9s
  drain_timeout: 3s
limits:
  <<: [*t, *m]
  idle_timeout: 5m
listeners:
  - &l {name: a, listen: "127.0.0.1:9092"}
log: {level: &lvl warn}
broker:
  fsync: always
admin: {listen: "127.0.0.1:9099"}
`
	c, err := Parse([]byte(src), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l := c.Limits
	// own key wins over merged; the first merged mapping wins over later ones.
	if l.IdleTimeout.D() != 5*time.Minute || l.FrameTimeout.D() != 2*time.Second || l.DrainTimeout.D() != 3*time.Second {
		t.Errorf("merged limits = %v %v %v", l.IdleTimeout, l.FrameTimeout, l.DrainTimeout)
	}
	if c.Log.Level != "warn" {
		t.Errorf("log level = %q", c.Log.Level)
	}
}

func TestSecondDocument(t *testing.T) {
	// A trailing "---" with nothing after it is harmless.
	if _, err := Parse([]byte("log: {level: info}\n---\n"), "d.yaml"); err != nil {
		t.Errorf("trailing empty document: %v", err)
	}
	_, err := Parse([]byte("log: {level: info}\n---\nlog: {level: debug}\n"), "d.yaml")
	if err == nil || !strings.HasPrefix(err.Error(), "d.yaml:2:1: a second YAML document") {
		t.Errorf("err = %v", err)
	}
	_, err = Parse([]byte("log: {level: info}\n---\n[\n"), "d.yaml")
	if err == nil || !strings.Contains(err.Error(), "YAML syntax") {
		t.Errorf("syntax error in second document: %v", err)
	}
}

func TestLoad(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("log:\n  level: loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(p)
	if err == nil || !strings.HasPrefix(err.Error(), p+":2:10: log.level: ") {
		t.Errorf("err = %v; want it to name %s:2:10", err, p)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
}

// Validate on a config built in code reports fields without a position.
func TestValidateCodeBuilt(t *testing.T) {
	c := Default()
	c.Listeners = append(c.Listeners, Listener{Listen: "127.0.0.1:9292", Brokers: "x"})
	c.Upstream = NewUpstream("kafka")
	c.Limits.MaxInFlight = 0
	c.Admin.Listen = ""
	err := c.Validate()
	want := []string{
		`listeners[1].name: a name is required`,
		`listeners[1].brokers: "x" is not a broker addressing mode`,
		`upstream.bootstrap[0]: "kafka" is not a host:port broker address: missing port in address`,
		`admin.listen: empty: give host:port, or "off"`,
		`limits.max_in_flight: 0: want at least 1`,
	}
	errs := unjoin(err)
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q; want prefix %q", i, errs[i], w)
		}
	}
	if c := NewUpstream("k:9092"); c.DialTimeout != DefaultDialTimeout {
		t.Errorf("NewUpstream timeouts not defaulted: %+v", c)
	}
}

// A value changed after Parse (by a flag) is not blamed on the file line
// of the value it replaced; values still from the file keep their line.
func TestValidateAfterOverride(t *testing.T) {
	c, err := Parse([]byte("listeners:\n  - listen: 127.0.0.1:9092\nlog:\n  level: info\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c.Listeners[0].Listen = "nope"
	err = c.Validate()
	if err == nil || err.Error() != `f.yaml: listeners[0].listen: "nope" is not a host:port bind address: missing port in address` {
		t.Errorf("override: %v", err)
	}
	c.Listeners[0].Listen = "127.0.0.1:9092"
	c.Log.Format = "xml" // not in the file: blamed on the nearest parent the file has
	err = c.Validate()
	if err == nil || err.Error() != `f.yaml:4:3: log.format: "xml": want json or text` {
		t.Errorf("parent position: %v", err)
	}
}

func TestListenerHelpers(t *testing.T) {
	host, _ := os.Hostname()
	for _, c := range []struct {
		l        Listener
		advHost  string
		base     int
		node3    int
		node3Err bool
	}{
		{Listener{Listen: "127.0.0.1:9092"}, "127.0.0.1", 9093, 9096, false},
		{Listener{Listen: "0.0.0.0:9092"}, host, 9093, 9096, false},
		{Listener{Listen: ":9092"}, host, 9093, 9096, false},
		{Listener{Listen: "[::]:9092", Advertise: "[2001:db8::1]:443"}, "2001:db8::1", 9093, 9096, false},
		{Listener{Listen: "127.0.0.1:0"}, "127.0.0.1", 0, 0, false},
		{Listener{Listen: "127.0.0.1:9092", BrokerPortBase: ptr(65534)}, "127.0.0.1", 65534, 0, true},
		{Listener{Listen: "10.0.0.1:9092", Advertise: "gw"}, "gw", 9093, 9096, false},
	} {
		if host != "" && c.l.AdvertisedHost() != c.advHost {
			t.Errorf("%+v: AdvertisedHost = %q; want %q", c.l, c.l.AdvertisedHost(), c.advHost)
		}
		if got := c.l.BrokerPortBaseOrDefault(); got != c.base {
			t.Errorf("%+v: base = %d; want %d", c.l, got, c.base)
		}
		p, err := c.l.BrokerPort(3)
		if (err != nil) != c.node3Err || p != c.node3 {
			t.Errorf("%+v: BrokerPort(3) = %d, %v; want %d (error %v)", c.l, p, err, c.node3, c.node3Err)
		}
		if err != nil && !errors.Is(err, ErrBrokerPort) {
			t.Errorf("BrokerPort error %v does not wrap ErrBrokerPort", err)
		}
	}
	if _, err := (&Listener{Listen: "127.0.0.1:9092"}).BrokerPort(-1); !errors.Is(err, ErrBrokerPort) {
		t.Errorf("negative node: %v", err)
	}
	l := Listener{Listen: "127.0.0.1:9092", Advertise: "gw:9000"}
	if l.AdvertisedPort(9092) != 9000 {
		t.Errorf("AdvertisedPort = %d; want 9000", l.AdvertisedPort(9092))
	}
}

func ptr[T any](v T) *T { return &v }

func TestCanonicalTopicConfig(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"num.partitions", "3", "3"},
		{"retention.ms", "-1", "-1"},
		{"retention.ms", "168h", "604800000"},
		{"retention.ms", "0", "0"},
		{"retention.bytes", "1GiB", "1073741824"},
		{"segment.bytes", "14", "14"},
		{"segment.ms", "10m", "600000"},
		{"max.message.bytes", "0", "0"},
		{"cleanup.policy", "delete", "delete"},
		{"cleanup.policy", " compact , delete ", "compact,delete"},
		{"message.timestamp.type", "LogAppendTime", "LogAppendTime"},
	} {
		got, err := CanonicalTopicConfig(c.name, c.in)
		if err != nil || got != c.want {
			t.Errorf("CanonicalTopicConfig(%s, %q) = %q, %v; want %q", c.name, c.in, got, err, c.want)
		}
	}
	for _, c := range []struct{ name, in, msg string }{
		{"nope", "1", `unknown topic config "nope" (known: cleanup.policy, `},
		{"segment.ms", "0", "out of range 1-"},
		{"segment.ms", "-1", "out of range"},
		{"max.message.bytes", "4GiB", "out of range 0-2147483647"},
		{"num.partitions", "2147483648", "out of range"},
		{"cleanup.policy", "", `"" is not one of delete, compact`},
		{"message.timestamp.type", "createtime", "is not one of"},
		{"retention.bytes", "-2", "-1 means no size limit"},
		{"min.cleanable.dirty.ratio", "1.5", "not a ratio from 0 to 1"},
		{"max.compaction.lag.ms", "0", "out of range 1-"},
	} {
		_, err := CanonicalTopicConfig(c.name, c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("CanonicalTopicConfig(%s, %q) error = %v; want %q", c.name, c.in, err, c.msg)
		}
	}
	if got, err := CanonicalTopicConfig("min.compaction.lag.ms", "1h"); err != nil || got != "3600000" {
		t.Errorf("min.compaction.lag.ms 1h = %q, %v", got, err)
	}
	if got, err := CanonicalTopicConfig("min.cleanable.dirty.ratio", " 0.25 "); err != nil || got != "0.25" {
		t.Errorf("min.cleanable.dirty.ratio 0.25 = %q, %v", got, err)
	}
	if n := TopicConfigNames(); len(n) != 12 || n[0] != "cleanup.policy" {
		t.Errorf("TopicConfigNames = %v", n)
	}
}

func TestUpstreamTLSFiles(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := writeTLSFiles(t, dir)
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	_, _, otherKey := writeTLSFiles(t, other)
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "upstream:\n  bootstrap: [k:9092]\n  tls:\n"
	for _, c := range []struct {
		name, tls, want string
	}{
		{"ok", "    ca: " + ca + "\n    cert: " + cert + "\n    key: " + key + "\n", ""},
		{"empty tls is system roots", "    {}\n", ""},
		{"mismatched key", "    cert: " + cert + "\n    key: " + otherKey + "\n", "t.yaml:4:11: upstream.tls.cert: load key pair " + cert + " and " + otherKey + ": tls: private key does not match public key"},
		{"ca not pem", "    ca: " + notPEM + "\n", "t.yaml:4:9: upstream.tls.ca: " + notPEM + " holds no PEM certificate"},
		{"key missing", "    cert: " + cert + "\n    key: " + dir + "/nokey.pem\n", "t.yaml:5:10: upstream.tls.key: stat " + dir + "/nokey.pem: no such file or directory"},
		{"insecure with ca", "    ca: " + ca + "\n    insecure_skip_verify: true\n", "t.yaml:5:27: upstream.tls.insecure_skip_verify: insecure_skip_verify would ignore ca"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(base+c.tls), "t.yaml")
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), c.want) || len(unjoin(err)) != 1 {
				t.Errorf("err = %v\nwant %q", err, c.want)
			}
		})
	}
}

// writeTLSFiles writes a self-signed CA certificate that doubles as the
// client certificate, and its key.
func writeTLSFiles(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tollgate-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cert = filepath.Join(dir, "cert.pem")
	key = filepath.Join(dir, "key.pem")
	write := func(p, typ string, b []byte) {
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(cert, "CERTIFICATE", der)
	write(key, "EC PRIVATE KEY", keyDER)
	return cert, cert, key
}

// TestAdvertisePortHonoured: a port in advertise needs no fixed ports
// where one port serves every node (built-in broker, sni, single-port),
// and shifts the whole layout of a port-per-broker listener (issue 19).
func TestAdvertisePortHonoured(t *testing.T) {
	for name, src := range map[string]string{
		"builtin":         "listeners:\n  - listen: 127.0.0.1:0\n    advertise: gw:31000\n",
		"single-port":     "listeners:\n  - listen: 127.0.0.1:0\n    advertise: gw:31000\n    brokers: single-port\nupstream: {bootstrap: [k:9092]}\n",
		"port-per-broker": "listeners:\n  - listen: 127.0.0.1:9092\n    advertise: gw:31000\n    broker_port_base: 9200\nupstream: {bootstrap: [k:9092]}\n",
	} {
		c, err := Parse([]byte(src), name+".yaml")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if l := c.Listeners[0]; l.AdvertisedHost() != "gw" || l.AdvertisedPort(0) != 31000 {
			t.Errorf("%s: advertised %s:%d", name, l.AdvertisedHost(), l.AdvertisedPort(0))
		}
	}
}
