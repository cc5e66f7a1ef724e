//go:build linux

package proxy_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestTCPCongestion: with TCPCongestion set, the gateway's side of a
// client connection and its connections to the upstream use that
// algorithm, read back from the kernel with ss (iproute2), whatever the
// host's default; New refuses an algorithm the host does not have.
func TestTCPCongestion(t *testing.T) {
	if _, err := exec.LookPath("ss"); err != nil {
		t.Skip("no ss (iproute2, installed by make deps): cannot read a socket's congestion control")
	}
	raw, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		t.Skipf("no /proc/sys/net/ipv4/tcp_congestion_control: %v", err)
	}
	host := strings.TrimSpace(string(raw))
	avail, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		t.Skipf("no /proc/sys/net/ipv4/tcp_available_congestion_control: %v", err)
	}
	known := strings.Fields(string(avail))
	alt := "reno" // always built in
	if host == "reno" {
		alt = "cubic"
	}
	if !slices.Contains(known, alt) {
		t.Skipf("the host has only %v: no algorithm other than its default %q to set", known, host)
	}
	c := startUpstream(t, 1)
	srv := startGateway(t, c, func(o *proxy.Options) { o.TCPCongestion = alt })
	ctx := ctxT(t, 30*time.Second)

	conn, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := conn.LocalAddr().(*net.TCPAddr).Port
	if err := newClient(t, srv, nil).Ping(ctx); err != nil { // the gateway dials the upstream
		t.Fatal(err)
	}
	upHost, upPort, _ := net.SplitHostPort(c.ListenAddrs()[0])
	for _, tc := range []struct{ what, filter string }{
		{"the gateway's side of a client connection", "dst 127.0.0.1:" + strconv.Itoa(client)},
		{"the gateway's connections to the upstream", "dst " + upHost + ":" + upPort},
	} {
		var algs []string
		waitFor(t, ctx, tc.what+" in ss", func() bool {
			algs = congestionOf(t, tc.filter, known)
			return len(algs) > 0 && !slices.Contains(algs, "") // "": not listed yet, or no algorithm shown
		})
		for _, a := range algs {
			if a != alt {
				t.Errorf("%s: congestion control %q, want %q (host default %q); ss says %v", tc.what, a, alt, host, algs)
			}
		}
	}

	_, err = proxy.New(proxy.Options{
		Listeners:     []proxy.ListenerOptions{{Name: "test", Listen: "127.0.0.1:0"}},
		Bootstrap:     c.ListenAddrs(),
		TCPCongestion: "no_such_cc",
	})
	if err == nil || !strings.Contains(err.Error(), `"no_such_cc" cannot be set`) || !strings.Contains(err.Error(), "this host has: ") {
		t.Fatalf("New with an algorithm the host lacks: %v, want an error naming it and what the host has", err)
	}
}

// congestionOf returns the congestion control of every established TCP
// socket ss lists for filter: the word of each socket's -i line that is
// one of the known algorithms ("" where none is).
func congestionOf(t *testing.T, filter string, known []string) []string {
	t.Helper()
	args := append([]string{"-Htin", "state", "established"}, strings.Fields(filter)...)
	out, err := exec.CommandContext(context.Background(), "ss", args...).Output()
	if err != nil {
		t.Fatalf("ss %s: %v", strings.Join(args, " "), err)
	}
	var algs []string
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || (line[0] != ' ' && line[0] != '\t') {
			continue
		}
		alg := ""
		for _, w := range strings.Fields(line) {
			if slices.Contains(known, w) {
				alg = w
				break
			}
		}
		algs = append(algs, alg)
	}
	return algs
}
