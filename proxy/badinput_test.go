package proxy_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// logBuffer collects the gateway's log lines for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func withLog(lb *logBuffer) func(*proxy.Options) {
	return func(o *proxy.Options) {
		o.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// TestBadInput sends hostile and mistaken bytes to the gateway: each closes
// only its own connection with a logged reason that names the cause, and a
// real client keeps working afterwards.
func TestBadInput(t *testing.T) {
	c := startUpstream(t, 1)
	lb := &logBuffer{}
	srv := startGateway(t, c, withLog(lb))
	addr := srv.Addr(0).String()

	size := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rnd.Uint32())
	}
	random[0] = 0x7f // a size far above the limit
	cases := []struct {
		name, input, wantLog string
	}{
		{"random bytes", string(random), "frame larger than the maximum"},
		{"2 GiB frame", string(size(2<<30 - 1)), "frame larger than the maximum"},
		{"negative size", string(size(0xffffff00)), "invalid frame size"},
		{"truncated frame", string(size(100)) + strings.Repeat("x", 50), "truncated"},
		{"ends mid-header", string(size(6)) + "\x00\x03\x00\x01\x00\x00", "truncated"},
		{"client id overruns frame", string(size(12)) + "\x00\x03\x00\x01\x00\x00\x00\x01\x7f\xff\x00\x00", "truncated"},
		{"HTTP request", "GET / HTTP/1.1\r\nHost: kafka\r\n\r\n", "HTTP request"},
		{"TLS ClientHello", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "TLS handshake"},
		{"Fetch at a version the gateway never offered", string(size(11)) + "\x00\x01\x00\x63\x00\x00\x00\x07\xff\xff\x00", "was not offered"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write([]byte(tc.input))
			if tc.name == "truncated frame" || tc.name == "ends mid-header" {
				conn.(*net.TCPConn).CloseWrite()
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			// Closed with unread bytes in the socket, the kernel answers
			// with a reset instead of a FIN; either way nothing came back.
			if n, err := io.Copy(io.Discard, conn); (err != nil && !errors.Is(err, syscall.ECONNRESET)) || n != 0 {
				t.Fatalf("want the gateway to close with no reply, got %d bytes, err %v", n, err)
			}
			ctx := ctxT(t, 5*time.Second)
			waitFor(t, ctx, "log line "+tc.wantLog, func() bool { return strings.Contains(lb.String(), tc.wantLog) })
		})
	}

	// The gateway still serves real clients.
	cl := newClient(t, srv, nil)
	ctx := ctxT(t, 10*time.Second)
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("gateway stopped serving after bad input: %v", err)
	}
}

// TestUnknownKeyPassesThrough: with ForwardUnknownAPIs, a key kmsg does
// not know is forwarded as bytes, untouched, and the upstream's answer
// comes back untouched. (kfake
// cannot be the upstream here: it dereferences nil on unknown keys, so the
// upstream is a byte-level peer that answers with a canned frame.)
func TestUnknownKeyPassesThrough(t *testing.T) {
	ln, err := net.Listen("tcp", upstreamHost+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	request := []byte{0, 0, 0, 13, 0x00, 0x78, 0, 3, 0, 0, 0, 42, 0, 1, 'c', 0xde, 0xad}
	response := []byte{0, 0, 0, 7, 0, 0, 0, 42, 0xbe, 0xef, 0x01}
	got := make(chan []byte, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, len(request))
				if _, err := io.ReadFull(c, buf); err != nil || buf[5] != 0x78 {
					return // the gateway's discovery probe
				}
				got <- buf
				c.Write(response)
				io.Copy(io.Discard, c)
			}()
		}
	}()
	srv, err := proxy.New(proxy.Options{
		Listeners:          []proxy.ListenerOptions{{Name: "t", Listen: "127.0.0.1:0"}},
		Bootstrap:          []string{ln.Addr().String()},
		Logger:             testLogger(t),
		DialTimeout:        2 * time.Second,
		ForwardUnknownAPIs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 10*time.Second)
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	conn, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write(request)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp := make([]byte, len(response))
	if _, err := io.ReadFull(conn, resp); err != nil {
		t.Fatalf("read response: %v", err)
	}
	if !bytes.Equal(resp, response) {
		t.Errorf("response changed in transit: % x", resp)
	}
	if fwd := <-got; !bytes.Equal(fwd, request) {
		t.Errorf("request changed in transit: % x", fwd)
	}
}

// TestNoLeaks: after many client connections come and go and the gateway
// shuts down, no goroutine or file descriptor the gateway opened remains.
func TestNoLeaks(t *testing.T) {
	c := startUpstream(t, 3, kfake.SeedTopics(1, "leak"))
	// Let kfake's own goroutines settle before taking the baseline.
	time.Sleep(50 * time.Millisecond)
	baseG, baseFD := runtime.NumGoroutine(), countFDs(t)

	srv, err := proxy.New(proxy.Options{
		Listeners: []proxy.ListenerOptions{{Name: "t", Listen: "127.0.0.1:0"}},
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
	for range 5 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(0).String()), kgo.DefaultProduceTopic("leak"))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrMetadataRequest()
		if _, err := req.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
		cl.Close()
	}
	// Bad connections too.
	for range 5 {
		conn, err := net.Dial("tcp", srv.Addr(0).String())
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
		io.Copy(io.Discard, conn)
		conn.Close()
	}
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= baseG })
	waitFor(t, ctx, "file descriptors back to baseline", func() bool { return countFDs(t) <= baseFD })
}

func countFDs(t testing.TB) int {
	ents, err := os.ReadDir(filepath.Join("/proc", "self", "fd"))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	return len(ents)
}
