package proxy_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestConsoleListener: a client on the console's dial function reaches
// every upstream broker through sessions of the in-process listener —
// node N at the virtual port N+1 of ConsoleHost, never an upstream or
// bound address — with the configured principal on each; an address that
// is not the console's, or a node the gateway does not know, is refused.
func TestConsoleListener(t *testing.T) {
	c := startUpstream(t, 3)
	srv := startGateway(t, c)
	seed, dial := srv.ConsoleDialer(proxy.ConsoleOptions{Name: "admin", Principal: "User:console-test"})
	var mu sync.Mutex
	var dials []string
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ClientID("console-test"),
		kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dials = append(dials, addr)
			mu.Unlock()
			return dial(ctx, network, addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, 6, -1, nil, "via-console"); err != nil || r.Err != nil {
		t.Fatalf("create through the console listener: %v %v", err, r.Err)
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) != 3 {
		t.Fatalf("brokers through the console listener: %v %v", md.Brokers, err)
	}
	for _, b := range md.Brokers { // a request to each: a session per node
		if b.Host != proxy.ConsoleHost {
			t.Errorf("broker %d advertised at %s:%d, want %s", b.NodeID, b.Host, b.Port, proxy.ConsoleHost)
		}
		if _, err := cl.Broker(int(b.NodeID)).Request(ctx, kmsg.NewPtrApiVersionsRequest()); err != nil {
			t.Errorf("broker %d: %v", b.NodeID, err)
		}
	}
	var admin []proxy.ConnInfo
	for _, ci := range srv.Connections() {
		if ci.Listener == "admin" {
			admin = append(admin, ci)
			if ci.Principal != "console-test" || ci.Remote != "in-process:console" {
				t.Errorf("console connection %+v: want principal console-test from in-process:console", ci)
			}
		}
	}
	if len(admin) < 2 {
		t.Errorf("%d console connections, want the bootstrap and the brokers'", len(admin))
	}
	for _, l := range srv.Listeners() {
		if l.Name == "admin" {
			t.Error("the console listener is listed with the client listeners")
		}
	}
	cl.Close()
	// The client's close ends the sessions (EOF on the socket pair).
	for consoleConns(srv) > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d console sessions still open after the client closed", consoleConns(srv))
		case <-time.After(10 * time.Millisecond):
		}
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(dials)
	dials = slices.Compact(dials)
	want := []string{proxy.ConsoleHost + ":0", proxy.ConsoleHost + ":1", proxy.ConsoleHost + ":2", proxy.ConsoleHost + ":3"}
	if !slices.Equal(dials, want) {
		t.Errorf("the console client dialled %q, want the bootstrap and nodes 0-2 at %q", dials, want)
	}
	for _, bad := range []string{srv.Addr(0).String(), proxy.ConsoleHost + ":99", proxy.ConsoleHost + ":x", "tollgate-console"} {
		if conn, err := dial(ctx, "tcp", bad); err == nil || !strings.Contains(err.Error(), "console connection") {
			if conn != nil {
				conn.Close()
			}
			t.Errorf("dial %q: %v, want refused", bad, err)
		}
	}
}

func consoleConns(srv *proxy.Server) int {
	n := 0
	for _, ci := range srv.Connections() {
		if ci.Listener == "admin" {
			n++
		}
	}
	return n
}
