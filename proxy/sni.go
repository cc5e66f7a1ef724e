package proxy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/tollgate-kafka/tollgate/rewrite"
)

// SNI routing ("brokers: sni"): one TLS port serves the bootstrap name
// and every broker; the server name of each client's TLS hello picks the
// session. Names are matched lower-cased without a trailing dot. A hello
// the listener cannot route is refused inside the handshake, with the
// unrecognized_name alert (RFC 6066 §3), before any Kafka byte is read.

// SNIOptions names the hosts of an SNI listener.
type SNIOptions struct {
	// BootstrapHost opens a bootstrap session.
	BootstrapHost string
	// BrokerHost holds {node} exactly once, inside one DNS label
	// ("b{node}.kafka.example.com"): the name of each broker, as the
	// gateway advertises it and as clients send it back. The same rule
	// as configs.MatchBrokerHost, which validates it.
	BrokerHost string
	// NoSNIBootstrap treats a hello without a server name as bootstrap;
	// otherwise it is refused.
	NoSNIBootstrap bool
}

// SNIHooks is implemented by Hooks that count refused TLS hellos
// (metrics does); other Hooks are not asked.
type SNIHooks interface {
	SNIRefused(listener, reason string)
}

// Reasons a hello is refused, as metrics label them.
const (
	sniNoName      = "no_sni"
	sniUnknownName = "unknown_name"
	sniUnknownNode = "unknown_node"
)

const nodePlaceholder = "{node}"

// sniRouter is one SNI listener's name matcher and TLS front. It is
// immutable after newSNIRouter.
type sniRouter struct {
	l              *listener
	bootstrap      string
	before, after  string // broker_host around {node}, lower-case
	noSNIBootstrap bool
	front          *tls.Config // the config handshakes start from
	refuse         *tls.Config // no certificates: crypto/tls answers unrecognized_name
}

func newSNIRouter(l *listener, o *SNIOptions, base *tls.Config) (*sniRouter, error) {
	pattern := strings.ToLower(strings.TrimSuffix(o.BrokerHost, "."))
	before, after, ok := strings.Cut(pattern, nodePlaceholder)
	if !ok || strings.Contains(after, nodePlaceholder) {
		return nil, fmt.Errorf("sni broker host %q must hold %s exactly once", o.BrokerHost, nodePlaceholder)
	}
	if base == nil {
		return nil, errors.New("sni needs TLS: the broker is chosen by the TLS server name")
	}
	r := &sniRouter{l: l, bootstrap: strings.ToLower(strings.TrimSuffix(o.BootstrapHost, ".")),
		before: before, after: after, noSNIBootstrap: o.NoSNIBootstrap}
	if r.bootstrap == "" {
		return nil, errors.New("sni needs a bootstrap host")
	}
	r.refuse = &tls.Config{MinVersion: base.MinVersion, CipherSuites: base.CipherSuites}
	r.front = &tls.Config{
		MinVersion:         base.MinVersion,
		CipherSuites:       base.CipherSuites,
		ClientAuth:         base.ClientAuth,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) { return r.configFor(hello, base) },
	}
	return r, nil
}

// brokerName is the name node is advertised under.
func (r *sniRouter) brokerName(node int32) string {
	return r.before + strconv.Itoa(int(node)) + r.after
}

// match returns the session node a server name stands for: -1 for
// bootstrap, else the broker's node id; ok is false for names the
// listener does not serve (reason says why).
func (r *sniRouter) match(name string) (node int32, reason string, ok bool) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	switch {
	case name == "" && r.noSNIBootstrap:
		return -1, "", true
	case name == "":
		return 0, sniNoName, false
	case name == r.bootstrap:
		return -1, "", true
	}
	if len(name) <= len(r.before)+len(r.after) || !strings.HasPrefix(name, r.before) || !strings.HasSuffix(name, r.after) {
		return 0, sniUnknownName, false
	}
	digits := name[len(r.before) : len(name)-len(r.after)]
	n, err := strconv.ParseInt(digits, 10, 32)
	if err != nil || n < 0 || digits[0] == '+' || (len(digits) > 1 && digits[0] == '0') {
		return 0, sniUnknownName, false
	}
	return int32(n), "", true
}

