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
	"strings"
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
	spreadLeaders(t, c, "sni", 3)
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
	ca := newFileCA(t)
	cert, key := ca.write(t, dir, "wildcard", apex, "*."+apex)
	return ca.pool, cert, key
}

// fileCA issues certificates into PEM files.
type fileCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newFileCA(t *testing.T) *fileCA {
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
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &fileCA{caCert, caKey, pool}
}

// write issues a certificate for names and writes dir/base.crt and .key.
func (ca *fileCA) write(t *testing.T, dir, base string, names ...string) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: names, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestSNIPerNameCertificates: without a wildcard, one certificate per
// name (tls.certificates); each TLS server name gets its own, verified
// by the client against that name.
func TestSNIPerNameCertificates(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "per-name"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	spreadLeaders(t, c, "per-name", 3)
	dir := t.TempDir()
	ca := newFileCA(t)
	apexCert, apexKey := ca.write(t, dir, "apex", "kafka.test")
	var extra strings.Builder
	for node := range 3 {
		cert, key := ca.write(t, dir, fmt.Sprintf("b%d", node), fmt.Sprintf("b%d.kafka.test", node))
		fmt.Fprintf(&extra, "        - { cert: %s, key: %s }\n", cert, key)
	}
	g := startFrom(t, fmt.Sprintf(`
listeners:
  - listen: "127.0.0.1:0"
    brokers: sni
    sni: { bootstrap_host: kafka.test, broker_host: "b{node}.kafka.test" }
    tls:
      cert: %s
      key: %s
      certificates:
%supstream: { bootstrap: [%s] }
admin: { listen: "off" }
`, apexCert, apexKey, extra.String(), c.ListenAddrs()[0]))
	_, port, _ := net.SplitHostPort(g.Server.Addr(0).String())
	var mu sync.Mutex
	served := map[string]string{} // SNI -> the certificate's first name
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, p, _ := net.SplitHostPort(addr)
		var d net.Dialer
		raw, err := d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", p))
		if err != nil {
			return nil, err
		}
		tc := tls.Client(raw, &tls.Config{RootCAs: ca.pool, ServerName: host})
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		mu.Lock()
		served[host] = tc.ConnectionState().PeerCertificates[0].DNSNames[0]
		mu.Unlock()
		return tc, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers("kafka.test:"+port), kgo.Dialer(dial), kgo.DefaultProduceTopic("per-name"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 6 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"kafka.test", "b0.kafka.test", "b1.kafka.test", "b2.kafka.test"} {
		if served[name] != name {
			t.Errorf("SNI %s was served the certificate of %q", name, served[name])
		}
	}
}
