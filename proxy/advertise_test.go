package proxy_test

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/broker"
	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// The advertised address of TestAdvertisedPort: a gateway behind a port
// mapping. Nothing listens there; the clients only read what they are
// told (kcat -L and kgo ask the bootstrap port they were given).
const (
	advHost = "127.0.0.3"
	advPort = 31000
)

// logText is what a syncBuffer holds, as text (a log sink here).
func (s *syncBuffer) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// advSetup is one gateway of TestAdvertisedPort and what its clients
// must be told.
type advSetup struct {
	srv  *proxy.Server
	log  *syncBuffer
	want map[int32]string // node -> advertised host:port
	kgo  []kgo.Opt        // how kgo reaches the bootstrap port
	kcat func(t *testing.T) (string, bool)
}

// TestAdvertisedPort (issue 19 item 4): a listener whose advertise has a
// port tells clients that port for the bootstrap, and on a port-per-broker
// listener in front of an upstream the brokers at their bound ports moved
// by the same offset (advertise port − bound bootstrap port); sni,
// single-port and the built-in broker serve every node at the advertised
// port. kcat -L (librdkafka) and kgo Metadata see it, and the start-up
// log names the advertised host:port.
func TestAdvertisedPort(t *testing.T) {
	for _, mode := range []string{"port-per-broker", "single-port", "builtin", "sni"} {
		t.Run(mode, func(t *testing.T) {
			s := startAdvertised(t, mode)
			checkAdvertisedKgo(t, s)
			if out, ok := s.kcat(t); ok {
				checkAdvertisedKcat(t, s, out)
			}
			boot := net.JoinHostPort(advHost, strconv.Itoa(advPort))
			if mode == "sni" {
				boot = net.JoinHostPort(sniApex, strconv.Itoa(advPort))
			}
			if logs := s.log.logText(); !strings.Contains(logs, "msg=listening") || !strings.Contains(logs, "advertise="+boot) {
				t.Errorf("the start-up log does not name the advertised %s:\n%s", boot, logs)
			}
		})
	}
}

func startAdvertised(t *testing.T, mode string) *advSetup {
	s := &advSetup{log: &syncBuffer{}, want: map[int32]string{}}
	log := slog.New(slog.NewTextHandler(s.log, nil))
	lo := proxy.ListenerOptions{Name: "nat", Listen: "127.0.0.1:0", Advertise: advHost, AdvertisePort: advPort}
	kcatPlain := func(t *testing.T) (string, bool) {
		return kcatRun(t, "", "-b", s.srv.Addr(0).String(), "-L"), true
	}
	s.kcat = kcatPlain
	switch mode {
	case "port-per-broker", "single-port":
		c := startUpstream(t, 3, kfake.SeedTopics(3, "nat"))
		if mode == "single-port" {
			lo.SinglePort = &proxy.SinglePortOptions{VirtualNode: testVirtual}
		}
		s.srv = startServer(t, proxy.Options{Listeners: []proxy.ListenerOptions{lo}, Bootstrap: c.ListenAddrs(), Logger: log})
		if mode == "single-port" {
			s.want[testVirtual] = net.JoinHostPort(advHost, strconv.Itoa(advPort))
			break
		}
		boot := s.srv.Addr(0).(*net.TCPAddr).Port
		for node := range int32(3) {
			a, ok := s.srv.BrokerAddr(0, node)
			if !ok {
				t.Fatalf("node %d has no port after discovery", node)
			}
			s.want[node] = net.JoinHostPort(advHost, strconv.Itoa(a.(*net.TCPAddr).Port+advPort-boot))
		}
	case "builtin":
		b, err := broker.Open(broker.Config{DataDir: t.TempDir(), Fsync: storage.FsyncAlways, AutoCreateTopics: true, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		s.srv = startServer(t, proxy.Options{Listeners: []proxy.ListenerOptions{lo},
			Local:  proxy.LocalFunc(func(remote string) proxy.LocalConn { return b.NewConn(remote) }),
			Logger: log})
		s.want[0] = net.JoinHostPort(advHost, strconv.Itoa(advPort))
	case "sni":
		ca := newTestCA(t)
		c := startUpstream(t, 3, kfake.SeedTopics(3, "nat"))
		lo.Advertise = sniApex
		lo.TLS = &tls.Config{Certificates: []tls.Certificate{ca.wildcardCert(t, sniApex)}, MinVersion: tls.VersionTLS12}
		lo.SNI = &proxy.SNIOptions{BootstrapHost: sniApex, BrokerHost: sniBrokerHost}
		s.srv = startServer(t, proxy.Options{Listeners: []proxy.ListenerOptions{lo}, Bootstrap: c.ListenAddrs(), Logger: log})
		for node := range int32(3) {
			s.want[node] = fmt.Sprintf("b%d.%s:%d", node, sniApex, advPort)
		}
		d := &sniDialer{pool: ca.pool}
		_, port, _ := net.SplitHostPort(s.srv.Addr(0).String())
		s.kgo = []kgo.Opt{kgo.SeedBrokers(net.JoinHostPort(sniApex, port)), kgo.Dialer(d.dial)}
		s.kcat = func(t *testing.T) (string, bool) { return kcatSNI(t, ca, net.JoinHostPort(sniApex, port)) }
	}
	if s.kgo == nil {
		s.kgo = []kgo.Opt{kgo.SeedBrokers(s.srv.Addr(0).String())}
	}
	return s
}

// checkAdvertisedKgo asks the bootstrap port for Metadata with kgo.
func checkAdvertisedKgo(t *testing.T, s *advSetup) {
	t.Helper()
	cl, err := kgo.NewClient(s.kgo...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl.SeedBrokers()[0])
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	got := map[int32]string{}
	for _, b := range resp.Brokers {
		got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	if fmt.Sprint(got) != fmt.Sprint(s.want) {
		t.Errorf("kgo Metadata brokers %v, want %v", got, s.want)
	}
}

var kcatBroker = regexp.MustCompile(`broker (-?\d+) at (\S+)`)

func checkAdvertisedKcat(t *testing.T, s *advSetup, out string) {
	t.Helper()
	got := map[int32]string{}
	for _, m := range kcatBroker.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		got[int32(n)] = m[2]
	}
	if fmt.Sprint(got) != fmt.Sprint(s.want) {
		t.Errorf("kcat -L brokers %v, want %v:\n%s", got, s.want, out)
	}
}

// kcatSNI runs kcat -L against an SNI listener, resolving the SNI names
// to 127.0.0.1 through a private /etc/hosts (as TestSNIKcat does); false
// when that cannot be set up here.
func kcatSNI(t *testing.T, ca *testCA, boot string) (string, bool) {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Log("kcat not installed: SNI checked with kgo only")
		return "", false
	}
	if _, err := exec.LookPath("unshare"); err != nil || os.Geteuid() != 0 {
		t.Log("kcat needs root and unshare to resolve the SNI names: SNI checked with kgo only")
		return "", false
	}
	dir := t.TempDir()
	hosts, caFile := filepath.Join(dir, "hosts"), filepath.Join(dir, "ca.pem")
	lines := "127.0.0.1 localhost " + sniApex + "\n"
	for node := range 3 {
		lines += fmt.Sprintf("127.0.0.1 b%d.%s\n", node, sniApex)
	}
	if err := os.WriteFile(hosts, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "sh", "-c", `mount --bind "$0" /etc/hosts && exec kcat "$@"`, hosts,
		"-X", "security.protocol=ssl", "-X", "ssl.ca.location="+caFile, "-b", boot, "-L")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -L: %v\n%s", err, out)
	}
	return string(out), true
}
