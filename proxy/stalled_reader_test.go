package proxy_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestStalledReaderClosed: a client that sends Fetch requests for data
// that exists and then stops reading its socket is closed once a response
// write makes no progress for the frame timeout, on every write path
// (Fetch v11 spliced whole, v12 streamed with its record sets spliced,
// the built-in broker's sendfile), and the close is counted as the
// client's (reason write_timeout), never as an upstream failure. A
// client that reads meanwhile is served.
func TestStalledReaderClosed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version int16
		builtin bool
	}{
		{"upstream-fetch-v11-splice", 11, false},
		{"upstream-fetch-v12-stream", 12, false},
		{"builtin-fetch-v12", 12, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			mod := func(o *proxy.Options) {
				o.Hooks = metrics.New(reg)
				o.FrameTimeout = time.Second
			}
			var srv *proxy.Server
			if tc.builtin {
				srv = startBuiltinWith(t, mod)
			} else {
				c := startUpstream(t, 1, kfake.SeedTopics(1, "big"))
				srv = startGateway(t, c, mod)
			}
			ctx := ctxT(t, 60*time.Second)
			cl := newClient(t, srv, nil, kgo.DefaultProduceTopic("big"), kgo.AllowAutoTopicCreation())
			// 8 MiB in the partition: far more than the socket buffers hold.
			produceRandom(t, ctx, cl, 128)

			addr := srv.Addr(0).String()
			// A small receive buffer, set before connecting (the window
			// is negotiated then), so the gateway's writes block soon.
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
			}}
			conn, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("stalled"))
			var frames []byte
			for i := range 8 {
				req := kmsg.NewPtrFetchRequest()
				req.SetVersion(tc.version)
				req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = -1, 100, 16<<20, -1
				tp := kmsg.NewFetchRequestTopic()
				tp.Topic = "big"
				p := kmsg.NewFetchRequestTopicPartition()
				p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch, p.LogStartOffset = 0, 0, 8<<20, -1, -1
				tp.Partitions = append(tp.Partitions, p)
				req.Topics = append(req.Topics, tp)
				frames = append(frames, f.AppendRequest(nil, req, int32(i+1))...) // AppendRequest sizes from dst[0]
			}
			if _, err := conn.Write(frames); err != nil {
				t.Fatal(err)
			}
			// The stalled connection does not hold another client up.
			if err := cl.Ping(ctx); err != nil {
				t.Fatalf("another client was not served while one stalled: %v", err)
			}
			waitFor(t, ctx, "the stalled connection's close to be counted", func() bool {
				return counterValue(t, reg, "tollgate_connection_closes_total", nil) >= 1
			})
			if got := counterValue(t, reg, "tollgate_connection_closes_total", map[string]string{"reason": "write_timeout"}); got != 1 {
				t.Errorf("closes with reason write_timeout = %v, want 1 (all closes: %v, upstream_error: %v, client_error: %v)", got,
					counterValue(t, reg, "tollgate_connection_closes_total", nil),
					counterValue(t, reg, "tollgate_connection_closes_total", map[string]string{"reason": "upstream_error"}),
					counterValue(t, reg, "tollgate_connection_closes_total", map[string]string{"reason": "client_error"}))
			}
			if !closedWithin(conn, 30*time.Second) {
				t.Fatal("the stalled connection stayed open")
			}
			if err := cl.Ping(context.Background()); err != nil {
				t.Fatalf("the reading client after the close: %v", err)
			}
		})
	}
}

// TestStalledReaderSendBuffer: the bytes the kernel queues for a client
// that stopped reading are bounded, not the megabytes autotuning grows a
// send buffer to (net.ipv4.tcp_wmem's maximum): by default by the unsent
// limit (SocketUnsentBytes, TCP_NOTSENT_LOWAT) with the buffer autotuned,
// or by a fixed SO_SNDBUF (SocketSendBufferBytes, the kernel doubling it).
// Without either, the queue holds megabytes (the "none" case checks the
// test can tell).
func TestStalledReaderSendBuffer(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "big"))
	ctx := ctxT(t, 120*time.Second)
	produceRandom(t, ctx, newClient(t, startGateway(t, c), nil, kgo.DefaultProduceTopic("big")), 128)
	for _, tc := range []struct {
		name           string
		sndbuf, unsent int
		limit          int64 // at most; 0: more than 1 MiB
	}{
		// What waits unsent, plus what is in flight to a 4 KiB receive
		// window and one more segment the kernel takes past the limit.
		{"default", 0, 0, 128<<10 + 128<<10},
		{"sndbuf", 64 << 10, -1, 2*64<<10 + 64<<10},
		{"none", -1, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startGateway(t, c, func(o *proxy.Options) { o.SocketSendBufferBytes, o.SocketUnsentBytes = tc.sndbuf, tc.unsent })
			conn := stallFetch(t, srv.Addr(0).String(), 12)
			defer conn.Close()
			local := conn.LocalAddr().(*net.TCPAddr).Port
			queued := settledSendQueue(t, ctx, local)
			t.Logf("the kernel holds %d bytes for the stalled client", queued)
			if tc.limit == 0 {
				if queued <= 1<<20 {
					t.Fatalf("with no limit the kernel holds %d bytes, want more than 1 MiB: the other cases bound nothing", queued)
				}
				return
			}
			if queued > tc.limit {
				t.Fatalf("the kernel holds %d bytes for the stalled client, want at most %d (SO_SNDBUF %d, unsent %d)", queued, tc.limit, tc.sndbuf, tc.unsent)
			}
		})
	}
}

