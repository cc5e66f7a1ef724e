//go:build linux

package proxy_test

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/internal/congestion"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestTCPCongestion: with TCPCongestion set, the gateway's side of a
// client connection and its connections to the upstream use that
// algorithm, read back from the kernel with ss (iproute2), whatever the
// host's default; New refuses an algorithm the host does not have.
func TestTCPCongestion(t *testing.T) {
	host, alt, known, err := congestion.Alternative()
	if err != nil {
		t.Skip(err)
	}
	if _, err := congestion.Of(t.Context(), "", known); errors.Is(err, congestion.ErrNoSS) {
		t.Skip(err)
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
			if algs, err = congestion.Of(ctx, tc.filter, known); err != nil {
				t.Fatal(err)
			}
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
