package proxy_test

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// counterValue sums the samples of a counter or gauge family whose labels
// include want.
func counterValue(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metric
				}
			}
			if m.Counter != nil {
				sum += m.GetCounter().GetValue()
			} else {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// produceFrame is a whole Produce v9 frame carrying one record of value
// bytes to topic/0.
func produceFrame(topic string, value int, corr int32) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = poisonBatch(0, 1, 0, poisonRecord(0, strings.Repeat("x", value)))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("budget-test")).AppendRequest(nil, req, corr)
}

// readProduceCode reads one Produce v9 response and returns its partition
// error code.
func readProduceCode(t *testing.T, c net.Conn) int16 {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("no produce response: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, frame); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	if err := resp.ReadFrom(frame[5:]); err != nil { // correlation id, header tags
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestRequestSizeByAPI: a Metadata frame larger than max_request_bytes is
// refused from its size alone and counted as malformed; a Produce of the
// same size is read and answered.
func TestRequestSizeByAPI(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	srv := startBuiltinWith(t, func(o *proxy.Options) { o.Hooks, o.MaxRequestBytes = m, 1<<20 })
	c, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hdr := binary.BigEndian.AppendUint32(nil, 2<<20) // 2 MiB declared
	hdr = append(hdr, 0, 3, 0, 4, 0, 0, 0, 1, 0xff, 0xff)
	c.Write(hdr)
	if !closedWithin(c, 10*time.Second) {
		t.Fatal("a 2 MiB Metadata was not refused")
	}
	if got := counterValue(t, reg, "tollgate_malformed_frames_total", map[string]string{"cause": "too_large"}); got != 1 {
		t.Fatalf("malformed too_large = %v, want 1", got)
	}
	p, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Write(produceFrame("sized", 2<<20, 1))
	// Auto-creation is off for Produce: the point is that it was read.
	if code := readProduceCode(t, p); code != kerr.UnknownTopicOrPartition.Code && code != kerr.MessageTooLarge.Code {
		t.Fatalf("2 MiB produce: %v", kerr.ErrorForCode(code))
	}
}

// TestRequestBudgetStopsReading: with a budget of one frame, a connection
// that has sent most of a large produce holds the budget; a second
// connection's produce waits (the gateway stops reading it) until the
// first completes, then both are answered and the budget is whole again.
func TestRequestBudgetStopsReading(t *testing.T) {
	const budget = 1 << 20
	reg := prometheus.NewRegistry()
	srv := startBuiltinWith(t, func(o *proxy.Options) {
		o.MaxFrameBytes, o.MaxRequestBytesInFlight, o.Hooks = budget, budget, metrics.New(reg)
	})
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, srv, nil)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "budget"); err != nil {
		t.Fatal(err)
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", srv.Addr(0).String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := dial(), dial()
	fa, fb := produceFrame("budget", 900<<10, 1), produceFrame("budget", 900<<10, 1)
	a.Write(fa[:700<<10])
	waitFor(t, ctx, "the first produce to reserve its buffer", func() bool {
		avail, _ := proxy.BudgetForTest(srv)
		return avail < budget-512<<10
	})
	go b.Write(fb)
	waitFor(t, ctx, "the second produce to wait on the budget", func() bool {
		_, waiting := proxy.BudgetForTest(srv)
		return waiting == 1
	})
	a.Write(fa[700<<10:])
	if code := readProduceCode(t, a); code != 0 {
		t.Fatalf("first produce: %v", kerr.ErrorForCode(code))
	}
	if code := readProduceCode(t, b); code != 0 {
		t.Fatalf("second produce: %v", kerr.ErrorForCode(code))
	}
	waitFor(t, ctx, "the budget to be whole again", func() bool {
		avail, _ := proxy.BudgetForTest(srv)
		return avail == budget
	})
	if got := counterValue(t, reg, "tollgate_request_budget_waits_total", nil); got < 1 {
		t.Errorf("request_budget_waits_total = %v, want at least 1", got)
	}
	if got := counterValue(t, reg, "tollgate_request_bytes_in_flight", nil); got != 0 {
		t.Errorf("request_bytes_in_flight = %v with nothing in flight", got)
	}
}

// TestRequestBudgetNoDeadlock: several large produces read at once with a
// budget of one frame can together hold it all while each waits for more;
// the budget lets one through, so every produce is answered.
func TestRequestBudgetNoDeadlock(t *testing.T) {
	const budget = 1 << 20
	srv := startBuiltinWith(t, func(o *proxy.Options) { o.MaxFrameBytes, o.MaxRequestBytesInFlight = budget, budget })
	ctx := ctxT(t, 60*time.Second)
	if _, err := kadm.NewClient(newClient(t, srv, nil)).CreateTopic(ctx, 1, 1, nil, "nodeadlock"); err != nil {
		t.Fatal(err)
	}
	const conns = 4
	frame := produceFrame("nodeadlock", 900<<10, 1)
	var cs []net.Conn
	for range conns {
		c, err := net.Dial("tcp", srv.Addr(0).String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	// Every connection sends most of its frame first, so all are being
	// read at once, then the rest.
	for _, c := range cs {
		c.Write(frame[:600<<10])
	}
	for _, c := range cs {
		go c.Write(frame[600<<10:])
	}
	for i, c := range cs {
		if code := readProduceCode(t, c); code != 0 {
			t.Fatalf("produce %d: %v", i, kerr.ErrorForCode(code))
		}
	}
}
