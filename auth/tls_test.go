package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

var serial atomic64

type atomic64 struct{ n int64 }

func (a *atomic64) next() *big.Int { a.n++; return big.NewInt(a.n) }

func newCA(t *testing.T, cn string) testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: serial.next(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return testCA{cert, key}
}

// issue signs a leaf certificate and returns it with its key.
func (ca testCA) issue(t *testing.T, tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl.SerialNumber = serial.next()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

func writePEM(t *testing.T, path string, cert *x509.Certificate, key *ecdsa.PrivateKey) {
	t.Helper()
	var data []byte
	if cert != nil {
		data = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	}
	if key != nil {
		der, _ := x509.MarshalECPrivateKey(key)
		data = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	// Replace atomically, as an operator (or cert-manager) would.
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// handshake dials a TLS listener and returns the server certificate the
// client saw and the client certificate the server verified.
func handshake(t *testing.T, ln net.Listener, client *tls.Config) (server *x509.Certificate, peer *x509.Certificate, err error) {
	t.Helper()
	got := make(chan *x509.Certificate, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		if tc.Handshake() != nil || len(tc.ConnectionState().PeerCertificates) == 0 {
			got <- nil
			return
		}
		got <- tc.ConnectionState().PeerCertificates[0]
		tc.Read(make([]byte, 1)) // until the client closes
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), client)
	if err != nil {
		<-got
		return nil, nil, err
	}
	defer conn.Close()
	// With TLS 1.3 the client learns of a rejected certificate only on
	// its first read.
	conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := conn.Read(make([]byte, 1)); err != nil {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			<-got
			return nil, nil, err
		}
	}
	return conn.ConnectionState().PeerCertificates[0], <-got, nil
}

func TestServerTLSMutualAndReload(t *testing.T) {
	dir := t.TempDir()
	ca, clientCA := newCA(t, "server CA"), newCA(t, "client CA")
	srvCert, srvKey := ca.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "gateway"}, DNSNames: []string{"localhost"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	p := func(n string) string { return filepath.Join(dir, n) }
	writePEM(t, p("server.crt"), srvCert, nil)
	writePEM(t, p("server.key"), nil, srvKey)
	writePEM(t, p("clients.crt"), clientCA.cert, nil)

	cfg := &configs.ListenerTLS{Cert: p("server.crt"), Key: p("server.key"), ClientCA: p("clients.crt"), MinVersion: "1.2"}
	tc, err := ServerTLS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tc)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	cliCert, cliKey := clientCA.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Acme, Inc."}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	client := &tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{{Certificate: [][]byte{cliCert.Raw}, PrivateKey: cliKey}}}

	seen, peer, err := handshake(t, ln, client)
	if err != nil {
		t.Fatalf("mTLS handshake: %v", err)
	}
	if seen.SerialNumber.Cmp(srvCert.SerialNumber) != 0 || peer == nil || peer.Subject.CommonName != "alice" {
		t.Fatalf("server cert %v, peer %v", seen.SerialNumber, peer)
	}
	m, err := NewPrincipalMapper(&configs.ListenerTLS{PrincipalMappingRules: []string{`RULE:^CN=([^,]*),OU=.*$/$1/U`, "DEFAULT"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.Principal(peer); err != nil || got != "ALICE" {
		t.Errorf("principal %q, %v", got, err)
	}
	dn, _ := SubjectDN(peer.RawSubject)
	if dn != `CN=alice,OU=eng,O=Acme\, Inc.` {
		t.Errorf("DN %q", dn)
	}

	// No client certificate: refused.
	if _, _, err := handshake(t, ln, &tls.Config{RootCAs: roots, ServerName: "localhost"}); err == nil {
		t.Error("handshake without a client certificate succeeded")
	}
	// A client certificate from another CA: refused.
	rogue, rogueKey := newCA(t, "rogue").issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if _, _, err := handshake(t, ln, &tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{{Certificate: [][]byte{rogue.Raw}, PrivateKey: rogueKey}}}); err == nil {
		t.Error("handshake with a certificate from another CA succeeded")
	}
	// TLS 1.1 is refused; 1.3 is what two modern sides agree on.
	if _, _, err := handshake(t, ln, &tls.Config{RootCAs: roots, ServerName: "localhost", MaxVersion: tls.VersionTLS11, Certificates: client.Certificates}); err == nil {
		t.Error("TLS 1.1 accepted")
	}

	// Replace the server certificate (key first, then cert: in between
	// the pair does not match and the old one stays in service).
	newCert, newKey := ca.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "gateway-2"}, DNSNames: []string{"localhost"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	writePEM(t, p("server.key"), nil, newKey)
	time.Sleep(checkInterval + 100*time.Millisecond)
	if seen, _, err := handshake(t, ln, client); err != nil || seen.SerialNumber.Cmp(srvCert.SerialNumber) != 0 {
		t.Fatalf("mismatched pair on disk: handshake %v, serial %v; want the old certificate still served", err, seen)
	}
	writePEM(t, p("server.crt"), newCert, nil)
	waitFor(t, 5*time.Second, func() bool {
		seen, _, err := handshake(t, ln, client)
		return err == nil && seen.SerialNumber.Cmp(newCert.SerialNumber) == 0
	})
}

func TestServerTLSOptions(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	c, k := ca.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "gw"}, DNSNames: []string{"localhost"}})
	crt, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	writePEM(t, crt, c, nil)
	writePEM(t, key, nil, k)
	base := configs.ListenerTLS{Cert: crt, Key: key, MinVersion: "1.2"}

	cfg := base
	cfg.Ciphers = []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}
	tc, err := ServerTLS(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tc.MinVersion != tls.VersionTLS12 || len(tc.CipherSuites) != 1 || tc.CipherSuites[0] != tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 || tc.ClientAuth != tls.NoClientCert {
		t.Errorf("config %+v", tc)
	}
	ln, _ := tls.Listen("tcp", "127.0.0.1:0", tc)
	defer ln.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	// A TLS 1.2 client offering only another suite is refused.
	if _, _, err := handshake(t, ln, &tls.Config{RootCAs: roots, ServerName: "localhost", MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}}); err == nil {
		t.Error("a suite outside ciphers was accepted")
	}
	for name, mod := range map[string]func(*configs.ListenerTLS){
		"unknown cipher":  func(c *configs.ListenerTLS) { c.Ciphers = []string{"TLS_NOPE"} },
		"insecure cipher": func(c *configs.ListenerTLS) { c.Ciphers = []string{"TLS_RSA_WITH_RC4_128_SHA"} },
		"tls13 cipher":    func(c *configs.ListenerTLS) { c.Ciphers = []string{"TLS_AES_128_GCM_SHA256"} },
		"version":         func(c *configs.ListenerTLS) { c.MinVersion = "1.1" },
		"missing key":     func(c *configs.ListenerTLS) { c.Key = filepath.Join(dir, "none") },
		"swapped":         func(c *configs.ListenerTLS) { c.Cert, c.Key = c.Key, c.Cert },
		"ca not pem":      func(c *configs.ListenerTLS) { c.ClientCA = key },
	} {
		cfg := base
		mod(&cfg)
		if _, err := ServerTLS(&cfg); err == nil {
			t.Errorf("%s: ServerTLS succeeded", name)
		}
	}
}

