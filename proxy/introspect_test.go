package proxy_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIntrospection: Connections and Listeners, read while a client is
// busy (the race detector checks the read loop's published identity),
// show the client's id and software and the address map the client was
// given.
func TestIntrospection(t *testing.T) {
	c := startUpstream(t, 3, kfake.SeedTopics(3, "intro"))
	srv := startGateway(t, c)
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(0).String()), kgo.ClientID("introspected"),
		kgo.SoftwareNameAndVersion("intro-test", "1.2.3"), kgo.DefaultProduceTopic("intro"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 50 && ctx.Err() == nil; i++ {
			cl.ProduceSync(ctx, kgo.StringRecord("x"))
		}
	}()
	seen := false
	for !seen {
		select {
		case <-ctx.Done():
			t.Fatal("the client never showed up in Connections")
		case <-time.After(5 * time.Millisecond):
		}
		for _, ci := range srv.Connections() {
			if ci.ClientID == "introspected" && ci.SoftwareName == "intro-test" && ci.SoftwareVersion == "1.2.3" && ci.Listener == "test" {
				seen = true
			}
		}
	}
	<-done
	ls := srv.Listeners()
	if len(ls) != 1 || len(ls[0].Brokers) != 3 {
		t.Fatalf("listeners %+v: want one with 3 brokers", ls)
	}
	for i, b := range ls[0].Brokers {
		if b.Node != int32(i) || !strings.HasPrefix(b.Upstream, upstreamHost+":") || !strings.HasPrefix(b.Advertised, "127.0.0.1:") || b.Bound != b.Advertised {
			t.Errorf("route %+v", b)
		}
	}
}

// TestIntrospectionSNI: an SNI listener's address map names every
// upstream broker by its broker_host name at the one port.
func TestIntrospectionSNI(t *testing.T) {
	s := startSNI(t, "intro-sni", 3)
	ls := s.srv.Listeners()
	if len(ls) != 2 || ls[0].Mode != "sni" {
		t.Fatalf("listeners %+v", ls)
	}
	if len(ls[0].Brokers) != 3 {
		t.Fatalf("routes %+v: want the 3 upstream brokers discovered at start", ls[0].Brokers)
	}
	for _, b := range ls[0].Brokers {
		want := strings.Replace(sniBrokerHost, "{node}", strconv.Itoa(int(b.Node)), 1) + ":" + s.port
		if b.Advertised != want || b.Bound != s.srv.Addr(0).String() || !strings.HasPrefix(b.Upstream, upstreamHost+":") {
			t.Errorf("route %+v, want advertised %s", b, want)
		}
	}
}

// TestIntrospectionSNIConnections: Connections, polled while SNI clients
// connect (the handshake picks each connection's broker after the session
// is registered; the race detector checks that hand-over), shows
// connections by broker name with that broker's node.
func TestIntrospectionSNIConnections(t *testing.T) {
	s := startSNI(t, "intro-sni-conns", 3)
	ctx := ctxT(t, 60*time.Second)
	stop := make(chan struct{})
	polled := make(chan map[int32]bool)
	go func() {
		nodes := map[int32]bool{}
		defer func() { polled <- nodes }()
		for {
			for _, ci := range s.srv.Connections() {
				if ci.Listener == "sni" {
					nodes[ci.Node] = true
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond): // poll, without taking a core
			}
		}
	}()
	d := &sniDialer{pool: s.ca.pool}
	for range 3 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(net.JoinHostPort(sniApex, s.port)), kgo.Dialer(d.dial),
			kgo.DefaultProduceTopic("intro-sni-conns"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		for range 6 { // round robin over partitions led by all three brokers
			if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		// While the client is still connected, its broker connections are
		// listed with their nodes.
		want := map[int32]bool{0: true, 1: true, 2: true}
		for len(want) > 0 && ctx.Err() == nil {
			for _, ci := range s.srv.Connections() {
				if ci.Listener == "sni" {
					delete(want, ci.Node)
				}
			}
			time.Sleep(time.Millisecond) // poll interval, not a deadline
		}
		cl.Close()
		if len(want) > 0 {
			t.Fatalf("Connections never showed SNI connections to nodes %v", want)
		}
	}
	close(stop)
	nodes := <-polled
	for n := range nodes {
		if n < -1 || n > 2 {
			t.Errorf("Connections showed node %d, not a bootstrap (-1) or upstream node", n)
		}
	}
}
