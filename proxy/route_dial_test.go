package proxy

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestSinglePortDialHold: while a broker refuses the gateway's dials,
// single-port request parts for it do not dial it once each: after a
// failed dial they fail at once with that dial's error (its reason kept)
// until the backoff has passed, for every session's tunnel; once the
// broker accepts again, a dial after the hold succeeds and ends it.
func TestSinglePortDialHold(t *testing.T) {
	var dials atomic.Int64
	var refuse atomic.Bool
	refuse.Store(true)
	srv := &Server{nodes: newNodeRegistry(), opts: Options{
		DialTimeout: time.Second,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			if refuse.Load() {
				return nil, errors.New("test: connection refused")
			}
			c, peer := net.Pipe()
			t.Cleanup(func() { peer.Close() })
			return c, nil
		},
	}}
	srv.nodes.set(1, "127.0.0.1:1")
	tunnel := func() *tunnel {
		return &tunnel{s: &session{srv: srv, remote: "127.0.0.1:1", hooks: noHooks{}}, conns: map[int32]*brokerConn{}}
	}
	const parts = 40
	for i := range parts {
		_, err := tunnel().conn(1) // a new session's tunnel each time
		if err == nil {
			t.Fatalf("part %d: a refused dial gave a connection", i)
		}
		if r := DialReason(err); r != DialConnect {
			t.Fatalf("part %d: reason %q (%v), want %q", i, r, err, DialConnect)
		}
		// The session closes as upstream_error (reset before any
		// answer), not as the client's error.
		if re, ok := errors.AsType[*requestError](err); !ok || re.reason != closeUpstreamError {
			t.Fatalf("part %d: %v closes the session as %v, want %v", i, err, re, closeUpstreamError)
		}
	}
	if n := dials.Load(); n >= parts/2 {
		t.Fatalf("%d dials for %d request parts while the broker refused: no hold between them", n, parts)
	}
	refuse.Store(false)
	tun := tunnel()
	deadline := time.Now().Add(30 * time.Second)
	for {
		bc, err := tun.conn(1)
		if err == nil {
			bc.close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection 30 s after the broker accepted again: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.tunnelDials.held(1); err != nil {
		t.Fatalf("a successful dial left the hold: %v", err)
	}
}
