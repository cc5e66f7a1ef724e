package proxy_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// The SNI names of the tests. ".test" is reserved (RFC 2606), so no DNS
// server answers for them: clients reach 127.0.0.1 through a dialer that
// keeps the name for SNI (kgo) or a private /etc/hosts (kcat).
const (
	sniApex       = "kafka.test"
	sniBrokerHost = "b{node}.kafka.test"
)

// wildcardCert issues the recipe of the README: one certificate for the
// wildcard and the apex.
func (ca *testCA) wildcardCert(t testing.TB, apex string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: apex},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames:    []string{apex, "*." + apex},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

type sniSetup struct {
	cluster *kfake.Cluster
	srv     *proxy.Server
	ca      *testCA
	reg     *prometheus.Registry
	port    string // the gateway's one port
}

// startSNI starts a 3-broker kfake and a gateway whose first listener
// routes by SNI (refusing hellos without a name) and whose second treats
// a hello without a name as bootstrap.
func startSNI(t *testing.T, topic string, partitions int) *sniSetup {
	t.Helper()
	s := &sniSetup{ca: newTestCA(t), reg: prometheus.NewRegistry()}
	s.cluster = startUpstream(t, 3, kfake.SeedTopics(int32(partitions), topic))
	spreadLeaders(t, s.cluster, topic, partitions, 3)
	cert := s.ca.wildcardCert(t, sniApex)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	sni := &proxy.SNIOptions{BootstrapHost: sniApex, BrokerHost: sniBrokerHost}
	lenient := *sni
	lenient.NoSNIBootstrap = true
	s.srv = startServer(t, proxy.Options{
		Listeners: []proxy.ListenerOptions{
			{Name: "sni", Listen: "127.0.0.1:0", TLS: serverTLS, SNI: sni},
			{Name: "sni-lenient", Listen: "127.0.0.1:0", TLS: serverTLS, SNI: &lenient},
		},
		Bootstrap: s.cluster.ListenAddrs(),
		Logger:    testLogger(t),
		Hooks:     metrics.New(s.reg),
	})
	_, s.port, _ = net.SplitHostPort(s.srv.Addr(0).String())
	return s
}

// sniDialer is a kgo dialer that connects every name to 127.0.0.1 (at
// the port of the address) and does TLS with the name as SNI, recording
// the names. sendSNI decides, per name, whether SNI is sent.
type sniDialer struct {
	pool    *x509.CertPool
	sendSNI func(host string) bool
	mu      sync.Mutex
	names   []string
}

func (d *sniDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.names = append(d.names, addr)
	d.mu.Unlock()
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: d.pool, ServerName: host}
	if d.sendSNI != nil && !d.sendSNI(host) {
		// Go sends no SNI without a ServerName; verify the certificate
		// as the bootstrap name's ourselves.
		cfg = &tls.Config{InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: d.pool, DNSName: sniApex})
			return err
		}}
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

func (d *sniDialer) dialed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.names)
}

// TestSNIRouting: kgo bootstraps by the apex name, learns broker names
// b0/b1/b2.kafka.test at the gateway's one port (never an upstream
// address), and produces to and consumes from partitions led by all
// three brokers; the gateway opened no per-broker port.
func TestSNIRouting(t *testing.T) {
	s := startSNI(t, "sni-events", 6)
	d := &sniDialer{pool: s.ca.pool}
	ctx := ctxT(t, 60*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(net.JoinHostPort(sniApex, s.port)), kgo.Dialer(d.dial),
		kgo.DefaultProduceTopic("sni-events"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Brokers) != 3 {
		t.Fatalf("metadata lists %d brokers, want 3", len(meta.Brokers))
	}
	for _, b := range meta.Brokers {
		want := fmt.Sprintf("b%d.kafka.test", b.NodeID)
		if b.Host != want || strconv.Itoa(int(b.Port)) != s.port {
			t.Errorf("broker %d advertised as %s:%d, want %s:%s", b.NodeID, b.Host, b.Port, want, s.port)
		}
	}
	for node := range int32(3) {
		if _, open := s.srv.BrokerAddr(0, node); open {
			t.Errorf("an SNI listener opened a port for node %d", node)
		}
	}

	produceConsumeAll(t, ctx, cl, "sni-events", 6, kgo.SeedBrokers(net.JoinHostPort(sniApex, s.port)), kgo.Dialer(d.dial))
	names := map[string]bool{}
	for _, a := range d.dialed() {
		host, port, _ := net.SplitHostPort(a)
		if port != s.port {
			t.Errorf("client dialled %s, not the gateway's port", a)
		}
		names[host] = true
	}
	for _, want := range []string{sniApex, "b0.kafka.test", "b1.kafka.test", "b2.kafka.test"} {
		if !names[want] {
			t.Errorf("no connection by SNI name %s (dialled %v)", want, names)
		}
	}
}

// produceConsumeAll produces 60 records round-robin over every partition
// and consumes them back with a fresh client built from opts.
func produceConsumeAll(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partitions int, opts ...kgo.Opt) {
	t.Helper()
	const n = 60
	parts := map[int32]int{}
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("v%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		parts[r.Partition]++
	}
	if len(parts) != partitions {
		t.Errorf("records went to %d partitions, want %d", len(parts), partitions)
	}
	cons, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(seen), n)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}

