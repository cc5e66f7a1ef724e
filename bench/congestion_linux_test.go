package bench

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/internal/congestion"
)

// TestRelayTCPCongestion: with --tcp-congestion the relay's side of a
// client connection and its connection to the upstream use that
// algorithm, read back with ss, so that the gateway suite compares relay
// and gateway under one algorithm; a name the host lacks fails the
// relay's start rather than measuring the host's default under its name.
func TestRelayTCPCongestion(t *testing.T) {
	_, alt, known, err := congestion.Alternative()
	if err != nil {
		t.Skip(err)
	}
	if _, err := congestion.Of(t.Context(), "", known); errors.Is(err, congestion.ErrNoSS) {
		t.Skip(err)
	}
	up := echoServer(t)
	log := slog.New(slog.DiscardHandler)

	r, routes, err := startRelay([]string{up}, alt, log)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := roundTrip(t, routes[up])
	defer c.Close()
	client := c.LocalAddr().(*net.TCPAddr).Port
	for _, tc := range []struct{ what, filter string }{
		{"the relay's side of a client connection", "dst 127.0.0.1:" + strconv.Itoa(client)},
		{"the relay's connection to the upstream", "dst " + up},
	} {
		algs, err := congestion.Of(t.Context(), tc.filter, known)
		if err != nil {
			t.Fatal(err)
		}
		if len(algs) != 1 || algs[0] != alt {
			t.Errorf("%s: ss says %v, want [%s]", tc.what, algs, alt)
		}
	}

	if bad, _, err := startRelay([]string{up}, "no_such_cc", log); err == nil {
		bad.Close()
		t.Error("startRelay with an algorithm the host lacks: no error")
	}

	cfg, err := gatewayConfig([]string{up}, alt)
	if err != nil {
		t.Fatalf("gatewayConfig(%q): %v", alt, err)
	}
	if cfg.Limits.TCPCongestionControl != alt {
		t.Errorf("gatewayConfig(%q): tcp_congestion_control %q", alt, cfg.Limits.TCPCongestionControl)
	}
}

// echoServer listens on 127.0.0.1 until the test ends and echoes each
// connection until its peer half-closes; it returns the address.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip dials addr and echoes a byte through it, so that both of the
// relay's connections are established.
func roundTrip(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte{7}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	return c
}
