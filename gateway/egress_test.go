package gateway

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/egress"
)

// Addresses of the egress tests (Linux routes all of 127/8 to loopback):
// the upstream brokers listen on egressUpstream, and the proxies connect
// out from egressProxyOut, so a connection the upstream accepts from any
// other address did not come through the proxy.
const (
	egressUpstream = "127.0.0.2"
	egressProxyOut = "127.0.0.3"
)

// acceptLog records the remote address of every connection the upstream
// brokers accept.
type acceptLog struct {
	mu    sync.Mutex
	peers []string
}

type loggingListener struct {
	net.Listener
	log *acceptLog
}

func (l loggingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.log.mu.Lock()
		l.log.peers = append(l.log.peers, c.RemoteAddr().String())
		l.log.mu.Unlock()
	}
	return c, err
}

// reset forgets the connections accepted so far.
func (a *acceptLog) reset() {
	a.mu.Lock()
	a.peers = nil
	a.mu.Unlock()
}

func (a *acceptLog) assertAllFrom(t *testing.T, ip string) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.peers) == 0 {
		t.Fatal("the upstream accepted no connection: the check checked nothing")
	}
	for _, p := range a.peers {
		if h, _, _ := net.SplitHostPort(p); h != ip {
			t.Errorf("the upstream accepted a connection from %s, not through the proxy (%s)", p, ip)
		}
	}
}