// stallFetch connects with a 4 KiB receive buffer, sends one Fetch of
// the given version for partition 0 of "big" from offset 0, and reads
// nothing.
func stallFetch(t *testing.T, addr string, version int16) net.Conn {
	t.Helper()
	return stallFetches(t, addr, version, 1)
}

// stallFetches is stallFetch sending n Fetches at once; wrap, if given,
// wraps the connection first (a TLS client).
func stallFetches(t *testing.T, addr string, version int16, n int, wrap ...func(net.Conn) net.Conn) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wrap {
		conn = w(conn)
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = -1, 100, 16<<20, -1
	tp := kmsg.NewFetchRequestTopic()
	tp.Topic = "big"
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch, p.LogStartOffset = 0, 0, 8<<20, -1, -1
	tp.Partitions = append(tp.Partitions, p)
	req.Topics = append(req.Topics, tp)
	var frames []byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("stalled"))
	for i := range n {
		frames = append(frames, f.AppendRequest(nil, req, int32(i+1))...) // AppendRequest sizes from dst[0]
	}
	if _, err := conn.Write(frames); err != nil {
		t.Fatal(err)
	}
	return conn
}

// produceRandom produces n incompressible 64 KiB records (kgo compresses
// batches) to cl's default topic.
func produceRandom(t *testing.T, ctx context.Context, cl *kgo.Client, n int) {
	t.Helper()
	val := make([]byte, 64<<10)
	rand.Read(val)
	for range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// settledSendQueue is the send queue of the gateway's side of the
// client connection from peerPort, once it stops growing.
func settledSendQueue(t *testing.T, ctx context.Context, peerPort int) int64 {
	t.Helper()
	var queued, last int64 = 0, -1
	waitFor(t, ctx, "the gateway's send queue to settle", func() bool {
		last, queued = queued, sendQueue(t, peerPort)
		time.Sleep(100 * time.Millisecond)
		return queued > 0 && queued == last
	})
	return queued
}

// sendQueue is the send queue (tx_queue in /proc/net/tcp) of the socket
// whose peer is 127.0.0.1:peerPort: the gateway's side of a client's
// connection.
func sendQueue(t *testing.T, peerPort int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	want := fmt.Sprintf("0100007F:%04X", peerPort)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || f[2] != want {
			continue
		}
		tx, _, _ := strings.Cut(f[4], ":")
		n, err := strconv.ParseInt(tx, 16, 64)
		if err != nil {
			t.Fatalf("tx_queue %q: %v", f[4], err)
		}
		return n
	}
	return 0
}

// TestSinglePortStalledReaderHoldsOneAnswer: a single-port session reads
// each Fetch answer whole before writing it, so a client that pipelines
// Fetches and stops reading must not make it read (and hold) the answers
// of all of them: the next Fetch goes upstream only once the previous
// answer is written. Without that, all 8 reach the broker (a gateway
// over the built-in broker, which counts what it answers).
func TestSinglePortStalledReaderHoldsOneAnswer(t *testing.T) {
	reg := prometheus.NewRegistry()
	up := startBuiltinWith(t, func(o *proxy.Options) { o.Hooks = metrics.New(reg) })
	ctx := ctxT(t, 60*time.Second)
	pcl := newClient(t, up, nil, kgo.DefaultProduceTopic("big"), kgo.AllowAutoTopicCreation())
	produceRandom(t, ctx, pcl, 128)
	srv := startServer(t, proxy.Options{
		Listeners: []proxy.ListenerOptions{{Name: "sp", Listen: "127.0.0.1:0", SinglePort: &proxy.SinglePortOptions{}}},
		Bootstrap: []string{up.Addr(0).String()},
		Logger:    testLogger(t),
	})
	fetches := func() float64 {
		return counterValue(t, reg, "tollgate_requests_total", map[string]string{"api": "Fetch"})
	}
	conn := stallFetches(t, srv.Addr(0).String(), 12, 8)
	defer conn.Close()
	local := conn.LocalAddr().(*net.TCPAddr).Port
	// The first answer fills the sockets and the gateway's write blocks.
	settledSendQueue(t, ctx, local)
	if n := fetches(); n != 1 {
		t.Fatalf("the upstream answered %v Fetches of a client that reads nothing, want 1 (one answer held)", n)
	}
}

// stallFetch connects with a 4 KiB receive buffer, sends one Fetch of
// the given version for partition 0 of "big" from offset 0, and reads

