package proxy

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/lograte"
)

// TestSinglePortPartClosedHere: a single-port session that ends (its
// client left) closes its upstream connections with parts still in
// flight. Those parts end with errConnClosedHere, and gathering them
// neither warns that a broker did not answer nor forgets the shared
// view's leaders (which made every session's next request look them up
// again). A part whose broker itself drops the connection still does
// both. The upstream is a real kfake broker holding a Fetch long poll.
func TestSinglePortPartClosedHere(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "pc"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var drop atomic.Bool
	arrived := make(chan struct{}, 8)
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if drop.Load() {
			return nil, errors.New("test: broker drops the connection"), true
		}
		arrived <- struct{}{}
		return nil, nil, false // kfake long-polls the empty partition
	})

	t.Run("closed by the gateway", func(t *testing.T) {
		tun, logs := newTestTunnel(t)
		bc, got := sendLongFetch(t, c, tun)
		<-arrived // the Fetch is waiting in kfake
		bc.close()
		if err := <-got; !errors.Is(err, errConnClosedHere) {
			t.Fatalf("part error %v, want errConnClosedHere", err)
		}
		if _, ok := tun.view.leader("pc", 0); !ok || tun.view.isStale() {
			t.Error("the gateway's own close made the view distrust partition leaders")
		}
		if s := logs.String(); strings.Contains(s, "did not answer") {
			t.Errorf("the gateway's own close was logged as a broker failure: %s", s)
		}
	})
	t.Run("dropped by the broker", func(t *testing.T) {
		drop.Store(true)
		tun, logs := newTestTunnel(t)
		_, got := sendLongFetch(t, c, tun)
		err := <-got
		if err == nil || errors.Is(err, errConnClosedHere) {
			t.Fatalf("part error %v, want the broker's", err)
		}
		if !tun.view.isStale() {
			t.Error("a broker that dropped a part left the view's leaders trusted")
		}
		if s := logs.String(); !strings.Contains(s, "did not answer") {
			t.Errorf("a broker that dropped a part was not logged: %q", s)
		}
	})
}

// syncBuffer is a bytes.Buffer safe for a logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newTestTunnel is a tunnel with what gather.finish uses: a view that
// knows partition pc/0 leads on node 0, and a rate-limited logger.
func newTestTunnel(t *testing.T) (*tunnel, *syncBuffer) {
	logs := &syncBuffer{}
	noisy := lograte.New(slog.New(slog.NewTextHandler(logs, nil)), lograte.Options{})
	t.Cleanup(noisy.Close)
	srv := &Server{noisy: noisy}
	view := newClusterView(srv)
	view.leaders["pc"] = map[int32]int32{0: 0}
	return &tunnel{s: &session{srv: srv, remote: "127.0.0.1:1"}, view: view}, logs
}

// sendLongFetch sends, as one partial part (like a single-port Fetch), a
// Fetch that kfake holds for a minute on the empty partition pc/0, and
// returns the connection and where the gathered answer's error arrives.
func sendLongFetch(t *testing.T, c *kfake.Cluster, tun *tunnel) (*brokerConn, <-chan error) {
	conn, err := net.Dial("tcp", c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	bc := newBrokerConn(0, conn, "test")
	t.Cleanup(bc.close)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, 60000, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "pc"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	got := make(chan error, 1)
	g := &gather{got: map[int32]kmsg.Response{}, partial: true,
		rep:   func(_ kmsg.Response, err error) { got <- err },
		merge: func(map[int32]kmsg.Response) (kmsg.Response, error) { return nil, errors.New("the part was answered") }}
	g.left.Store(1)
	call := &partCall{node: 0, req: req}
	call.done = func() { g.finish(tun, call.node, call.resp, call.body, call.err) }
	if _, err := bc.send(call, true); err != nil {
		t.Fatal(err)
	}
	return bc, got
}
