package proxy_test

import (
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestConnectionsActiveOnFailedDial: connections whose upstream dial fails
// never count as open, so connections_active stays at zero (it went to -5
// after five such connections).
func TestConnectionsActiveOnFailedDial(t *testing.T) {
	ln, err := net.Listen("tcp", upstreamHost+":0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := proxy.New(proxy.Options{
		Listeners:   []proxy.ListenerOptions{{Name: "t", Listen: "127.0.0.1:0"}},
		Bootstrap:   []string{ln.Addr().String()},
		Logger:      testLogger(t),
		DialTimeout: 2 * time.Second,
		Hooks:       metrics.New(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 20*time.Second)
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	ln.Close() // every upstream dial is refused from now on
	for range 5 {
		c, err := net.Dial("tcp", srv.Addr(0).String())
		if err != nil {
			t.Fatal(err)
		}
		if !closedWithin(c, 10*time.Second) {
			t.Fatal("a connection whose upstream dial failed stayed open")
		}
		c.Close()
	}
	waitFor(t, ctx, "the five dial failures to be counted", func() bool {
		return counterValue(t, reg, "tollgate_upstream_dial_errors_total", nil) >= 5
	})
	if got := counterValue(t, reg, "tollgate_connections_active", nil); got != 0 {
		t.Fatalf("connections_active = %v after five failed dials, want 0", got)
	}
}

// TestBuiltinMalformedBodyCounted: a request body the built-in broker
// cannot decode closes the connection as malformed (counted), not as a
// backend error.
func TestBuiltinMalformedBodyCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := startBuiltinWith(t, func(o *proxy.Options) { o.Hooks = metrics.New(reg) })
	c, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Metadata v4 claiming five topics and carrying none.
	c.Write([]byte{0, 0, 0, 14, 0, 3, 0, 4, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 5})
	if !closedWithin(c, 10*time.Second) {
		t.Fatal("an undecodable body did not close the connection")
	}
	ctx := ctxT(t, 10*time.Second)
	waitFor(t, ctx, "the close to be counted", func() bool {
		return counterValue(t, reg, "tollgate_connection_closes_total", nil) == 1
	})
	if got := counterValue(t, reg, "tollgate_connection_closes_total", map[string]string{"reason": "malformed_request"}); got != 1 {
		t.Fatalf("closes with reason malformed_request = %v, want 1", got)
	}
	if got := counterValue(t, reg, "tollgate_malformed_frames_total", map[string]string{"cause": "bad_body"}); got != 1 {
		t.Fatalf("malformed bad_body = %v, want 1", got)
	}
	if got := counterValue(t, reg, "tollgate_connections_active", nil); got != 0 {
		t.Fatalf("connections_active = %v, want 0", got)
	}
}

// TestAcksZeroPoisonCountedMalformed: an acks=0 Produce whose batch does
// not parse gets no answer; the connection closes (as Kafka closes it on
// an acks=0 failure) and is counted as the client's malformed input.
func TestAcksZeroPoisonCountedMalformed(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := startBuiltinWith(t, func(o *proxy.Options) { o.Hooks = metrics.New(reg) })
	ctx := ctxT(t, 10*time.Second)
	if _, err := kadm.NewClient(newClient(t, srv, nil)).CreateTopic(ctx, 1, 1, nil, "acks0"); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 0, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "acks0"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = poisonBatch(0, 5, 4, poisonRecord(0, "x")) // five claimed, one inside
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1))
	if !closedWithin(c, 10*time.Second) {
		t.Fatal("an acks=0 poison produce did not close the connection")
	}
	waitFor(t, ctx, "the close to be counted as malformed", func() bool {
		return counterValue(t, reg, "tollgate_malformed_frames_total", map[string]string{"cause": "bad_body"}) == 1
	})
}