// TestSlowReaderNotClosed: a client that reads slowly but steadily gets a
// large in-memory answer (a merged single-port Fetch) whole, though
// writing it takes several times frame_timeout: the write deadline bounds
// a write that makes no progress, not a slow one.
func TestSlowReaderNotClosed(t *testing.T) {
	up := startBuiltinWith(t)
	ctx := ctxT(t, 120*time.Second)
	pcl := newClient(t, up, nil, kgo.DefaultProduceTopic("big"), kgo.AllowAutoTopicCreation())
	produceRandom(t, ctx, pcl, 48)
	ca := newTestCA(t)
	cert := ca.issue(t, "kafka.test", net.IPv4(127, 0, 0, 1))
	for _, tc := range []struct {
		name     string
		tls      bool
		sendfile bool // the built-in broker's own listener: the body goes by sendfile
	}{
		{"single-port", false, false},
		{"single-port-tls", true, false},
		{"builtin-sendfile", false, true},
		{"builtin-tls", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			var wrap []func(net.Conn) net.Conn
			var serverTLS *tls.Config
			if tc.tls {
				serverTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
				wrap = append(wrap, func(c net.Conn) net.Conn {
					return tls.Client(c, &tls.Config{RootCAs: ca.pool, ServerName: "kafka.test", MinVersion: tls.VersionTLS12})
				})
			}
			srv := up
			if tc.sendfile {
				srv = startBuiltinWith(t, func(o *proxy.Options) {
					o.Hooks, o.FrameTimeout = metrics.New(reg), time.Second
					o.Listeners[0].TLS = serverTLS
				})
				opts := []kgo.Opt{kgo.DefaultProduceTopic("big"), kgo.AllowAutoTopicCreation()}
				if tc.tls {
					opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.pool, ServerName: "kafka.test", MinVersion: tls.VersionTLS12}))
				}
				produceRandom(t, ctx, newClient(t, srv, nil, opts...), 48)
			} else {
				srv = startServer(t, proxy.Options{
					Listeners:    []proxy.ListenerOptions{{Name: "sp", Listen: "127.0.0.1:0", SinglePort: &proxy.SinglePortOptions{}, TLS: serverTLS}},
					Bootstrap:    []string{up.Addr(0).String()},
					Logger:       testLogger(t),
					Hooks:        metrics.New(reg),
					FrameTimeout: time.Second,
				})
			}
			conn := stallFetches(t, srv.Addr(0).String(), 12, 1, wrap...)
			defer conn.Close()
			// 64 KiB every 100 ms: a 3 MiB answer takes about 5 s.
			var size [4]byte
			conn.SetReadDeadline(time.Now().Add(50 * time.Second))
			if _, err := io.ReadFull(conn, size[:]); err != nil {
				t.Fatal(err)
			}
			want := int64(binary.BigEndian.Uint32(size[:]))
			if want < 2<<20 {
				t.Fatalf("answer of %d bytes, want over 2 MiB", want)
			}
			var got int64
			for got < want {
				n, err := io.CopyN(io.Discard, conn, min(64<<10, want-got))
				got += n
				if err != nil {
					t.Fatalf("read %d of %d bytes: %v (closes as write_timeout: %v)", got, want, err,
						counterValue(t, reg, "tollgate_connection_closes_total", map[string]string{"reason": "write_timeout"}))
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// TestClientResetMidFetch: a consumer that resets its connection while a
// Fetch answer's record sets are being spliced to it closed the
// connection itself: the close is not counted or logged as an upstream
// failure (ECONNRESET from the splice is told apart by the client
// socket's TCP state).
func TestClientResetMidFetch(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := startUpstream(t, 1, kfake.SeedTopics(1, "big"))
	srv := startGateway(t, c, func(o *proxy.Options) { o.Hooks = metrics.New(reg) })
	ctx := ctxT(t, 60*time.Second)
	cl := newClient(t, srv, nil, kgo.DefaultProduceTopic("big"))
	produceRandom(t, ctx, cl, 128)
	conn := stallFetch(t, srv.Addr(0).String(), 12)
	local := conn.LocalAddr().(*net.TCPAddr).Port
	waitFor(t, ctx, "the answer to be on its way", func() bool { return sendQueue(t, local) > 0 })
	conn.(*net.TCPConn).SetLinger(0) // close with a reset
	conn.Close()
	closes := func(reason string) float64 {
		return counterValue(t, reg, "tollgate_connection_closes_total", map[string]string{"reason": reason})
	}
	waitFor(t, ctx, "the reset connection's close to be counted", func() bool {
		return counterValue(t, reg, "tollgate_connection_closes_total", nil) >= 1
	})
	if up := closes("upstream_error"); up != 0 {
		t.Fatalf("a client's reset counted as upstream_error (%v); client_closed %v, client_error %v", up, closes("client_closed"), closes("client_error"))
	}
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("another client after the reset: %v", err)
	}
}
