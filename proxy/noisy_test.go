package proxy_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestRefusalsLogRateLimited: 2,000 connections refused by the
// per-address cap write at most 100 log lines (the first few in full, then
// one summary with the count and the address), while the refusal counter
// counts every one of them.
func TestRefusalsLogRateLimited(t *testing.T) {
	const refusals = 2000
	c := startUpstream(t, 1)
	lb := &logBuffer{}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	srv := startGateway(t, c, withLog(lb), func(o *proxy.Options) {
		o.MaxConnectionsPerAddress = 1
		o.LogSummaryInterval = time.Hour // the summary comes from Shutdown, not a clock
		o.Hooks = m
	})
	addr := srv.Addr(0).String()
	held, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	rc := &rawConn{t: t, c: held, f: kmsg.NewRequestFormatter()}
	if _, _, ok := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); !ok {
		t.Fatal("the first connection was not served")
	}
	for i := 0; i < refusals; i++ {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, _ := io.Copy(io.Discard, conn); n != 0 {
			t.Fatalf("a refused connection got %d bytes", n)
		}
		conn.Close()
	}
	// The refusal is counted around the close the client saw: wait for
	// the last one rather than read the counter once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var refused float64
	waitFor(t, ctx, "every refusal counted", func() bool {
		refused = refusedTotal(t, reg, "max_connections_per_address")
		return refused >= refusals
	})
	if refused != refusals {
		t.Fatalf("tollgate_connections_refused_total = %v, want %d", refused, refusals)
	}
	held.Close()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	out := lb.String()
	lines := strings.Count(out, "\n")
	full := strings.Count(out, `msg="connection refused"`)
	t.Logf("%d refusals: %d log lines, %d of them refusals in full", refusals, lines, full)
	if lines > 100 {
		t.Fatalf("%d refused connections wrote %d log lines, want at most 100", refusals, lines)
	}
	rest := strconv.Itoa(refusals - full)
	if full == 0 || !strings.Contains(out, `msg="repeated log lines suppressed"`) ||
		!strings.Contains(out, `by_reason="max_connections_per_address=`+rest+`"`) ||
		!strings.Contains(out, `busiest="127.0.0.1=`+rest+`"`) {
		t.Fatalf("want the first refusals in full and a summary counting the rest by reason and address:\n%s", out)
	}
}

// refusedTotal reads tollgate_connections_refused_total{reason} from reg.
func refusedTotal(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tollgate_connections_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
