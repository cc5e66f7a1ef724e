package proxy_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
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

// TestSASLPassthroughPrincipal: with SASL relayed to an upstream that
// requires it, the gateway still learns who authenticated (from the
// PLAIN or SCRAM token, once the upstream accepts it), so policy rules on
// principals apply; a SaslHandshake v0 (raw tokens) is refused clearly.
func TestSASLPassthroughPrincipal(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "pt"), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "alice", "a-pw"), kfake.Superuser("SCRAM-SHA-256", "bob", "b-pw"))
	lb := &logBuffer{}
	srv := startGateway(t, c, withLog(lb))
	setPolicy(t, srv, "policy:\n  rules:\n    - name: bob-read-only\n      match: { principal: bob, api: [Produce] }\n      action: deny\n")
	ctx := ctxT(t, 30*time.Second)
	alice := newClient(t, srv, nil, kgo.SASL(plain.Auth{User: "alice", Pass: "a-pw"}.AsMechanism()), kgo.DefaultProduceTopic("pt"))
	if err := alice.ProduceSync(ctx, kgo.StringRecord("a")).FirstErr(); err != nil {
		t.Fatalf("alice through pass-through SASL: %v", err)
	}
	bob := newClient(t, srv, nil, kgo.SASL(scram.Auth{User: "bob", Pass: "b-pw"}.AsSha256Mechanism()), kgo.DefaultProduceTopic("pt"))
	if err := bob.ProduceSync(ctx, kgo.StringRecord("b")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob's produce: %v, want the gateway's TOPIC_AUTHORIZATION_FAILED for his principal", err)
	}
	// A wrong SCRAM password: the first step succeeds upstream, the proof
	// fails; the gateway must never take the named user as the principal.
	before := strings.Count(lb.String(), "principal=bob")
	mallory := newClient(t, srv, nil, kgo.SASL(scram.Auth{User: "bob", Pass: "guess"}.AsSha256Mechanism()),
		kgo.DefaultProduceTopic("pt"), kgo.RecordDeliveryTimeout(2*time.Second))
	if err := mallory.ProduceSync(ctx, kgo.StringRecord("m")).FirstErr(); err == nil {
		t.Fatal("a wrong SCRAM password was accepted")
	}
	if n := strings.Count(lb.String(), "principal=bob"); n != before || before == 0 {
		t.Errorf("bob adopted as principal %d times after a failed login, %d before it", n, before)
	}
	rc := dialRaw(t, srv.Addr(0).String())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(0)
	hs.Mechanism = "PLAIN"
	if _, _, ok := rc.roundTrip(hs); ok {
		t.Fatal("a v0 handshake was relayed")
	}
}

func TestSASLUserFromToken(t *testing.T) {
	for tok, want := range map[string]string{
		"\x00alice\x00pw":          "alice",
		"admin\x00alice\x00pw":     "admin",
		"n,,n=bob,r=abc":           "bob",
		"n,,n=we=2Cird=3Dname,r=x": "we,ird=name",
		"y,a=x,n=carol,r=1":        "carol",
		"c=biws,r=abc,p=xyz":       "",
		"garbage":                  "",
	} {
		if got := proxySASLUser(tok); got != want {
			t.Errorf("%q: %q, want %q", tok, got, want)
		}
	}
}

func proxySASLUser(tok string) string { return proxy.SASLUserForTest([]byte(tok)) }
