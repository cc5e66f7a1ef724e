package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/configs"
)

// TestWritePKI checks the generated files: the server certificate
// verifies against the CA for 127.0.0.1 (and not for another address),
// the pair loads, and the gateway's TLS loader takes it.
func TestWritePKI(t *testing.T) {
	dir := t.TempDir()
	p, err := writePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(p.certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatalf("%s: no PEM block", p.certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s: no certificate", p.caFile)
	}
	for _, pool := range []*x509.CertPool{roots, p.pool} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
			t.Errorf("verify for 127.0.0.1: %v", err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "10.1.2.3"}); err == nil {
		t.Error("the certificate verifies for 10.1.2.3")
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: x509.NewCertPool(), DNSName: "127.0.0.1"}); err == nil {
		t.Error("the certificate verifies without its CA")
	}
	if _, err := tls.LoadX509KeyPair(p.certFile, p.keyFile); err != nil {
		t.Errorf("load pair: %v", err)
	}
	if fi, err := os.Stat(p.keyFile); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("key file %s: mode %v, err %v", p.keyFile, fi.Mode(), err)
	}
	if _, err := auth.ServerTLS(&configs.ListenerTLS{Cert: p.certFile, Key: p.keyFile, MinVersion: "1.2"}); err != nil {
		t.Errorf("auth.ServerTLS: %v", err)
	}
}

// startTLSPair starts a plaintext and a TLS gateway in this process in
// front of a kfake, from the files the suite writes, and returns them as
// the suite's variants, with the clients' TLS config.
func startTLSPair(t *testing.T) (plain, secure *variantEnv, clientTLS *tls.Config) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	dir := t.TempDir()
	p, err := writePKI(filepath.Join(dir, "tls"))
	if err != nil {
		t.Fatal(err)
	}
	clientTLS = &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(v variant) *variantEnv {
		src := v.configYAML(cluster.ListenAddrs(), filepath.Join(dir, v.name+"-audit.log"))
		cfg, err := configs.Parse([]byte(src), v.name+".yaml")
		if err != nil {
			t.Fatalf("%s: %v\n%s", v.name, err, src)
		}
		if got := cfg.Listeners[0].TLS != nil; got != (v.tls != nil) {
			t.Fatalf("%s: bench listener TLS %v in\n%s", v.name, got, src)
		}
		gw, err := startConfigured(cfg, true, "", log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gw.stop() })
		return &variantEnv{v: v, gw: gw, env: &pathEnv{path: Gateway, variant: v.name, seeds: []string{gw.info.Bootstrap}, tls: v.clientTLS}}
	}
	plain = start(variant{name: tlsPlain})
	secure = start(variant{name: tlsVariant, tls: &configs.ListenerTLS{Cert: p.certFile, Key: p.keyFile}, clientTLS: clientTLS})
	return plain, secure, clientTLS
}