// configFor is the GetConfigForClient of every handshake on the
// listener: it routes the hello, records the route on the connection,
// and hands back the listener's real configuration (or the refusing one).
func (r *sniRouter) configFor(hello *tls.ClientHelloInfo, base *tls.Config) (*tls.Config, error) {
	sc, _ := hello.Conn.(*sniConn)
	node, reason, ok := r.match(hello.ServerName)
	if !ok {
		// A virtual cluster's name (vcluster.go): its pattern around
		// one of the listener's own names.
		if vc, inner, matched := r.l.srv.vcs.sniInner(strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))); matched {
			if n, _, innerOK := r.match(inner); innerOK {
				node, reason, ok = n, "", true
				if sc != nil {
					sc.vc = vc
				}
			}
		}
	}
	if ok && node >= 0 && !r.serves(node) {
		reason, ok = sniUnknownNode, false
	}
	if sc != nil {
		sc.name, sc.node, sc.refused = hello.ServerName, node, reason
	}
	if !ok {
		if h, counts := r.l.srv.opts.Hooks.(SNIHooks); counts {
			h.SNIRefused(r.l.opts.Name, reason)
		}
		return r.refuse, nil
	}
	if base.GetConfigForClient != nil {
		return base.GetConfigForClient(hello)
	}
	return base, nil
}

// serves reports whether node is one the listener can open a session
// to: a broker the upstream reported (discovery and every rewritten
// response keep the list current), or node 0 of the built-in broker.
func (r *sniRouter) serves(node int32) bool {
	if !r.l.srv.upstreamMode() {
		return node == 0
	}
	return r.l.srv.nodes.known(node)
}

// sniConn is the client connection during an SNI handshake; configFor
// writes the route on it (the handshake runs in the session goroutine,
// which reads it once Handshake returns).
type sniConn struct {
	net.Conn
	name    string
	node    int32
	refused string    // "" unless the hello was refused
	vc      *vcluster // the virtual cluster whose SNI pattern the name matched, if any
}

// handshakeError explains a refused hello (crypto/tls's own error only
// says that no certificate was configured for it).
func (sc *sniConn) handshakeError(r *sniRouter) error {
	const refused = "refused with the unrecognized_name alert"
	switch sc.refused {
	case sniNoName:
		return fmt.Errorf("TLS hello names no server (SNI), %s; this listener routes by name: connect to %s (a client given an IP address sends no name), or set sni.no_sni: bootstrap", refused, r.bootstrap)
	case sniUnknownNode:
		return fmt.Errorf("TLS server name %q names node %d, which the upstream has not reported; %s", sc.name, sc.node, refused)
	}
	return fmt.Errorf("TLS server name %q is neither %s nor a broker name like %s; %s", sc.name, r.bootstrap, r.brokerName(0), refused)
}

// tlsServer starts the server side of a client's TLS connection: on an
// SNI listener through the router, so that route is filled in by the
// handshake; otherwise route is nil.
func (l *listener) tlsServer(c net.Conn) (tc *tls.Conn, route *sniConn) {
	if l.sni == nil {
		return tls.Server(c, l.opts.TLS), nil
	}
	route = &sniConn{Conn: c}
	return tls.Server(route, l.sni.front), route
}

// sniAdvertise is mapper.Advertise on an SNI listener: every broker is
// its broker_host name at the listener's advertised port, and no port is
// opened for it.
func (m mapper) sniAdvertise(kind rewrite.EndpointKind, node int32, host string, port int32) (string, int32, bool) {
	adv := m.l.bootPort()
	if m.l.opts.AdvertisePort > 0 {
		adv = int32(m.l.opts.AdvertisePort)
	}
	if !m.srv.upstreamMode() {
		return m.vcName(m.l.sni.brokerName(0)), adv, true
	}
	if kind == rewrite.Broker {
		m.srv.learnBroker(node, host, port)
	} else if !m.srv.nodes.known(node) {
		return "", 0, false // a controller-only node is not served by the gateway
	}
	return m.vcName(m.l.sni.brokerName(node)), adv, true
}

// vcName is a broker name as a virtual cluster's sessions are told it:
// inside the cluster's SNI pattern ("team-a.*" and b0.kafka.example.com
// give team-a.b0.kafka.example.com), so a client that reconnects to an
// advertised broker names the cluster again.
func (m mapper) vcName(name string) string {
	if m.vc == nil || m.vc.SNI == "" {
		return name
	}
	return m.vc.sniBefore + name + m.vc.sniAfter
}
