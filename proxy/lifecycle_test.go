package proxy_test

import (
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestAcksZeroDoesNotStall: Produce with acks=0 gets no response; requests
// pipelined behind it on the same connection are still answered, in order,
// and the records land.
func TestAcksZeroDoesNotStall(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "fire"))
	srv := startGateway(t, c)
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, srv, nil, kgo.DefaultProduceTopic("fire"), kgo.RequiredAcks(kgo.NoAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0))
	const n = 500
	for i := range n {
		cl.Produce(ctx, kgo.StringRecord(strconv.Itoa(i)), nil)
		if i%100 == 0 {
			// A request that needs a response, queued behind acks=0 ones.
			if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
				t.Fatalf("metadata after acks=0 produce: %v", err)
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "all acks=0 records in the log", func() bool {
		return c.PartitionInfo("fire", 0).HighWatermark == n
	})
}

// TestGracefulShutdown: a request in flight when shutdown starts is
// answered; then the listener is gone and the connection closes.
func TestGracefulShutdown(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "slow"))
	srv, err := proxy.New(proxy.Options{
		Listeners: []proxy.ListenerOptions{{Name: "t", Listen: "127.0.0.1:0", BrokerPortBase: 0}},
		Bootstrap: c.ListenAddrs(),
		Logger:    testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, srv, nil, kgo.DefaultProduceTopic("slow"))
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	entered := make(chan struct{})
	release := make(chan struct{})
	c.ControlKey(0, func(kmsg.Request) (kmsg.Response, error, bool) {
		close(entered)
		<-release
		return nil, nil, false // then handle normally
	})
	res := make(chan error, 1)
	go func() { res <- cl.ProduceSync(ctx, kgo.StringRecord("in-flight")).FirstErr() }()
	<-entered
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }()
	// Shutdown closes the listeners at once; the in-flight produce waits.
	waitFor(t, ctx, "bootstrap listener closed", func() bool {
		conn, err := net.DialTimeout("tcp", srv.Addr(0).String(), 100*time.Millisecond)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
	close(release)
	if err := <-res; err != nil {
		t.Fatalf("in-flight produce failed during drain: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if hw := c.PartitionInfo("slow", 0).HighWatermark; hw != 1 {
		t.Fatalf("high watermark %d, want 1", hw)
	}
}

// TestConnectionLimits: connections over max_connections_per_address are
// closed at once; a slot freed is reusable.
func TestConnectionLimits(t *testing.T) {
	c := startUpstream(t, 1)
	srv := startGateway(t, c, func(o *proxy.Options) { o.MaxConnectionsPerAddress = 2 })
	ctx := ctxT(t, 10*time.Second)
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", srv.Addr(0).String())
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	// A connection is counted once its session starts; prove each works.
	alive := func(conn net.Conn) bool {
		rc := &rawConn{t: t, c: conn, f: kmsg.NewRequestFormatter()}
		_, _, ok := rc.roundTrip(kmsg.NewPtrApiVersionsRequest())
		return ok
	}
	a, b := dial(), dial()
	defer a.Close()
	if !alive(a) || !alive(b) {
		t.Fatal("connections under the cap were refused")
	}
	if third := dial(); alive(third) {
		t.Fatal("a third connection from one address was served with a cap of 2")
	}
	b.Close()
	waitFor(t, ctx, "a freed slot", func() bool { conn := dial(); defer conn.Close(); return alive(conn) })
}

// TestClientLeavesSilentUpstream: a client sends a request and closes
// while the upstream never answers; the session (and its upstream
// connection) ends at once instead of waiting for the answer forever.
func TestClientLeavesSilentUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", upstreamHost+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	upClosed := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(io.Discard, c) // read everything, answer nothing
				upClosed <- struct{}{}
				c.Close()
			}()
		}
	}()
	lb := &logBuffer{}
	srv := startServer(t, proxy.Options{
		Listeners:   []proxy.ListenerOptions{{Name: "t", Listen: "127.0.0.1:0"}},
		Bootstrap:   []string{ln.Addr().String()},
		DialTimeout: time.Second,
	}, withLog(lb))
	conn, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	rc := &rawConn{t: t, c: conn, f: kmsg.NewRequestFormatter()}
	rc.corr++
	conn.Write(rc.f.AppendRequest(nil, kmsg.NewPtrMetadataRequest(), rc.corr))
	time.Sleep(50 * time.Millisecond) // the request reaches the upstream
	conn.Close()
	ctx := ctxT(t, 5*time.Second)
	waitFor(t, ctx, "the session to close", func() bool { return strings.Contains(lb.String(), "connection closed") })
	select {
	case <-upClosed:
	case <-ctx.Done():
		t.Fatal("the upstream connection stayed open after the client left")
	}
}
