package broker

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/tollgate-kafka/tollgate/wire"
)

// testServer is a minimal stand-in for the gateway: it frames requests,
// hands them to Conn.Handle and writes the responses in request order.
type testServer struct {
	ln net.Listener
	b  *Broker
	wg sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool
}

// result is one request's answer.
type result struct {
	body wire.Body
	err  error
}

// slot is one request waiting for its answer, in request order.
type slot struct {
	key, version int16
	corr         int32
	ch           chan result
}

func startServer(t testing.TB, b *Broker) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	b.advertisedHost, b.advertisedPort = host, int32(p)
	s := &testServer{ln: ln, b: b, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *testServer) addr() string { return s.ln.Addr().String() }

func (s *testServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *testServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[nc] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(nc)
	}
}

func (s *testServer) serve(nc net.Conn) {
	defer s.wg.Done()
	c := s.b.NewConn(nc.RemoteAddr().String())
	queue := make(chan *slot, 64)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s.write(nc, queue)
	}()
	defer func() {
		close(queue)
		c.Close()
		<-writerDone
		_ = nc.Close()
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
	}()
	r := bufio.NewReader(nc)
	for {
		var prefix [4]byte
		if _, err := io.ReadFull(r, prefix[:]); err != nil {
			return
		}
		n, err := wire.CheckSize(prefix, 100<<20)
		if err != nil {
			return
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		h, err := wire.ParseRequestHeader(frame)
		if err != nil {
			return
		}
		req := &wire.Request{Key: h.Key, Version: h.Version, Correlation: h.Correlation, Body: frame[h.Len:]}
		if !h.ClientIDNull {
			id := string(h.ClientID)
			req.ClientID = &id
		}
		sl := &slot{key: h.Key, version: h.Version, corr: h.Correlation, ch: make(chan result, 1)}
		queue <- sl
		c.Handle(req, func(b wire.Body, err error) { sl.ch <- result{b, err} })
	}
}

// write answers slots strictly in order; an error closes the connection.
func (s *testServer) write(nc net.Conn, queue <-chan *slot) {
	for sl := range queue {
		res := <-sl.ch
		if res.err != nil {
			_ = nc.Close()
			for sl := range queue { // drain so the reader never blocks
				if r := <-sl.ch; r.body != nil {
					if rel, ok := r.body.(interface{ Release() }); ok {
						rel.Release()
					}
				}
			}
			return
		}
		if res.body == nil {
			continue // acks=0
		}
		hdr := wire.AppendResponseHeader(nil, sl.key, sl.version, sl.corr, res.body.Len())
		_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(hdr); err != nil {
			_ = nc.Close()
			continue
		}
		if _, err := res.body.WriteTo(nc); err != nil {
			_ = nc.Close()
		}
	}
}

// openBroker opens a broker on dir with test-friendly settings.
// manualCleaner leaves cleaning to the test's own cleanAll calls: the
// background loop's first pass is a day away, so it cannot clean the
// partition first when a loaded machine stretches the test past the
// default backoff (15 s).
func manualCleaner(c *Config) { c.CleanerBackoff = 24 * time.Hour }

func openBroker(t testing.TB, dir string, mut ...func(*Config)) *Broker {
	t.Helper()
	cfg := Config{DataDir: dir, Fsync: storage.FsyncNever, AutoCreateTopics: true}
	for _, m := range mut {
		m(&cfg)
	}
	b, err := Open(cfg)
	if err != nil {
		t.Fatalf("open broker: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("close broker: %v", err)
		}
	})
	return b
}

// newBroker opens a broker on a fresh dir and serves it.
func newBroker(t testing.TB, mut ...func(*Config)) (*Broker, *testServer) {
	b := openBroker(t, t.TempDir(), mut...)
	return b, startServer(t, b)
}
