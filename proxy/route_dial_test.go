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

// TestSinglePortDialAfterClose: a broker connection whose dial ends
// after the session closed (a shutdown, from another goroutine, while
// the read loop dialled) is closed at once and not added to the
// tunnel's connections, which close had already closed and counted.
func TestSinglePortDialAfterClose(t *testing.T) {
	peerClosed := make(chan struct{})
	srv := &Server{nodes: newNodeRegistry(), opts: Options{
		DialTimeout: time.Second,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			c, peer := net.Pipe()
			go func() {
				peer.Read(make([]byte, 1)) // returns once c is closed
				close(peerClosed)
			}()
			t.Cleanup(func() { peer.Close() })
			return c, nil
		},
	}}
	srv.nodes.set(1, "127.0.0.1:1")
	s := &session{srv: srv, remote: "127.0.0.1:1", hooks: noHooks{}, closed: make(chan struct{})}
	tun := &tunnel{s: s, conns: map[int32]*brokerConn{}}
	close(s.closed) // what session.close does first, under connMu
	if _, err := tun.conn(1); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("dial after close: %v, want net.ErrClosed", err)
	}
	if len(tun.conns) != 0 {
		t.Fatalf("%d broker connections kept after close", len(tun.conns))
	}
	select {
	case <-peerClosed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection dialled after the session closed was left open")
	}
}