// startEgressUpstream starts a 3-broker kfake on egressUpstream whose
// accepted connections are logged.
func startEgressUpstream(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, *acceptLog) {
	t.Helper()
	log := &acceptLog{}
	listen := func(network, _ string) (net.Listener, error) {
		ln, err := net.Listen(network, egressUpstream+":0")
		if err != nil {
			return nil, err
		}
		return loggingListener{ln, log}, nil
	}
	opts = append([]kfake.Opt{kfake.NumBrokers(3), kfake.ListenFn(listen), kfake.SeedTopics(3, "egress")}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	spreadLeaders(t, c, "egress", 3)
	return c, log
}

// spreadLeaders moves partition p of topic to node p (kfake picks
// leaders at random), so that each of the n brokers leads one.
func spreadLeaders(t *testing.T, c *kfake.Cluster, topic string, n int) {
	t.Helper()
	for p := range n {
		if err := c.MoveTopicPartition(topic, int32(p), int32(p)); err != nil {
			t.Fatalf("move %s[%d] to node %d: %v", topic, p, p, err)
		}
	}
}

// freePort asks the kernel for a free port on 127.0.0.1 (the proxies
// take a port number in their configuration, not a listener).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// runningProxy is a proxy process the test started.
type runningProxy struct {
	url  string
	logs func() string
}

// startTinyproxy runs Debian's tinyproxy (HTTP CONNECT) on a free port,
// connecting out from egressProxyOut, with Basic credentials if given.
// Its log goes to stdout (-d, no LogFile).
func startTinyproxy(t *testing.T, user, pass string) runningProxy {
	t.Helper()
	dir := t.TempDir()
	out := &syncBuffer{}
	port := startOnFreePort(t, out, func(port int) (string, []string) {
		conf := fmt.Sprintf("Port %d\nListen 127.0.0.1\nBind %s\nTimeout 600\nLogLevel Info\nMaxClients 100\nAllow 127.0.0.1\n", port, egressProxyOut)
		if user != "" {
			conf += fmt.Sprintf("BasicAuth %s %s\n", user, pass)
		}
		file := filepath.Join(dir, "tinyproxy.conf")
		if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		return "tinyproxy", []string{"-d", "-c", file}
	})
	u := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	if user != "" {
		u.User = url.UserPassword(user, pass)
	}
	return runningProxy{url: u.String(), logs: out.String}
}

// startDanted runs Debian's dante-server (SOCKS5) on a free port,
// connecting out from egressProxyOut. With user set it requires
// username authentication, which dante checks against the system's
// users (the caller creates one).
func startDanted(t *testing.T, user, pass string) runningProxy {
	t.Helper()
	return startDantedHosts(t, user, pass, "")
}

// startDantedHosts is startDanted with, if hosts is set, that file as
// dante's /etc/hosts: bind-mounted in a mount namespace of its own
// (root only), so names resolve for the proxy and nobody else.
func startDantedHosts(t *testing.T, user, pass, hosts string) runningProxy {
	t.Helper()
	dir := t.TempDir()
	logFile := filepath.Join(dir, "danted.log")
	method := "none"
	if user != "" {
		method = "username"
	}
	out := &syncBuffer{}
	port := startOnFreePort(t, out, func(port int) (string, []string) {
		conf := fmt.Sprintf(`logoutput: %s
internal: 127.0.0.1 port = %d
external: %s
clientmethod: none
socksmethod: %s
user.privileged: root
user.unprivileged: nobody
client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 log: connect disconnect error }
socks pass { from: 127.0.0.0/8 to: 0.0.0.0/0 log: connect disconnect error }
`, logFile, port, egressProxyOut, method)
		file := filepath.Join(dir, "danted.conf")
		if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if hosts == "" {
			return "danted", []string{"-f", file, "-N", "1"}
		}
		return "unshare", []string{"--mount", "sh", "-c", `mount --bind "$0" /etc/hosts && exec danted "$@"`, hosts, "-f", file, "-N", "1"}
	})
	u := url.URL{Scheme: "socks5", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	if user != "" {
		u.User = url.UserPassword(user, pass)
	}
	return runningProxy{url: u.String(), logs: func() string {
		b, _ := os.ReadFile(logFile)
		return string(b) + out.String()
	}}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// egressUser is the system user of dante's username method, one per test
// process: two runs of this package at once (two worktrees, -count with
// parallel packages) must not delete each other's user.
var egressUser = fmt.Sprintf("tg-egress-%d", os.Getpid())

// systemUser creates a throw-away system user for dante's username
// method (root only) and removes it at the end of the test.
func systemUser(t *testing.T, name, pass string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: dante's username method checks system users, and the test creates one")
	}
	if _, err := user.Lookup(name); err == nil {
		exec.Command("userdel", name).Run() // left over from a killed run
	}
	if out, err := exec.Command("useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Skipf("useradd %s: %v %s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	cmd := exec.Command("chpasswd")
	cmd.Stdin = strings.NewReader(name + ":" + pass + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chpasswd: %v %s", err, out)
	}
}

// TestEgressThroughProxies: a gateway whose upstream.proxy is a real
// tinyproxy (HTTP CONNECT) or dante (SOCKS5), with and without proxy
// credentials, and once with TLS to the upstream inside the tunnel:
// clients produce to and consume from partitions on all three brokers;
// the proxy's own log shows a tunnel to every broker; and the upstream
// accepted every connection from the proxy's outgoing address only, so
// the gateway opened no direct upstream connection (discovery included).
func TestEgressThroughProxies(t *testing.T) {
	cases := []struct {
		name  string
		start func(t *testing.T) runningProxy
		// tunnel reports whether the proxy's log shows a tunnel to addr.
		tunnel func(logs, addr string) bool
		tls    bool
	}{
		{"tinyproxy", func(t *testing.T) runningProxy { return startTinyproxy(t, "", "") }, tinyproxyTunnel, false},
		{"tinyproxy basic auth", func(t *testing.T) runningProxy { return startTinyproxy(t, "alice", "s3cret") }, tinyproxyTunnel, false},
		{"tinyproxy upstream tls", func(t *testing.T) runningProxy { return startTinyproxy(t, "", "") }, tinyproxyTunnel, true},
		{"danted", func(t *testing.T) runningProxy { return startDanted(t, "", "") }, dantedTunnel, false},
		{"danted username", func(t *testing.T) runningProxy {
			systemUser(t, egressUser, "pw-0123")
			return startDanted(t, egressUser, "pw-0123")
		}, dantedTunnel, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var upTLS string
			var kopts []kfake.Opt
			if tc.tls {
				var cert tls.Certificate
				upTLS, cert = upstreamCA(t)
				kopts = append(kopts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
			}
			p := tc.start(t)
			c, accepted := startEgressUpstream(t, kopts...)
			tlsLine := ""
			if upTLS != "" {
				tlsLine = "\n  tls: { ca: " + upTLS + " }"
			}
			g := startFrom(t, fmt.Sprintf(`
listeners: [{ listen: "127.0.0.1:0", broker_port_base: 0 }]
upstream:
  bootstrap: [%s]
  proxy: %q%s
admin: { listen: "off" }
`, strings.Join(c.ListenAddrs(), ", "), p.url, tlsLine))
			produceConsume(t, g)
			accepted.assertAllFrom(t, egressProxyOut)
			logs := p.logs()
			for _, addr := range c.ListenAddrs() {
				if !tc.tunnel(logs, addr) {
					t.Errorf("the proxy's log shows no tunnel to broker %s:\n%s", addr, logs)
				}
			}
		})
	}
}

// tinyproxyTunnel: tinyproxy logs each request line,
// "Request (file descriptor N): CONNECT 127.0.0.2:PORT HTTP/1.1".
func tinyproxyTunnel(logs, addr string) bool {
	return strings.Contains(logs, "CONNECT "+addr+" HTTP/1.1")
}

// dantedTunnel: dante logs a pass with dotted host.port pairs, the
// destination last: "tcp/connect [: client proxy -> 127.0.0.3.N 127.0.0.2.PORT".
func dantedTunnel(logs, addr string) bool {
	h, p, _ := net.SplitHostPort(addr)
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "tcp/connect [") && strings.HasSuffix(strings.TrimSpace(line), " "+h+"."+p) {
			return true
		}
	}
	return false
}

// produceConsume produces 30 records over the topic's three partitions
// (one led by each broker) and consumes them back through g.
func produceConsume(t *testing.T, g *Gateway) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seed := kgo.SeedBrokers(g.Server.Addr(0).String())
	cl, err := kgo.NewClient(seed, kgo.DefaultProduceTopic("egress"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	parts := map[int32]bool{}
	for i := range 30 {
		r := kgo.StringRecord(fmt.Sprint(i))
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		parts[r.Partition] = true
	}
	if len(parts) != 3 {
		t.Errorf("produced to %d partitions, want 3", len(parts))
	}
	cons, err := kgo.NewClient(seed, kgo.ConsumeTopics("egress"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < 30; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 30", got)
		}
		got += fs.NumRecords()
	}
}

// TestEgressErrors: against the real proxies, wrong credentials and a
// proxy that is not there fail with errors that say so.
func TestEgressErrors(t *testing.T) {
	dial := func(t *testing.T, raw, addr string) error {
		u, err := configs.ParseProxyURL(raw)
		if err != nil {
			t.Fatal(err)
		}
		d, err := egress.New(egress.Config{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	}
	target, err := net.Listen("tcp", egressUpstream+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	t.Run("tinyproxy wrong password", func(t *testing.T) {
		p := startTinyproxy(t, "alice", "s3cret")
		wrong := strings.Replace(p.url, "s3cret", "guess", 1)
		err := dial(t, wrong, target.Addr().String())
		// tinyproxy answers 401 where RFC 9110 says 407.
		if !errors.Is(err, egress.ErrProxyAuth) || !strings.Contains(err.Error(), "HTTP/1.0 401 Unauthorized") {
			t.Errorf("error %v, want proxy authentication failed with the proxy's status line", err)
		}
		if strings.Contains(err.Error(), "guess") {
			t.Errorf("error shows the password: %v", err)
		}
	})
	t.Run("tinyproxy refused port", func(t *testing.T) {
		p := startTinyproxy(t, "", "")
		err := dial(t, p.url, "127.0.0.2:1") // nothing listens there: the proxy answers with an error status
		if !errors.Is(err, egress.ErrProxyRefused) || !strings.Contains(err.Error(), "HTTP/1.") {
			t.Errorf("error %v, want the proxy's status line", err)
		}
	})
	t.Run("danted wrong password", func(t *testing.T) {
		systemUser(t, egressUser, "pw-0123")
		p := startDanted(t, egressUser, "pw-0123")
		err := dial(t, strings.Replace(p.url, "pw-0123", "nope", 1), target.Addr().String())
		if !errors.Is(err, egress.ErrProxyAuth) {
			t.Errorf("error %v, want proxy authentication failed", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		err := dial(t, fmt.Sprintf("socks5://127.0.0.1:%d", freePort(t)), target.Addr().String())
		if !errors.Is(err, egress.ErrProxyUnreachable) {
			t.Errorf("error %v, want proxy unreachable", err)
		}
	})
}

// upstreamCA writes a CA file and returns it with a broker certificate
// for egressUpstream signed by it.
func upstreamCA(t *testing.T) (string, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egress test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP(egressUpstream)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestEgressSOCKSResolvesNames: with socks5:// the gateway sends host
// names to the proxy, which resolves them (socks5h): the bootstrap name
// here resolves only inside dante's own mount namespace, never for the
// gateway, and the cluster is reached through it.
func TestEgressSOCKSResolvesNames(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: dante gets a private /etc/hosts in a mount namespace (unshare -m)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) not installed")
	}
	const name = "kafka-egress.test"
	if addrs, err := net.LookupHost(name); err == nil {
		t.Fatalf("%s resolves here (%v): the test would prove nothing", name, addrs)
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"+egressUpstream+" "+name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startDantedHosts(t, "", "", hosts)
	c, accepted := startEgressUpstream(t)
	_, port, _ := net.SplitHostPort(c.ListenAddrs()[0])
	g := startFrom(t, fmt.Sprintf(`
listeners: [{ listen: "127.0.0.1:0", broker_port_base: 0 }]
upstream: { bootstrap: ["%s:%s"], proxy: %q }
admin: { listen: "off" }
`, name, port, p.url))
	produceConsume(t, g)
	accepted.assertAllFrom(t, egressProxyOut)
}
