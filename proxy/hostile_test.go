package proxy_test

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// closedWithin reports whether the gateway closes conn within d.
func closedWithin(conn net.Conn, d time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	return err == nil || !strings.Contains(err.Error(), "timeout")
}

// TestSlowloris: a client that starts a frame and trickles it a byte at a
// time is closed once the frame timeout passes, while others are served.
func TestSlowloris(t *testing.T) {
	srv := startBuiltinWith(t, func(o *proxy.Options) { o.FrameTimeout = time.Second })
	conn, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		frame := append([]byte{0, 0, 0, 40}, make([]byte, 40)...)
		for _, b := range frame {
			if _, err := conn.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(150 * time.Millisecond)
		}
	}()
	cl := newClient(t, srv, nil)
	if err := cl.Ping(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("another client was not served during the slowloris: %v", err)
	}
	if !closedWithin(conn, 5*time.Second) {
		t.Fatal("a trickled frame was not cut off by the frame timeout")
	}
	<-done
}

// TestUnfinishedSASL: a connection that starts a SASL exchange and never
// finishes it is closed after the auth timeout; repeated failed logins
// from one address lock that address out for a while.
func TestUnfinishedSASLAndLockout(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "t"))
	srv := startGateway(t, c, withSASL(plainServer{users: map[string]string{"alice": "pw"}}), func(o *proxy.Options) {
		o.AuthTimeout = time.Second
		o.AuthFailuresPerAddress = 3
		o.AuthLockout = 3 * time.Second
	})
	rc := dialRaw(t, srv.Addr(0).String())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	if _, _, ok := rc.roundTrip(hs); !ok {
		t.Fatal("handshake refused")
	}
	if !closedWithin(rc.c, 5*time.Second) {
		t.Fatal("an unfinished SASL exchange held its connection past the auth timeout")
	}

	ctx := ctxT(t, 30*time.Second)
	for range 3 {
		bad := newClient(t, srv, nil, kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()))
		if err := bad.Ping(ctx); err == nil {
			t.Fatal("wrong password accepted")
		}
		bad.Close()
	}
	good := newClient(t, srv, nil, kgo.SASL(plain.Auth{User: "alice", Pass: "pw"}.AsMechanism()))
	pctx := ctxT(t, time.Second)
	if err := good.Ping(pctx); err == nil {
		t.Fatal("an address locked out after 3 failures could still connect")
	}
	waitFor(t, ctx, "the lockout to end", func() bool {
		cl := newClient(t, srv, nil, kgo.SASL(plain.Auth{User: "alice", Pass: "pw"}.AsMechanism()))
		defer cl.Close()
		pctx := ctxT(t, time.Second)
		return cl.Ping(pctx) == nil
	})
}

// TestConnectionFlood: one address opening connections faster than the
// per-address rate gets most of them refused at accept.
func TestConnectionFlood(t *testing.T) {
	srv := startBuiltinWith(t, func(o *proxy.Options) { o.ConnectionRatePerAddress = 5 })
	served := 0
	for range 40 {
		rc := dialRaw(t, srv.Addr(0).String())
		if _, _, ok := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); ok {
			served++
		}
		rc.c.Close()
	}
	if served == 0 || served > 15 {
		t.Fatalf("%d of 40 rapid connections served with a rate of 5/s (burst 5)", served)
	}
	t.Logf("%d of 40 rapid connections served", served)
}
