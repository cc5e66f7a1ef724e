package proxy_test

import (
	"context"
	"crypto/rand"
	"net"
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
			val := make([]byte, 64<<10)
			rand.Read(val) // incompressible: kgo compresses batches
			for range 128 {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}

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
				frames = f.AppendRequest(frames, req, int32(i+1))
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