// TestTLSInForce checks the in-force check both ways: it passes for a
// plaintext and a TLS gateway, and fails with ErrTLSNotInForce when the
// gateway said to be TLS is plaintext (or the other way round).
func TestTLSInForce(t *testing.T) {
	plain, secure, clientTLS := startTLSPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep := &SuiteReport{Variants: []VariantInfo{{Name: tlsPlain}, {Name: tlsVariant}}}
	var info TLSInfo
	if err := checkTLSInForce(ctx, plain, secure, clientTLS, &info, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.Version, "TLS 1.") || info.Cipher == "" || info.Group == "" {
		t.Errorf("negotiated %q %q %q", info.Version, info.Cipher, info.Group)
	}
	if !strings.HasPrefix(info.PlaintextOnTLS, "refused") || !strings.HasPrefix(info.TLSOnPlaintext, "refused") {
		t.Errorf("probes: plaintext on TLS %q, TLS on plaintext %q", info.PlaintextOnTLS, info.TLSOnPlaintext)
	}
	for _, v := range rep.Variants {
		if !v.ProbeOK || v.Probe == "" {
			t.Errorf("%s: probe %q ok %v", v.Name, v.Probe, v.ProbeOK)
		}
	}

	// The "TLS" gateway is plaintext: a plaintext ApiVersions is answered.
	if err := checkTLSInForce(ctx, plain, plain, clientTLS, &TLSInfo{}, rep); !errors.Is(err, ErrTLSNotInForce) {
		t.Errorf("plaintext gateway as the TLS variant: %v, want ErrTLSNotInForce", err)
	}
	// The "plaintext" gateway is TLS: it does not answer in plaintext.
	if err := checkTLSInForce(ctx, secure, secure, clientTLS, &TLSInfo{}, rep); err == nil {
		t.Error("TLS gateway as the plaintext variant: no error")
	}
	// A client that does not trust the CA gets no answer from the TLS
	// gateway.
	if _, err := oneConn(ctx, secure.env.seeds[0], &tls.Config{MinVersion: tls.VersionTLS12}, 5*time.Second); err == nil {
		t.Error("handshake verified without the CA")
	}
	// The benchmark clients' dialer speaks TLS to the TLS gateway and
	// counts the handshakes; against the plaintext one it fails.
	conn, err := secure.env.dialTLS(ctx, "tcp", secure.env.seeds[0])
	if err != nil {
		t.Fatal(err)
	}
	if st := conn.(*tls.Conn).ConnectionState(); !st.HandshakeComplete || len(st.VerifiedChains) == 0 {
		t.Errorf("dialTLS: state %+v", st)
	}
	if err := apiVersionsRoundTrip(conn); err != nil {
		t.Errorf("ApiVersions over the benchmark dialer: %v", err)
	}
	conn.Close()
	if n := secure.env.tlsConns.Load(); n != 1 {
		t.Errorf("%d TLS conns counted, want 1", n)
	}
	off := &pathEnv{tls: clientTLS}
	if c, err := off.dialTLS(ctx, "tcp", plain.env.seeds[0]); err == nil {
		c.Close()
		t.Error("dialTLS to the plaintext gateway succeeded")
	}
	if n := off.tlsConns.Load(); n != 0 {
		t.Errorf("%d TLS conns counted after a failed dial", n)
	}
}

// TestConnLoop runs the connection loop briefly against both in-process
// gateways: connections complete, TLS ones after full handshakes, and no
// CPU figure is invented without a child process.
func TestConnLoop(t *testing.T) {
	plain, secure, clientTLS := startTLSPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var states tlsStateCounter
	for _, l := range connLoops(clientTLS) {
		env := plain.env
		if l.variant == tlsVariant {
			env = secure.env
		}
		r, err := connLoop(ctx, env, l.tc, 2, 20*time.Millisecond, 200*time.Millisecond, &states)
		if err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		if r.Conns <= 0 || r.Errors != 0 || r.Resumed != 0 || r.PerSec <= 0 || r.CPUSeconds != nil || r.PerCPUSec != nil {
			t.Errorf("%s: %+v", l.name, r)
		}
	}
	var x25519, total int64
	for k, n := range states.versions {
		total += n
		if strings.HasSuffix(k, " X25519") {
			x25519 += n
		}
		if !strings.HasPrefix(k, "TLS 1.3 ") {
			t.Errorf("negotiated %s", k)
		}
	}
	if x25519 == 0 || x25519 == total {
		t.Errorf("handshakes %v: want some with X25519 only and some with Go's default group", states.versions)
	}
}

