package proxy_test

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// freeUpstreamPort returns an address on upstreamHost that nothing listens
// on (the kernel chose the port, and it was released).
func freeUpstreamPort(t *testing.T) (string, int) {
	t.Helper()
	ln, err := net.Listen("tcp", upstreamHost+":0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	return addr, port
}

// TestUpstreamBackWithinDialTimeout: a client connects while the upstream
// is down; the gateway keeps dialing, the upstream comes up, and the
// client's first request is answered — the outage never reaches it.
func TestUpstreamBackWithinDialTimeout(t *testing.T) {
	addr, port := freeUpstreamPort(t)
	srv := startServer(t, proxy.Options{
		Listeners:   []proxy.ListenerOptions{{Name: "t", Listen: "127.0.0.1:0"}},
		Bootstrap:   []string{addr},
		DialTimeout: 30 * time.Second,
		Logger:      testLogger(t),
	})
	conn, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc := &rawConn{t: t, c: conn, f: kmsg.NewRequestFormatter()}
	rc.corr++
	if _, err := conn.Write(rc.f.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), rc.corr)); err != nil {
		t.Fatal(err)
	}
	// The request is waiting in the gateway; now the upstream starts.
	startUpstream(t, 1, kfake.Ports(port), kfake.ListenFn(func(network, a string) (net.Listener, error) {
		_, p, _ := net.SplitHostPort(a)
		return net.Listen(network, net.JoinHostPort(upstreamHost, p))
	}))
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("no answer once the upstream came up: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, frame); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	if err := resp.ReadFrom(frame[4:]); err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions after the upstream came up: %v %+v", err, resp)
	}
}

// TestUpstreamDownResetsClient: when the upstream stays away past the dial
// timeout, the client's connection is reset rather than closed, so its
// first read fails with a network error (which clients retry) instead of
// EOF (which franz-go takes for a TLS or SASL misconfiguration and does
// not retry).
func TestUpstreamDownResetsClient(t *testing.T) {
	addr, _ := freeUpstreamPort(t)
	srv := startServer(t, proxy.Options{
		Listeners:   []proxy.ListenerOptions{{Name: "t", Listen: "127.0.0.1:0"}},
		Bootstrap:   []string{addr},
		DialTimeout: 300 * time.Millisecond,
		Logger:      testLogger(t),
	})
	conn, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f := kmsg.NewRequestFormatter()
	if _, err := conn.Write(f.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = conn.Read(make([]byte, 4))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("first read with the upstream down: %v, want ECONNRESET", err)
	}
}

// TestUpstreamDownResetsTLSClient: the same through a TLS listener. The
// reset must come with no TLS close_notify before it: a client reads the
// alert as EOF (franz-go: "broker closed the connection immediately
// during api versions negotiation ... is TLS missing?", not retried)
// before it sees the reset. TLS 1.2, so that the server sends nothing
// after its handshake but what this is about, and the socket under the
// client's TLS is read directly: its first read must be the reset, with
// no byte before it.
func TestUpstreamDownResetsTLSClient(t *testing.T) {
	ca := newTestCA(t)
	addr, _ := freeUpstreamPort(t)
	srv := startServer(t, proxy.Options{
		Listeners: []proxy.ListenerOptions{{Name: "t", Listen: "127.0.0.1:0",
			TLS: &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "127.0.0.1", net.IPv4(127, 0, 0, 1))}}}},
		Bootstrap:   []string{addr},
		DialTimeout: 300 * time.Millisecond,
		Logger:      testLogger(t),
	})
	raw, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(30 * time.Second))
	tc := tls.Client(raw, &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1", MaxVersion: tls.VersionTLS12})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	f := kmsg.NewRequestFormatter()
	if _, err := tc.Write(f.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := raw.Read(buf)
	if n > 0 {
		t.Fatalf("%d bytes before the reset (TLS record type %d; 21 is an alert: close_notify, read as EOF)", n, buf[0])
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("first read with the upstream down: %v, want ECONNRESET", err)
	}
}

// TestSinglePortUpstreamDownAfterApiVersions: a single-port session whose
// upstream fails after the client's ApiVersions was answered, before any
// other answer, resets the connection too. franz-go does not count the
// ApiVersions answer (nor SASL's) as a response on the connection: EOF on
// the next read is its ErrFirstReadEOF ("is SASL missing?"), which fails
// a producer's records instead of retrying them.
func TestSinglePortUpstreamDownAfterApiVersions(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "t"))
	srv := startServer(t, proxy.Options{
		Listeners: []proxy.ListenerOptions{{Name: "t", Listen: "127.0.0.1:0",
			SinglePort: &proxy.SinglePortOptions{}}},
		Bootstrap:   c.ListenAddrs(),
		DialTimeout: 300 * time.Millisecond,
		Logger:      testLogger(t),
	})
	rc := dialRaw(t, srv.Addr(0).String())
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
	if _, _, ok := rc.roundTrip(av); !ok {
		t.Fatal("no ApiVersions answer with the upstream up")
	}
	c.Close() // the upstream goes away
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionTimeoutMillis = 60000
	rc.corr++
	rc.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := rc.c.Write(rc.f.AppendRequest(nil, req, rc.corr)); err != nil {
		t.Fatal(err)
	}
	n, err := rc.c.Read(make([]byte, 4))
	if n > 0 {
		t.Fatalf("InitProducerID answered with the upstream down (%d bytes); the test needs a request that fails", n)
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after ApiVersions with the upstream down: %v, want ECONNRESET", err)
	}
}
