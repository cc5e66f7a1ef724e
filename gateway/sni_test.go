package gateway

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
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSNIFromConfig: a brokers: sni listener assembled from YAML (the
// README's wildcard-plus-apex certificate, an advertise that names only
// the port) tells clients broker_host names at that port, and routes
// each name to its broker.
func TestSNIFromConfig(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "sni"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	pool, certFile, keyFile := writeWildcard(t, dir, "kafka.test")
	g := startFrom(t, fmt.Sprintf(`
listeners:
  - listen: "127.0.0.1:0"
    advertise: kafka.test:9443
    brokers: sni
    sni: { bootstrap_host: kafka.test, broker_host: "broker-{node}.kafka.test" }
    tls: { cert: %s, key: %s }
upstream: { bootstrap: [%s] }
admin: { listen: "off" }
`, certFile, keyFile, c.ListenAddrs()[0]))
	_, port, _ := net.SplitHostPort(g.Server.Addr(0).String())
	// The advertised port (9443, a load balancer's) is not bound here:
	// every name goes to the bound port, with its SNI.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		var d net.Dialer
		raw, err := d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			return nil, err
		}
		tc := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: host})
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return tc, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers("kafka.test:9443"), kgo.Dialer(dial), kgo.DefaultProduceTopic("sni"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range meta.Brokers {
		if want := "broker-" + strconv.Itoa(int(b.NodeID)) + ".kafka.test"; b.Host != want || b.Port != 9443 {
			t.Errorf("node %d advertised as %s:%d, want %s:9443", b.NodeID, b.Host, b.Port, want)
		}
	}
	for i := range 9 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	for p := range int32(3) {
		if hw := c.PartitionInfo("sni", p).HighWatermark; hw != 3 {
			t.Errorf("partition %d high watermark %d, want 3", p, hw)
		}
	}
}

// writeWildcard writes a CA-signed certificate for apex and *.apex (the
// README's recipe) and returns the CA pool and the files.
func writeWildcard(t *testing.T, dir, apex string) (*x509.CertPool, string, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sni test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: apex},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{apex, "*." + apex}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "wildcard.crt"), filepath.Join(dir, "wildcard.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, certFile, keyFile
}

// TestSNIBuiltin: the built-in broker behind an SNI listener is node 0,
// advertised as its broker name; kgo produces and consumes by name.
func TestSNIBuiltin(t *testing.T) {
	dir := t.TempDir()
	pool, certFile, keyFile := writeWildcard(t, dir, "kafka.test")
	g := startFrom(t, fmt.Sprintf(`
listeners:
  - listen: "127.0.0.1:0"
    brokers: sni
    sni: { bootstrap_host: kafka.test, broker_host: "b{node}.kafka.test" }
    tls: { cert: %s, key: %s }
broker: { data_dir: %s }
admin: { listen: "off" }
`, certFile, keyFile, filepath.Join(dir, "data")))
	_, port, _ := net.SplitHostPort(g.Server.Addr(0).String())
	var mu sync.Mutex
	names := map[string]bool{}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, p, _ := net.SplitHostPort(addr)
		mu.Lock()
		names[host] = true
		mu.Unlock()
		var d net.Dialer
		raw, err := d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", p))
		if err != nil {
			return nil, err
		}
		tc := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: host})
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return tc, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := []kgo.Opt{kgo.SeedBrokers("kafka.test:" + port), kgo.Dialer(dial)}
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic("sni-local"), kgo.AllowAutoTopicCreation())...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("by name")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(append(opts, kgo.ConsumeTopics("sni-local"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	fs := cons.PollFetches(ctx)
	if fs.NumRecords() != 1 || string(fs.Records()[0].Value) != "by name" {
		t.Fatalf("consumed %d records, errors %v", fs.NumRecords(), fs.Errors())
	}
	mu.Lock()
	defer mu.Unlock()
	if !names["kafka.test"] || !names["b0.kafka.test"] || len(names) != 2 {
		t.Errorf("dialled names %v, want kafka.test and b0.kafka.test", names)
	}
}