// TestSNIRefusals: a name that is neither the apex nor a broker name, a
// broker name of a node the upstream does not have, and a hello without
// SNI are refused during the handshake with the unrecognized_name alert,
// and counted by reason; the lenient listener takes a hello without SNI
// as bootstrap.
func TestSNIRefusals(t *testing.T) {
	s := startSNI(t, "sni-refusals", 1)
	try := func(listener int, name string) error {
		cfg := &tls.Config{RootCAs: s.ca.pool, ServerName: name}
		if name == "" {
			cfg = &tls.Config{InsecureSkipVerify: true}
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", s.srv.Addr(listener).String(), cfg)
		if err == nil {
			c.Close()
		}
		return err
	}
	for _, name := range []string{"evil.kafka.test", "b9.kafka.test", "b01.kafka.test", "kafka.test.evil", ""} {
		// crypto/tls reports a received alert as "remote error: tls: <alert>".
		if err := try(0, name); err == nil || !strings.Contains(err.Error(), "tls: unrecognized name") {
			t.Errorf("hello with SNI %q: %v, want the unrecognized_name alert", name, err)
		}
	}
	for _, name := range []string{"kafka.test", "KAFKA.test.", "b2.kafka.test"} {
		if err := try(0, name); err != nil {
			t.Errorf("hello with SNI %q: %v", name, err)
		}
	}
	if err := try(1, ""); err != nil {
		t.Errorf("lenient listener refused a hello without SNI: %v", err)
	}
	want := map[string]float64{"unknown_name": 3, "unknown_node": 1, "no_sni": 1}
	got := sniRefusedCounts(t, s.reg, "sni")
	for reason, n := range want {
		if got[reason] != n {
			t.Errorf("tollgate_sni_refused_total{listener=sni,reason=%s} = %v, want %v", reason, got[reason], n)
		}
	}
	// A client that bootstraps by IP sends no SNI; through the lenient
	// listener it still works end to end (brokers then by name).
	d := &sniDialer{pool: s.ca.pool, sendSNI: func(host string) bool { return net.ParseIP(host) == nil }}
	_, lport, _ := net.SplitHostPort(s.srv.Addr(1).String())
	ctx := ctxT(t, 30*time.Second)
	opts := []kgo.Opt{kgo.SeedBrokers(net.JoinHostPort("127.0.0.1", lport)), kgo.Dialer(d.dial)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produceConsumeAll(t, ctx, cl, "sni-refusals", 1, opts...)
}

// spreadLeaders moves partition p of topic to node p % brokers, so that
// every broker leads one (kfake picks leaders at random).
func spreadLeaders(t *testing.T, c *kfake.Cluster, topic string, partitions, brokers int) {
	t.Helper()
	for p := range partitions {
		if err := c.MoveTopicPartition(topic, int32(p), int32(p%brokers)); err != nil {
			t.Fatalf("move %s[%d] to node %d: %v", topic, p, p%brokers, err)
		}
	}
}

func sniRefusedCounts(t *testing.T, reg *prometheus.Registry, listener string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "tollgate_sni_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["listener"] == listener {
				out[labels["reason"]] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// TestSNIKcat: librdkafka sends the broker's host name as SNI and
// verifies the certificate against it. The SNI names resolve to
// 127.0.0.1 through a private /etc/hosts bind-mounted in a mount
// namespace of kcat's own (root only), so the machine's file is never
// touched. kcat produces to and consumes from partitions on all three
// brokers; kcat given the IP address sends no SNI and is refused.
func TestSNIKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (make deps installs it)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: kcat resolves the SNI names through a private /etc/hosts in a mount namespace (unshare -m)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) not installed")
	}
	s := startSNI(t, "sni-kcat", 3)
	dir := t.TempDir()
	hosts := filepath.Join(dir, "hosts")
	var lines strings.Builder
	lines.WriteString("127.0.0.1 localhost " + sniApex + "\n")
	for node := range 3 {
		fmt.Fprintf(&lines, "127.0.0.1 b%d.%s\n", node, sniApex)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(hosts, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.ca.cert.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	kcat := func(stdin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		base := []string{"--mount", "sh", "-c", `mount --bind "$0" /etc/hosts && exec kcat "$@"`, hosts,
			"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + caFile}
		cmd := exec.CommandContext(ctx, "unshare", append(base, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	boot := net.JoinHostPort(sniApex, s.port)
	out, err := kcat("", "-b", boot, "-L", "-t", "sni-kcat")
	if err != nil {
		t.Fatalf("kcat -L: %v\n%s", err, out)
	}
	for node := range 3 {
		if want := fmt.Sprintf("b%d.kafka.test:%s", node, s.port); !strings.Contains(out, want) {
			t.Errorf("kcat -L does not list %s:\n%s", want, out)
		}
	}
	var in strings.Builder
	for i := range 30 {
		fmt.Fprintf(&in, "%d:kcat-%d\n", i%3, i)
	}
	if out, err := kcat(in.String(), "-b", boot, "-t", "sni-kcat", "-P", "-K", ":", "-X", "partitioner=murmur2_random"); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	got := map[string]bool{}
	for p := range 3 {
		out, err := kcat("", "-b", boot, "-t", "sni-kcat", "-C", "-p", strconv.Itoa(p), "-o", "beginning", "-e", "-q")
		if err != nil {
			t.Fatalf("kcat -C -p %d: %v\n%s", p, err, out)
		}
		for _, v := range strings.Fields(out) {
			got[v] = true
		}
	}
	if len(got) != 30 {
		t.Errorf("kcat consumed %d distinct records, want 30", len(got))
	}
	before := sniRefusedCounts(t, s.reg, "sni")["no_sni"]
	out, err = kcat("", "-b", s.srv.Addr(0).String(), "-L", "-m", "3", "-X", "ssl.endpoint.identification.algorithm=none")
	if err == nil {
		t.Errorf("kcat by IP address (no SNI) listed metadata:\n%s", out)
	}
	if after := sniRefusedCounts(t, s.reg, "sni")["no_sni"]; after <= before {
		t.Errorf("kcat's hello without SNI was not counted (no_sni %v -> %v)", before, after)
	}
}

// TestSNIBrokerAddedLater: a broker that joins the upstream needs no
// configuration. Its name is refused until the gateway has seen the node
// (unknown_node), and accepted once a Metadata response through the
// gateway names it; a partition it leads takes produce by that name.
func TestSNIBrokerAddedLater(t *testing.T) {
	s := startSNI(t, "sni-grow", 3)
	hello := func(name string) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", s.srv.Addr(0).String(),
			&tls.Config{RootCAs: s.ca.pool, ServerName: name})
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := hello("b3.kafka.test"); err == nil || !strings.Contains(err.Error(), "unrecognized name") {
		t.Fatalf("b3 before it exists: %v, want unrecognized name", err)
	}
	node, _, err := s.cluster.AddNode(-1, 0)
	if err != nil || node != 3 {
		t.Fatalf("AddNode: node %d, %v", node, err)
	}
	if err := s.cluster.MoveTopicPartition("sni-grow", 0, node); err != nil {
		t.Fatal(err)
	}
	d := &sniDialer{pool: s.ca.pool}
	ctx := ctxT(t, 30*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(net.JoinHostPort(sniApex, s.port)), kgo.Dialer(d.dial),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(meta.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.Host == "b3.kafka.test" }) {
		t.Fatalf("metadata after the join does not list b3.kafka.test: %+v", meta.Brokers)
	}
	if err := hello("b3.kafka.test"); err != nil {
		t.Fatalf("b3 after the gateway saw it: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sni-grow", Partition: 0, Value: []byte("to b3")}).FirstErr(); err != nil {
		t.Fatalf("produce to the partition b3 leads: %v", err)
	}
	if !slices.ContainsFunc(d.dialed(), func(a string) bool { return strings.HasPrefix(a, "b3.kafka.test:") }) {
		t.Errorf("the client never dialled b3.kafka.test: %v", d.dialed())
	}
}
