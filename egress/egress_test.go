package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// scriptedProxy accepts one connection, reads the CONNECT request, hands
// it to answer, and writes what answer returns. It records the request.
type scriptedProxy struct {
	ln  net.Listener
	got chan *http.Request
}

func startScripted(t *testing.T, wrap func(net.Listener) net.Listener, answer func(*http.Request) string) *scriptedProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	p := &scriptedProxy{ln: ln, got: make(chan *http.Request, 1)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		p.got <- req
		io.WriteString(c, answer(req))
		// Keep the tunnel open until the client is done.
		io.Copy(io.Discard, c)
	}()
	return p
}

// request is the CONNECT request the proxy read (bounded: a proxy that
// never got one fails the test instead of hanging it).
func (p *scriptedProxy) request(t *testing.T) *http.Request {
	t.Helper()
	select {
	case req := <-p.got:
		return req
	case <-time.After(10 * time.Second):
		t.Fatal("the scripted proxy read no request within 10s")
		return nil
	}
}

func (p *scriptedProxy) url(scheme, user string) *url.URL {
	u := &url.URL{Scheme: scheme, Host: p.ln.Addr().String()}
	if user != "" {
		name, pw, _ := strings.Cut(user, ":")
		u.User = url.UserPassword(name, pw)
	}
	return u
}

func dialVia(t *testing.T, u *url.URL, tc *tls.Config, addr string) (net.Conn, error) {
	t.Helper()
	d, err := New(Config{URL: u, TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.DialContext(ctx, "tcp", addr)
}

// TestConnectKeepsEarlyBytes: bytes the proxy sends in the same segment
// as its 200 reply are the broker's and reach the caller first; the
// request carries Basic credentials and names the target.
func TestConnectKeepsEarlyBytes(t *testing.T) {
	p := startScripted(t, nil, func(*http.Request) string {
		return "HTTP/1.1 200 Connection established\r\nProxy-Agent: test\r\n\r\nEARLY-BROKER-BYTES"
	})
	c, err := dialVia(t, p.url("http", "alice:s3cret"), nil, "broker-1.internal:9092")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := p.request(t)
	if req.Method != http.MethodConnect || req.Host != "broker-1.internal:9092" {
		t.Errorf("request %s %s, want CONNECT broker-1.internal:9092", req.Method, req.Host)
	}
	if got := req.Header.Get("Proxy-Authorization"); got != "Basic YWxpY2U6czNjcmV0" {
		t.Errorf("Proxy-Authorization = %q", got)
	}
	buf := make([]byte, len("EARLY-BROKER-BYTES"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "EARLY-BROKER-BYTES" {
		t.Fatalf("read %q, %v; want the bytes sent after the reply", buf, err)
	}
}

func TestConnectRefusals(t *testing.T) {
	cases := []struct {
		name, reply string
		want        error
		text        string
	}{
		{"407", "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 5\r\n\r\ndenied", ErrProxyAuth, "HTTP/1.1 407 Proxy Authentication Required"},
		{"401", "HTTP/1.0 401 Unauthorized\r\n\r\n", ErrProxyAuth, "HTTP/1.0 401 Unauthorized"},
		{"403", "HTTP/1.0 403 Filtered\r\n\r\n", ErrProxyRefused, "HTTP/1.0 403 Filtered"},
		{"502", "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n", ErrProxyRefused, "502 Bad Gateway"},
		{"garbage", "SSH-2.0-OpenSSH\r\n\r\n", nil, "malformed HTTP"},
		{"endless header", "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 70<<10), nil, "exceeds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := startScripted(t, nil, func(*http.Request) string { return c.reply })
			conn, err := dialVia(t, p.url("http", "u:wrong"), nil, "b:9092")
			if err == nil {
				conn.Close()
				t.Fatal("dial succeeded")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("error %v is not %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.text) {
				t.Errorf("error %q does not say %q", err, c.text)
			}
			if strings.Contains(err.Error(), "wrong") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

func TestProxyUnreachable(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, scheme := range []string{"http", "https", "socks5"} {
		_, err := dialVia(t, &url.URL{Scheme: scheme, Host: addr, User: url.UserPassword("u", "pw")}, nil, "b:9092")
		if !errors.Is(err, ErrProxyUnreachable) || !strings.Contains(err.Error(), "proxy unreachable") {
			t.Errorf("%s: error %v, want proxy unreachable", scheme, err)
		}
		if err != nil && strings.Contains(err.Error(), ":pw@") {
			t.Errorf("%s: error shows the password: %v", scheme, err)
		}
	}
}

// TestConnectSilentProxy: a proxy that accepts and never answers is cut
// off by the dial context.
func TestConnectSilentProxy(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	d, _ := New(Config{URL: &url.URL{Scheme: "http", Host: ln.Addr().String()}})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := d.DialContext(ctx, "tcp", "b:9092")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context deadline", err)
	}
}

// TestHTTPSProxy: https:// speaks TLS to the proxy (verified against the
// configured roots) and CONNECT inside it.
func TestHTTPSProxy(t *testing.T) {
	cert, pool := selfSigned(t, "proxy.test")
	p := startScripted(t, func(ln net.Listener) net.Listener {
		return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
	}, func(*http.Request) string { return "HTTP/1.1 200 OK\r\n\r\n" })
	c, err := dialVia(t, p.url("https", ""), &tls.Config{RootCAs: pool, ServerName: "proxy.test"}, "b:9092")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if req := p.request(t); req.Host != "b:9092" {
		t.Errorf("CONNECT %s", req.Host)
	}
	// The wrong roots: the handshake fails and says the proxy is unreachable.
	p2 := startScripted(t, func(ln net.Listener) net.Listener {
		return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
	}, func(*http.Request) string { return "HTTP/1.1 200 OK\r\n\r\n" })
	_, err = dialVia(t, p2.url("https", ""), &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "proxy.test"}, "b:9092")
	if !errors.Is(err, ErrProxyUnreachable) || !strings.Contains(err.Error(), "TLS handshake") {
		t.Errorf("error %v, want a TLS handshake failure to the proxy", err)
	}
}

func TestNoProxy(t *testing.T) {
	n := parseNoProxy([]string{".internal", "example.com", "10.0.0.0/8", "192.168.1.1", " ", "::1"})
	for host, want := range map[string]bool{
		"a.internal": true, "internal": true, "b.a.INTERNAL.": true, "xinternal": false,
		"example.com": true, "kafka.example.com": true, "example.org": false,
		"10.1.2.3": true, "11.0.0.1": false, "192.168.1.1": true, "192.168.1.2": false,
		"127.0.0.1": false, "localhost": false, "[::1]": true,
	} {
		if got := n.match(host); got != want {
			t.Errorf("match(%q) = %v, want %v", host, got, want)
		}
	}
	if !parseNoProxy([]string{"*"}).match("anything") {
		t.Error("* must match everything")
	}
}

// TestNoProxyDialsDirect: a listed destination is dialled without the
// proxy (which here does not even exist).
func TestNoProxyDialsDirect(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	d, _ := New(Config{URL: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}, NoProxy: []string{"127.0.0.0/8"}})
	c, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func selfSigned(t *testing.T, name string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}
