package proxy_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestSinglePortUpstreamLate: the upstream is down when a single-port
// gateway starts (its first discovery fails), then comes up. A client
// that connects then is served at once: with no broker known, the
// session runs a discovery itself instead of closing the connection
// before its first answer ("no upstream broker known yet") until the
// next refresh, an hour away here. kgo does not retry a connection closed
// before the ApiVersions answer: a producer fails its records on it (the
// fault suite's restart/single-port run found this, bench/faults.go).
func TestSinglePortUpstreamLate(t *testing.T) {
	ln, err := net.Listen("tcp", upstreamHost+":0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there while the gateway starts
	srv := startServer(t, proxy.Options{
		Listeners: []proxy.ListenerOptions{{Name: "test", Listen: "127.0.0.1:0",
			SinglePort: &proxy.SinglePortOptions{VirtualNode: testVirtual}}},
		Bootstrap:       []string{addr},
		Logger:          testLogger(t),
		DialTimeout:     2 * time.Second,
		MetadataRefresh: time.Hour,
	})
	if srv.Ready() == nil {
		t.Fatal("the gateway reports ready with its upstream down")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "late"),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, addr) }))
	if err != nil {
		t.Fatalf("start kfake on %s: %v", addr, err)
	}
	t.Cleanup(c.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, srv, nil, kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "late", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce through the gateway once the upstream is up: %v", err)
	}
	vs, err := kadm.NewClient(newClient(t, srv, nil)).ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil {
			t.Errorf("ApiVersions from node %d: %v", v.NodeID, v.Err)
		}
	})
	if err := srv.Ready(); err != nil {
		t.Errorf("the gateway is not ready after serving: %v", err)
	}
}
