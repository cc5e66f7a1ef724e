package proxy_test

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestUpstreamDialErrorReasons: an upstream whose certificate the gateway
// does not trust, and one that refuses the gateway's upstream SASL
// password, are counted in tollgate_upstream_dial_errors_total with
// their reason (tls_certificate, sasl_authentication_failed), in a
// port-per-broker and in a single-port listener (whose per-broker dials
// were not counted at all); fixing the trust or the password recovers
// without a restart.
func TestUpstreamDialErrorReasons(t *testing.T) {
	for _, single := range []bool{false, true} {
		name := "port-per-broker"
		if single {
			name = "single-port"
		}
		listener := func(o *proxy.Options) {
			if single {
				o.Listeners[0].SinglePort = &proxy.SinglePortOptions{VirtualNode: testVirtual}
			}
		}
		t.Run(name+"/tls", func(t *testing.T) {
			ca, other := newTestCA(t), newTestCA(t)
			server := ca.issue(t, "kafka.test", net.ParseIP(upstreamHost))
			c := startUpstream(t, 3, kfake.SeedTopics(3, "reasons"),
				kfake.TLS(&tls.Config{Certificates: []tls.Certificate{server}, MinVersion: tls.VersionTLS12}))
			reg := prometheus.NewRegistry()
			trusted := &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
			srv := startGateway(t, c, listener, func(o *proxy.Options) {
				o.UpstreamTLS = trusted
				o.DialTimeout = time.Second
				o.Hooks = metrics.New(reg)
			})
			checkReason(t, srv, reg, "tls_certificate", func(bad bool) {
				cfg := trusted
				if bad {
					cfg = &tls.Config{RootCAs: other.pool, MinVersion: tls.VersionTLS12}
				}
				if !srv.SetUpstreamTLS(cfg) {
					t.Fatal("SetUpstreamTLS refused a TLS config")
				}
			})
		})
		t.Run(name+"/sasl", func(t *testing.T) {
			c := startUpstream(t, 3, kfake.SeedTopics(3, "reasons"), kfake.EnableSASL(),
				kfake.Superuser("SCRAM-SHA-256", "gateway", "right"))
			var pass atomic.Value
			pass.Store("right")
			reg := prometheus.NewRegistry()
			srv := startGateway(t, c, listener, func(o *proxy.Options) {
				o.DialTimeout = time.Second
				o.Hooks = metrics.New(reg)
				o.UpstreamAuth = func(ctx context.Context, conn net.Conn, addr string) (time.Duration, error) {
					host, _, _ := net.SplitHostPort(addr)
					m := scram.Auth{User: "gateway", Pass: pass.Load().(string)}.AsSha256Mechanism()
					return auth.Authenticate(ctx, conn, m, host)
				}
			})
			checkReason(t, srv, reg, "sasl_authentication_failed", func(bad bool) {
				if bad {
					pass.Store("wrong")
				} else {
					pass.Store("right")
				}
			})
		})
	}
}

// checkReason produces through srv with fresh clients (fresh upstream
// connections): fine, then with set(true) in force until the dial errors
// with reason are counted, then again fine after set(false).
func checkReason(t *testing.T, srv *proxy.Server, reg *prometheus.Registry, reason string, set func(bad bool)) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	produce := func(timeout time.Duration) error {
		cl := newClient(t, srv, nil, kgo.DefaultProduceTopic("reasons"), kgo.RecordDeliveryTimeout(timeout))
		defer cl.Close()
		return cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr()
	}
	if err := produce(20 * time.Second); err != nil {
		t.Fatalf("produce before the fault: %v", err)
	}
	if n := counterValue(t, reg, "tollgate_upstream_dial_errors_total", map[string]string{"reason": reason}); n != 0 {
		t.Fatalf("%v dial errors with reason %s before the fault", n, reason)
	}
	set(true)
	if err := produce(2 * time.Second); err == nil {
		t.Fatal("produce succeeded while the upstream dials must fail")
	}
	waitFor(t, ctx, "dial errors with reason "+reason, func() bool {
		return counterValue(t, reg, "tollgate_upstream_dial_errors_total", map[string]string{"reason": reason}) > 0
	})
	set(false)
	if err := produce(20 * time.Second); err != nil {
		t.Fatalf("produce after the fix: %v", err)
	}
}
