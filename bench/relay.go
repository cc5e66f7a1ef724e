package bench

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"

	"github.com/tollgate-kafka/tollgate/internal/congestion"
)

// relay is the yardstick: a protocol-blind TCP relay that splices socket to
// socket. io.Copy between two *net.TCPConn uses (*TCPConn).ReadFrom, which
// is splice(2) on Linux, so bytes never enter user space. It knows nothing
// of Kafka: one listening port per upstream broker, and clients find the
// port because the benchmark's dialer maps the broker's address to it (what
// a hosts entry does for such a relay in production).
type relay struct {
	log *slog.Logger
	// congestion, if set, is the TCP congestion control of both of each
	// connection's sockets (--tcp-congestion), as the gateway's
	// limits.tcp_congestion_control sets it on its own.
	congestion string
	lns        []net.Listener
	wg         sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

// startRelay opens one port on 127.0.0.1 per upstream address and returns
// the map upstream -> relay port. algorithm, if set, is the TCP
// congestion control of the relay's sockets.
func startRelay(upstreams []string, algorithm string, log *slog.Logger) (*relay, map[string]string, error) {
	r := &relay{log: log, congestion: algorithm, conns: make(map[net.Conn]struct{})}
	routes := make(map[string]string, len(upstreams))
	for _, up := range upstreams {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			r.Close()
			return nil, nil, fmt.Errorf("relay listen for %s: %w", up, err)
		}
		r.lns = append(r.lns, ln)
		if algorithm != "" {
			// A name the host lacks fails here, before any client
			// connects, not on every connection.
			if err := congestion.Set(ln.(*net.TCPListener), algorithm); err != nil {
				r.Close()
				return nil, nil, fmt.Errorf("relay --tcp-congestion %q: %w", algorithm, err)
			}
		}
		routes[up] = ln.Addr().String()
		r.wg.Add(1)
		go r.accept(ln, up)
	}
	return r, routes, nil
}

func (r *relay) accept(ln net.Listener, target string) {
	defer r.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.log.Warn("relay accept", "err", err)
			}
			return
		}
		if !r.track(c) {
			c.Close()
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.untrack(c)
			if err := r.pipe(c.(*net.TCPConn), target); err != nil {
				r.log.Debug("relay connection", "err", err)
			}
		}()
	}
}

// pipe connects client to target and copies both ways until both sides
// are done; each direction half-closes its destination when its source
// ends, so a clean close propagates.
func (r *relay) pipe(client *net.TCPConn, target string) error {
	defer client.Close()
	c, err := net.Dial("tcp", target)
	if err != nil {
		return fmt.Errorf("relay dial %s: %w", target, err)
	}
	up := c.(*net.TCPConn)
	defer up.Close()
	if r.congestion != "" {
		// A relay that cannot set it would measure the host's algorithm
		// under the flag's name: the connection is refused instead.
		if err := errors.Join(congestion.Set(client, r.congestion), congestion.Set(up, r.congestion)); err != nil {
			r.log.Error("relay: --tcp-congestion", "err", err)
			return err
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(up, client)
		up.CloseWrite()
		done <- err
	}()
	_, err = io.Copy(client, up)
	client.CloseWrite()
	return errors.Join(err, <-done)
}

func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

// Close stops accepting, cuts every connection and waits for the copies.
func (r *relay) Close() {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	for _, ln := range r.lns {
		ln.Close()
	}
	r.wg.Wait()
}
