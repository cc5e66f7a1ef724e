package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// writeCerts writes a CA and a server certificate for 127.0.0.1 as PEM
// files in dir and returns their paths and the CA pool.
func writeCerts(t *testing.T, dir string) (caFile, certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pool = x509.NewCertPool()
	pool.AddCert(caCert)
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", der), write("server.key", "EC PRIVATE KEY", keyDER), pool
}

// TestTLSAndSCRAMThroughBinary: the binary serves a TLS listener with
// SCRAM-SHA-512 from a users file made by `tollgate users add`; kgo and
// kcat (librdkafka, SASL_SSL) produce and consume, a wrong password gets
// SASL_AUTHENTICATION_FAILED, and a plaintext client is refused.
func TestTLSAndSCRAMThroughBinary(t *testing.T) {
	bin := tollgateBinary(t)
	dir := t.TempDir()
	caFile, certFile, keyFile, pool := writeCerts(t, dir)
	users := filepath.Join(dir, "users.yaml")
	add := exec.Command(bin, "users", "add", "alice", "--password-stdin", "--file", users)
	add.Stdin = strings.NewReader("wonderland\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("tollgate users add: %v\n%s", err, out)
	}
	if raw, _ := os.ReadFile(users); strings.Contains(string(raw), "wonderland") {
		t.Fatal("the users file holds the password")
	}
	cfgFile := filepath.Join(dir, "tollgate.yaml")
	os.WriteFile(cfgFile, []byte(`
listeners:
  - name: secure
    listen: 127.0.0.1:0
    tls: { cert: `+certFile+`, key: `+keyFile+` }
    sasl: { mechanisms: [SCRAM-SHA-512, PLAIN], users_file: `+users+` }
`), 0o644)
	c, err := startTollgate(t, bin, filepath.Join(dir, "data"), "127.0.0.1:0", "--config", cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tlsCfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	client := func(pass string, opts ...kgo.Opt) *kgo.Client {
		return testClient(t, c.addr, append([]kgo.Opt{kgo.DialTLSConfig(tlsCfg),
			kgo.SASL(scram.Auth{User: "alice", Pass: pass}.AsSha512Mechanism()), kgo.AllowAutoTopicCreation()}, opts...)...)
	}
	good := client("wonderland", kgo.DefaultProduceTopic("secured"))
	if err := good.ProduceSync(ctx, kgo.StringRecord("over TLS and SCRAM")).FirstErr(); err != nil {
		t.Fatalf("produce: %v\n%s", err, c.output())
	}
	bad := client("looking-glass", kgo.DefaultProduceTopic("secured"), kgo.RecordDeliveryTimeout(3*time.Second))
	if err := bad.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	plain := testClient(t, c.addr, kgo.DefaultProduceTopic("secured"), kgo.RecordDeliveryTimeout(3*time.Second))
	if err := plain.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err == nil {
		t.Fatal("a plaintext client was served on the TLS listener")
	}

	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed")
	}
	sec := []string{"-b", c.addr, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=alice", "-X", "sasl.password=wonderland", "-X", "ssl.ca.location=" + caFile}
	prod := exec.CommandContext(ctx, "kcat", append(sec, "-t", "secured", "-P")...)
	prod.Stdin = strings.NewReader("from librdkafka\n")
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce over SASL_SSL: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, "kcat", append(sec, "-t", "secured", "-C", "-o", "beginning", "-e", "-q")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "over TLS and SCRAM") || !strings.Contains(string(out), "from librdkafka") {
		t.Fatalf("kcat consume over SASL_SSL: %v\n%s", err, out)
	}
}
