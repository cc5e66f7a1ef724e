package proxy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// testCA issues certificates for loopback tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tollgate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert, key, pool}
}

func (ca *testCA) issue(t testing.TB, cn string, ips ...net.IP) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: ips, DNSNames: []string{cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestUpstreamTLS: the upstream cluster speaks only TLS; the gateway
// verifies it against a CA (server name from the dialled address), clients
// talk plaintext to the gateway and produce and consume normally.
func TestUpstreamTLS(t *testing.T) {
	ca := newTestCA(t)
	server := ca.issue(t, "kafka.test", net.ParseIP(upstreamHost))
	c := startUpstream(t, 3, kfake.SeedTopics(3, "secure"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{server}, MinVersion: tls.VersionTLS12}))
	srv := startGateway(t, c, func(o *proxy.Options) {
		o.UpstreamTLS = &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
	})
	rec := &recorder{}
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, srv, rec, kgo.DefaultProduceTopic("secure"))
	for i := range 20 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(string(rune('a'+i)))).FirstErr(); err != nil {
			t.Fatalf("produce through TLS upstream: %v", err)
		}
	}
	cons := newClient(t, srv, rec, kgo.ConsumeTopics("secure"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 20 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 20", got)
		}
		got += fs.NumRecords()
	}
	rec.assertNoLeak(t, c)

	// A gateway that does not trust the upstream's CA refuses to talk to it.
	bad := startGateway(t, c, func(o *proxy.Options) {
		o.UpstreamTLS = &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
		o.DialTimeout = 2 * time.Second
	})
	badCl := newClient(t, bad, nil, kgo.DefaultProduceTopic("secure"), kgo.RecordDeliveryTimeout(3*time.Second))
	if err := badCl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err == nil {
		t.Fatal("produce succeeded through a gateway that cannot verify the upstream")
	}
}