func TestPrincipalMapping(t *testing.T) {
	ca := newCA(t, "ca")
	u, _ := url.Parse("spiffe://example.org/orders")
	cert, _ := ca.issue(t, &x509.Certificate{
		Subject: pkix.Name{
			CommonName: "svc-orders", OrganizationalUnit: []string{"Payments"}, Organization: []string{"Acme"}, Country: []string{"US"},
		},
		DNSNames: []string{"orders.example.org", "b.example.org"}, URIs: []*url.URL{u}, EmailAddresses: []string{"orders@example.org"},
	})
	const dn = "CN=svc-orders,OU=Payments,O=Acme,C=US"
	if got, _ := SubjectDN(cert.RawSubject); got != dn {
		t.Fatalf("DN %q, want %q", got, dn)
	}
	cases := []struct {
		from  string
		rules []string
		want  string // "" = ErrNoPrincipal
	}{
		{"", nil, dn},
		{"", []string{"DEFAULT"}, dn},
		{"", []string{`RULE:^CN=(.*?),OU=(.*?),O=(.*?),.*$/$1@$3/`}, "svc-orders@Acme"},
		{"", []string{`RULE:^CN=(.*?),OU=(.*?),.*$/$1-$2/L`}, "svc-orders-payments"},
		{"", []string{`RULE:^CN=(.*?),.*$/$1/U`}, "SVC-ORDERS"},
		// Kafka requires the whole DN to match; the first matching rule wins.
		{"", []string{`RULE:^CN=(.*?),OU=Other$/$1/`, `RULE:^CN=([^,]*).*$/u:$1/`}, "u:svc-orders"},
		{"", []string{`RULE:CN=svc/x/`}, ""},
		{"", []string{`RULE:^CN=(.*?),.*$/a\/b\$$1/`}, "a/b$svc-orders"},
		{"", []string{`RULE:^CN=(x).*$/$1/`, "DEFAULT"}, dn},
		{"", []string{`RULE:^CN=(x?).*$/$1/`}, ""}, // empty result
		{configs.PrincipalFromCN, nil, "svc-orders"},
		{configs.PrincipalFromSANDNS, nil, "orders.example.org"},
		{configs.PrincipalFromSANURI, nil, "spiffe://example.org/orders"},
		{configs.PrincipalFromSANEmail, nil, "orders@example.org"},
	}
	for _, c := range cases {
		m, err := NewPrincipalMapper(&configs.ListenerTLS{PrincipalFrom: c.from, PrincipalMappingRules: c.rules})
		if err != nil {
			t.Fatalf("%s %v: %v", c.from, c.rules, err)
		}
		got, err := m.Principal(cert)
		if c.want == "" {
			if !errors.Is(err, ErrNoPrincipal) {
				t.Errorf("%s %v: %q, %v; want ErrNoPrincipal", c.from, c.rules, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s %v: %q, %v; want %q", c.from, c.rules, got, err, c.want)
		}
	}
	bare, _ := ca.issue(t, &x509.Certificate{Subject: pkix.Name{Organization: []string{"x"}}})
	for _, from := range []string{configs.PrincipalFromCN, configs.PrincipalFromSANDNS, configs.PrincipalFromSANURI, configs.PrincipalFromSANEmail} {
		m, _ := NewPrincipalMapper(&configs.ListenerTLS{PrincipalFrom: from})
		if _, err := m.Principal(bare); !errors.Is(err, ErrNoPrincipal) {
			t.Errorf("%s on a bare certificate: %v", from, err)
		}
	}
	for _, bad := range []string{"RULE:x", "RULE:(/x/", "RULE:x/$2/", "RULE:x/y/Q", "NOPE", `RULE:x/a\/`} {
		if _, err := NewPrincipalMapper(&configs.ListenerTLS{PrincipalMappingRules: []string{bad}}); err == nil {
			t.Errorf("rule %q accepted", bad)
		}
	}
}

func TestSubjectDNEscapes(t *testing.T) {
	name := pkix.Name{CommonName: " #lead, and+plus\"q\\<>; ", Country: []string{"NL"}}
	der, err := asn1.Marshal(name.ToRDNSequence())
	if err != nil {
		t.Fatal(err)
	}
	got, err := SubjectDN(der)
	want := `CN=\ #lead\, and\+plus\"q\\\<\>\;\ ,C=NL`
	if err != nil || got != want {
		t.Errorf("DN %q, %v; want %q", got, err, want)
	}
	// A leading '#' is escaped; DC and UID use Java's keywords, other
	// attributes print as OID=#hex.
	name = pkix.Name{CommonName: "#x", ExtraNames: []pkix.AttributeTypeAndValue{
		{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}, Value: "example"},
		{Type: asn1.ObjectIdentifier{2, 5, 4, 5}, Value: "42"},
	}}
	der, _ = asn1.Marshal(name.ToRDNSequence())
	got, err = SubjectDN(der)
	want = `2.5.4.5=#13023432,DC=example,CN=\#x`
	if err != nil || got != want {
		t.Errorf("DN %q, %v; want %q", got, err, want)
	}
	if _, err := SubjectDN([]byte{0x30, 0x05}); err == nil {
		t.Error("truncated DER parsed")
	}
}

// TestServerTLSFromValidatedMaterial: a section configs.Validate has
// checked is served from what Validate read (not read again), and a file
// replaced after Validate is still noticed as a change: its stamp is
// compared with the one Validate saw.
func TestServerTLSFromValidatedMaterial(t *testing.T) {
	dir := t.TempDir()
	ca, clientCA := newCA(t, "server CA"), newCA(t, "client CA")
	p := func(n string) string { return filepath.Join(dir, n) }
	writePEM(t, p("clients.crt"), clientCA.cert, nil)
	issue := func(cn string) *x509.Certificate {
		cert, key := ca.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: []string{"localhost"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		writePEM(t, p("server.key"), nil, key)
		writePEM(t, p("server.crt"), cert, nil)
		return cert
	}
	validated := issue("validated")
	c := configs.Default()
	c.Listeners[0].TLS = &configs.ListenerTLS{Cert: p("server.crt"), Key: p("server.key"), ClientCA: p("clients.crt"), MinVersion: "1.2"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Listeners[0].TLS.Material() == nil {
		t.Fatal("Validate kept no material")
	}
	// Replaced between Validate and ServerTLS. The longer name makes the
	// new file differ in size as well as mtime, whatever the file
	// system's mtime granularity.
	replaced := issue("replaced-after-validation-with-a-longer-common-name")

	tc, err := ServerTLS(c.Listeners[0].TLS)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tc)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	cliCert, cliKey := clientCA.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	client := &tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{{Certificate: [][]byte{cliCert.Raw}, PrivateKey: cliKey}}}
	if seen, _, err := handshake(t, ln, client); err != nil || seen.SerialNumber.Cmp(validated.SerialNumber) != 0 {
		t.Fatalf("first handshake: %v, %v; want the validated certificate", seen, err)
	}
	waitFor(t, 5*time.Second, func() bool {
		seen, _, err := handshake(t, ln, client)
		return err == nil && seen.SerialNumber.Cmp(replaced.SerialNumber) == 0
	})
}
