package proxy_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// upstreamHost is where the kfake brokers listen and what they advertise.
// The gateway listens on 127.0.0.1, so any "127.0.0.2" a client receives is
// a leaked upstream address (Linux routes all of 127/8 to loopback).
const upstreamHost = "127.0.0.2"

func listenUpstream(network, _ string) (net.Listener, error) {
	return net.Listen(network, upstreamHost+":0")
}

// startUpstream starts a kfake cluster of n brokers on upstreamHost.
func startUpstream(t testing.TB, n int, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(n), kfake.ListenFn(listenUpstream)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// testLogger writes gateway logs to the test log only when -v is given, so
// failures stay readable.
func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startGateway starts tollgate in front of cluster c on 127.0.0.1 with
// kernel-chosen ports, and stops it at the end of the test.
func startGateway(t testing.TB, c *kfake.Cluster, mod ...func(*proxy.Options)) *proxy.Server {
	t.Helper()
	return startServer(t, proxy.Options{
		Listeners: []proxy.ListenerOptions{{Name: "test", Listen: "127.0.0.1:0", BrokerPortBase: 0}},
		Bootstrap: c.ListenAddrs(),
		Logger:    testLogger(t),
	}, mod...)
}

// startServer applies mod to opts, starts the gateway, and shuts it down
// at the end of the test (before cleanups registered earlier run).
func startServer(t testing.TB, opts proxy.Options, mod ...func(*proxy.Options)) *proxy.Server {
	t.Helper()
	for _, m := range mod {
		m(&opts)
	}
	srv, err := proxy.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
	})
	return srv
}

// recorder is a kgo dialer that keeps every byte the client receives, and
// the address of every connection the client opens.
type recorder struct {
	mu    sync.Mutex
	recv  bytes.Buffer
	dials []string
}

func (r *recorder) dial(ctx context.Context, network, host string) (net.Conn, error) {
	r.mu.Lock()
	r.dials = append(r.dials, host)
	r.mu.Unlock()
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, r: r}, nil
}

type recordingConn struct {
	net.Conn
	r *recorder
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.r.mu.Lock()
	c.r.recv.Write(p[:n])
	c.r.mu.Unlock()
	return n, err
}

// assertNoLeak fails if the client received an upstream host, or dialed
// anything but the gateway.
func (r *recorder) assertNoLeak(t testing.TB, c *kfake.Cluster) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if bytes.Contains(r.recv.Bytes(), []byte(upstreamHost)) {
		t.Errorf("client received the upstream host %s (%d bytes recorded)", upstreamHost, r.recv.Len())
	}
	for _, a := range c.ListenAddrs() {
		_, p, _ := net.SplitHostPort(a)
		port, _ := strconv.Atoi(p)
		// A port travels as int32 (or uint16 in DescribeQuorum) right after
		// its host string.
		if bytes.Contains(r.recv.Bytes(), append([]byte(upstreamHost), 0, 0, byte(port>>8), byte(port))) {
			t.Errorf("client received upstream address %s", a)
		}
	}
	for _, d := range r.dials {
		if h, _, _ := net.SplitHostPort(d); h != "127.0.0.1" {
			t.Errorf("client dialed %s, not the gateway", d)
		}
	}
	if r.recv.Len() == 0 {
		t.Error("recorder saw no bytes: the leak check checked nothing")
	}
}

// newClient is a kgo client through the gateway that records what it reads.
func newClient(t testing.TB, srv *proxy.Server, rec *recorder, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(srv.Addr(0).String())}, opts...)
	if rec != nil {
		opts = append(opts, kgo.Dialer(rec.dial))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

type proxyOptions = proxy.Options