// TestTLSSuiteSmoke runs the TLS suite with tiny windows and child
// processes, and checks that TLS was in force and measured.
func TestTLSSuiteSmoke(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU and RSS come from /proc")
	}
	opts := suiteSmokeOptions(t)
	opts.Command = testCommand
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := RunTLSSuite(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkSuiteRuns(t, rep.SuiteReport, true)
	ref := false
	for _, v := range rep.Variants {
		if v.Name == tlsHAProxy {
			// The reference relay: no gateway configuration or counters.
			ref = true
			if !v.ProbeOK || !strings.Contains(v.Probe, "chain verified") {
				t.Errorf("%s: probe %q ok %v", v.Name, v.Probe, v.ProbeOK)
			}
			continue
		}
		cfg, err := configs.Load(v.ConfigFile)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if got := cfg.Listeners[0].TLS != nil; got != (v.Name == tlsVariant || v.Name == tlsSNI) {
			t.Errorf("%s: bench listener TLS %v in %s", v.Name, got, v.ConfigFile)
		}
		if got := cfg.Listeners[0].Brokers == configs.BrokersSNI; got != (v.Name == tlsSNI) {
			t.Errorf("%s: bench listener brokers %s in %s", v.Name, cfg.Listeners[0].Brokers, v.ConfigFile)
		}
		if !v.ProbeOK {
			t.Errorf("%s: probe %q not ok", v.Name, v.Probe)
		}
		if v.Stats == nil || v.Stats.Requests <= 0 {
			t.Errorf("%s: stats %+v", v.Name, v.Stats)
		}
	}
	ti := rep.TLS
	if !strings.HasPrefix(ti.Version, "TLS 1.") || !strings.HasPrefix(ti.PlaintextOnTLS, "refused") ||
		!strings.HasPrefix(ti.TLSOnPlaintext, "refused") || ti.ClientTLSConns <= 0 {
		t.Errorf("TLS not shown in force: %+v", ti)
	}
	if _, err := os.Stat(ti.CAFile); err != nil {
		t.Errorf("CA file: %v", err)
	}
	if want := 3 * opts.Rounds; len(ti.ConnRuns) != want {
		t.Fatalf("%d connection runs, want %d", len(ti.ConnRuns), want)
	}
	for _, r := range ti.ConnRuns {
		if r.Conns <= 0 || r.Errors != 0 || r.Resumed != 0 || r.PerCPUSec == nil || *r.PerCPUSec <= 0 {
			t.Errorf("%s: %+v", r.Loop, r)
		}
	}
	var tlsConns int64
	for k, n := range ti.Negotiated {
		if !strings.HasPrefix(k, "TLS 1.") {
			t.Errorf("negotiated %s", k)
		}
		tlsConns += n
	}
	if tlsConns <= 0 {
		t.Errorf("no TLS handshake counted in the loops: %v", ti.Negotiated)
	}
	if len(ti.ConnSumm) != 3 || len(ti.ConnRatios) != 2 {
		t.Errorf("summary %+v, ratios %+v", ti.ConnSumm, ti.ConnRatios)
	}
	// tls / plaintext and tls-sni / tls for each workload, and with the
	// reference haproxy-tls / plaintext and tls / haproxy-tls.
	want := 2
	if ref {
		want = 4
	} else {
		t.Logf("no reference relay: %s", ti.Reference)
		if !strings.Contains(ti.Reference, "skipped") {
			t.Errorf("reference %q: neither run nor said to be skipped", ti.Reference)
		}
	}
	if len(rep.Ratios) != want*len(rep.Workloads) {
		t.Errorf("%d throughput ratios for %d workloads", len(rep.Ratios), len(rep.Workloads))
	}
	var table, js bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"conns per gateway CPU-s", "tls / plaintext", "tls-x25519", "negotiated TLS 1."} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"conns_per_cpu_sec"`) || !strings.Contains(js.String(), `"suite": "tls"`) {
		t.Errorf("JSON lacks the TLS or the suite fields:\n%s", js.String())
	}
	// The targets are SNI's >= 0.95 of TLS, TLS's share of plaintext
	// (issue 22) and, with the reference, TLS over haproxy, per workload;
	// whether a 1-second smoke window meets them is noise, so only their
	// presence is checked.
	perWorkload := 2
	if ref {
		perWorkload = 3
	}
	if len(rep.Targets) != perWorkload*len(rep.Workloads) {
		t.Errorf("targets %+v, want %d per workload", rep.Targets, perWorkload)
	}
	for _, tg := range rep.Targets {
		if !strings.Contains(tg.Name, tlsSNI+"/"+tlsVariant) && !strings.Contains(tg.Name, tlsVariant+"/"+tlsPlain) &&
			!strings.Contains(tg.Name, tlsVariant+"/"+tlsHAProxy) {
			t.Errorf("unexpected target %+v", tg)
		}
	}
	if testing.Verbose() {
		t.Logf("\n%s", table.String())
	}
}

// TestTLSSummarize checks the connection-loop medians and ratios against
// hand-computed values.
func TestTLSSummarize(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	ti := TLSInfo{ConnRuns: []ConnRun{
		{Loop: loopPlain, Round: 1, PerSec: 1000, PerCPUSec: f(2000)},
		{Loop: loopTLS, Round: 1, PerSec: 200, PerCPUSec: f(400)},
		{Loop: loopX25519, Round: 1, PerSec: 500, PerCPUSec: f(1000)},
		{Loop: loopPlain, Round: 2, PerSec: 2000, PerCPUSec: f(4000)},
		{Loop: loopTLS, Round: 2, PerSec: 300, PerCPUSec: f(1000), Errors: 2},
		{Loop: loopX25519, Round: 2, PerSec: 600, PerCPUSec: f(2000)},
		{Loop: loopPlain, Round: 3, PerSec: 1000, PerCPUSec: f(1000)},
		{Loop: loopTLS, Round: 3, PerSec: 100, PerCPUSec: f(300)},
		{Loop: loopX25519, Round: 3, PerSec: 400, PerCPUSec: f(500)},
	}}
	ti.summarize()
	got := map[string]ConnSummary{}
	for _, s := range ti.ConnSumm {
		got[s.Loop] = s
	}
	if s := got[loopTLS]; s.PerSec != 200 || s.PerCPUSec == nil || *s.PerCPUSec != 400 || s.Errors != 2 {
		t.Errorf("tls summary %+v", s)
	}
	if s := got[loopPlain]; s.PerSec != 1000 || *s.PerCPUSec != 2000 {
		t.Errorf("plaintext summary %+v", s)
	}
	ratios := map[string]ConnRatio{}
	for _, c := range ti.ConnRatios {
		ratios[c.Loop] = c
	}
	// tls/plaintext per round: 0.2, 0.15, 0.1 -> 0.15; per CPU-s: 0.2, 0.25, 0.3 -> 0.25.
	if c := ratios[loopTLS]; c.Versus != loopPlain || c.PerSec != 0.15 || c.PerCPUSec == nil || *c.PerCPUSec != 0.25 {
		t.Errorf("tls ratio %+v", c)
	}
	// tls-x25519/plaintext: 0.5, 0.3, 0.4 -> 0.4; per CPU-s: 0.5, 0.5, 0.5.
	if c := ratios[loopX25519]; c.PerSec != 0.4 || *c.PerCPUSec != 0.5 {
		t.Errorf("x25519 ratio %+v", c)
	}
}

// TestConfiguredRefusesSASL: the configured gateway refuses a SASL
// listener (the benchmark clients do not authenticate), naming it.
func TestConfiguredRefusesSASL(t *testing.T) {
	users := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(users, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	src := "listeners:\n  - name: bench\n    listen: 127.0.0.1:0\n    sasl: {mechanisms: [PLAIN], users_file: " +
		users + "}\nupstream:\n  bootstrap: [127.0.0.1:1]\nadmin:\n  listen: \"off\"\n"
	cfg, err := configs.Parse([]byte(src), "sasl.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startConfigured(cfg, false, "", slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "listener bench: SASL") {
		t.Errorf("startConfigured with SASL: %v", err)
	}
}
