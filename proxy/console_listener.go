package proxy

// The web console's in-process listener. The console's Kafka client is a
// client of the gateway like any other (DESIGN.md, principle 8: one
// pipeline): it reaches the backend through sessions of this listener, so
// policy, audit, metrics and rate limits judge its pages and its actions
// as they judge a client's request, with the backend (upstream or
// built-in) none the wiser.
//
// Nothing listens on a socket. ConsoleDialer returns the dial function of
// the console's kgo client (kgo.Dialer): each dial makes a connected
// AF_UNIX socket pair, starts a session on one end (startSession, as an
// accept would) and hands the other to the client. Only the holder of
// the dial function can open such a session — no other process or host
// can reach the listener, so the configured principal cannot be claimed
// from outside.
//
// Addresses. The listener advertises the host ConsoleHost, which resolves
// nowhere: only the dial function understands it. Port 0 is the bootstrap
// (node -1); in upstream mode node N is advertised at "port" N+1, on the
// listener's own map, whatever the client listeners are (per-broker
// ports, SNI or single-port): the console's sessions are per-broker
// sessions whose ports are virtual, so a console session for node N
// dials node N's upstream as a per-broker port's session does. The
// built-in broker is one node served at the bootstrap, as on every
// listener. bootPort and brokerPort (server.go) return these virtual
// ports; learnBroker skips the listener (it is not in Server.listeners).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
)

// ConsoleHost is the host the console listener advertises.
const ConsoleHost = "tollgate-console"

// ConsoleOptions names the console listener and who its sessions are.
type ConsoleOptions struct {
	Name string // the listener name (configs.ConsoleListener)
	// Principal is every session's principal (admin.ui.principal,
	// "User:name"); sessions carry the name alone, as a SASL user's or a
	// mapped certificate's (policy rules match it, the ACL store adds
	// "User:").
	Principal string
}

// consoleListener marks a listener as the in-process console listener.
type consoleListener struct {
	principal string
}

// consoleAddr is the remote address of a console session: it names the
// console rather than an IP (so no address rule of the policy matches it).
type consoleAddr struct{}

func (consoleAddr) Network() string { return "in-process" }
func (consoleAddr) String() string  { return "in-process:console" }

// consoleConn is one end of a console socket pair. It keeps the
// *net.UnixConn's methods (syscall.Conn: the built-in broker's zero-copy
// Fetch still uses sendfile) and names its peer, which an unnamed socket
// pair does not.
type consoleConn struct {
	*net.UnixConn
}

func (consoleConn) RemoteAddr() net.Addr { return consoleAddr{} }
func (consoleConn) LocalAddr() net.Addr  { return consoleAddr{} }

// ConsoleDialer opens the console listener (once per call: a gateway
// calls it once) and returns the seed address and the dial function of
// the console's Kafka client.
func (s *Server) ConsoleDialer(o ConsoleOptions) (seed string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) {
	l := &listener{srv: s, opts: ListenerOptions{Name: o.Name}, host: ConsoleHost,
		brokers: make(map[int32]net.Listener), console: &consoleListener{principal: strings.TrimPrefix(o.Principal, "User:")}}
	return net.JoinHostPort(ConsoleHost, "0"), func(ctx context.Context, _, addr string) (net.Conn, error) {
		node, err := s.consoleNode(addr)
		if err != nil {
			return nil, err
		}
		client, server, err := consolePair()
		if err != nil {
			return nil, fmt.Errorf("console connection: %w", err)
		}
		s.startSession(l, server, node)
		return client, nil
	}
}

// consoleNode is the node a console address names (see the file comment).
func (s *Server) consoleNode(addr string) (int32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != ConsoleHost {
		return 0, fmt.Errorf("console connection to %q: not an address of the console listener (%s:port)", addr, ConsoleHost)
	}
	p, err := strconv.ParseInt(port, 10, 64)
	switch {
	case err != nil || p < 0 || p > math.MaxInt32:
		return 0, fmt.Errorf("console connection to %q: bad port", addr)
	case p == 0:
		return -1, nil
	case !s.upstreamMode():
		return 0, fmt.Errorf("console connection to %q: the built-in broker is served at port 0", addr)
	}
	node := int32(p - 1)
	if !s.nodes.known(node) {
		return 0, fmt.Errorf("console connection to %q: upstream node %d is not known", addr, node)
	}
	return node, nil
}

// consoleVirtualPort is node's port on the console listener.
func consoleVirtualPort(node int32) (int32, error) {
	if node < 0 || node == math.MaxInt32 {
		return 0, fmt.Errorf("node %d has no port on the console listener", node)
	}
	return node + 1, nil
}

// consolePair is a connected pair of stream sockets, both ends wrapped.
func consolePair() (client, server net.Conn, err error) {
	fds, err := socketpair()
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "tollgate-console")
		c, ferr := net.FileConn(f) // dups the descriptor
		f.Close()
		if ferr == nil {
			uc, ok := c.(*net.UnixConn)
			if !ok {
				c.Close()
				ferr = errors.New("socketpair: not a unix socket")
			} else {
				conns[i] = consoleConn{uc}
			}
		}
		if ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	if err != nil {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		return nil, nil, err
	}
	return conns[0], conns[1], nil
}
