package proxy_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestUnknownKeysRefused: by default, frames with a key the gateway cannot
// decode (-1, 9999, one newer than kmsg) or a version newer than kmsg's
// close the connection without reaching the upstream (a 14-byte frame
// with key -1 crashed the upstream stand-in); each refusal is counted as
// malformed, and the gateway keeps serving.
func TestUnknownKeysRefused(t *testing.T) {
	starts := map[string]func(*testing.T, func(*proxy.Options)) *proxy.Server{
		"upstream": func(t *testing.T, mod func(*proxy.Options)) *proxy.Server {
			return startGateway(t, startUpstream(t, 3, kfake.SeedTopics(1, "t")), mod)
		},
		"builtin": func(t *testing.T, mod func(*proxy.Options)) *proxy.Server { return startBuiltinWith(t, mod) },
	}
	for name, start := range starts {
		t.Run(name, func(t *testing.T) { testUnknownKeysRefused(t, start) })
	}
}

func testUnknownKeysRefused(t *testing.T, start func(*testing.T, func(*proxy.Options)) *proxy.Server) {
	{
		reg := prometheus.NewRegistry()
		m := metrics.New(reg)
		srv := start(t, func(o *proxy.Options) { o.Hooks = m })
		frames := [][]byte{
			{0, 0, 0, 10, 0xff, 0xff, 0, 0, 0, 0, 0, 1, 0xff, 0xff},     // key -1
			{0, 0, 0, 10, 0x27, 0x0f, 0, 0, 0, 0, 0, 2, 0xff, 0xff},     // key 9999
			{0, 0, 0, 10, 0, 120, 0, 0, 0, 0, 0, 3, 0xff, 0xff},         // key 120
			{0, 0, 0, 11, 0, 32, 0x7f, 0x00, 0, 0, 0, 4, 0xff, 0xff, 0}, // DescribeConfigs v32512
		}
		for i, f := range frames {
			c, err := net.Dial("tcp", srv.Addr(0).String())
			if err != nil {
				t.Fatal(err)
			}
			c.Write(f)
			if !closedWithin(c, 10*time.Second) {
				t.Fatalf("frame %d was not refused", i)
			}
			c.Close()
		}
		waitFor(t, ctxT(t, 10*time.Second), "the refusals to be counted", func() bool {
			return counterValue(t, reg, "tollgate_malformed_frames_total", map[string]string{"cause": "unknown_api"}) == float64(len(frames))
		})
		cl := newClient(t, srv, nil)
		if err := cl.Ping(ctxT(t, 10*time.Second)); err != nil {
			t.Fatalf("gateway stopped serving: %v", err)
		}
	}
}

// TestForwardedUnknownKeyDeniedByPolicy: with ForwardUnknownAPIs, a key
// newer than this build reaches the upstream unless a rule names it (here
// by the group "unknown"); denied, it closes the connection (no answer can
// be encoded for it), counted under the rule, and never reaches the
// upstream.
func TestForwardedUnknownKeyDeniedByPolicy(t *testing.T) {
	ln, err := net.Listen("tcp", upstreamHost+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	reached := make(chan struct{}, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 6)
				if _, err := io.ReadFull(c, buf); err == nil && buf[5] == 120 {
					reached <- struct{}{}
				}
				io.Copy(io.Discard, c)
			}()
		}
	}()
	reg := prometheus.NewRegistry()
	srv, err := proxy.New(proxy.Options{
		Listeners:          []proxy.ListenerOptions{{Name: "test", Listen: "127.0.0.1:0"}},
		Bootstrap:          []string{ln.Addr().String()},
		Logger:             testLogger(t),
		DialTimeout:        2 * time.Second,
		ForwardUnknownAPIs: true,
		Hooks:              metrics.New(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 20*time.Second)
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	setPolicy(t, srv, "policy:\n  rules:\n    - name: no-unknown\n      match: { api: [unknown] }\n      action: deny\n")
	c, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{0, 0, 0, 10, 0, 120, 0, 0, 0, 0, 0, 1, 0xff, 0xff})
	if !closedWithin(c, 10*time.Second) {
		t.Fatal("a denied unknown key did not close the connection")
	}
	if got := counterValue(t, reg, "tollgate_policy_denials_total", map[string]string{"rule": "no-unknown"}); got != 1 {
		t.Fatalf("denials under no-unknown = %v, want 1", got)
	}
	select {
	case <-reached:
		t.Fatal("the denied request reached the upstream")
	default:
	}
}
