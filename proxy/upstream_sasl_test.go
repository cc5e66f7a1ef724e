package proxy_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestUpstreamSASL: the upstream requires SCRAM and expires sessions after
// two seconds (connections.max.reauth.ms); the gateway authenticates its
// upstream connections as its own identity, so clients without
// credentials produce through it, and when the upstream session nears its
// end the session closes between requests and the client reconnects — no
// produce fails.
func TestUpstreamSASL(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "sasl-up"), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "gateway", "gw-secret"),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "2000"}))
	lb := &logBuffer{}
	mech := scram.Auth{User: "gateway", Pass: "gw-secret"}.AsSha256Mechanism()
	srv := startGateway(t, c, withLog(lb), func(o *proxy.Options) {
		o.UpstreamAuth = func(ctx context.Context, conn net.Conn, addr string) (time.Duration, error) {
			host, _, _ := net.SplitHostPort(addr)
			return auth.Authenticate(ctx, conn, mech, host)
		}
	})
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, srv, nil, kgo.DefaultProduceTopic("sasl-up"))
	deadline := time.Now().Add(5 * time.Second)
	n := 0
	for time.Now().Before(deadline) {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
			t.Fatalf("produce %d through an authenticated upstream: %v", n, err)
		}
		n++
		time.Sleep(20 * time.Millisecond)
	}
	if got := c.PartitionInfo("sasl-up", 0).HighWatermark; got != int64(n) {
		t.Fatalf("upstream has %d records, produced %d", got, n)
	}
	if !strings.Contains(lb.String(), "reason=upstream_session_expiring") {
		t.Errorf("no session was recycled before the upstream's 2 s reauth deadline")
	}
	t.Logf("%d produces across upstream session expiries", n)
}
