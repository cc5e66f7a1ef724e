package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/rewrite"
)

// nodeRegistry maps upstream node ids to the address the upstream
// advertises for them, learned from discovery and from every response the
// gateway rewrites. Nodes are never forgotten: a broker that left keeps its
// port, and a client that dials it gets a closed connection and refreshes
// its metadata, which is how it learns that the broker is gone.
type nodeRegistry struct {
	mu    sync.RWMutex
	addrs map[int32]string
}

func newNodeRegistry() *nodeRegistry { return &nodeRegistry{addrs: make(map[int32]string)} }

func (r *nodeRegistry) set(node int32, addr string) (changed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.addrs[node] == addr {
		return false
	}
	r.addrs[node] = addr
	return true
}

func (r *nodeRegistry) get(node int32) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.addrs[node]
	return a, ok
}

func (r *nodeRegistry) known(node int32) bool {
	_, ok := r.get(node)
	return ok
}

// bootstrapNext rotates through the bootstrap list so that clients spread
// over the seed brokers.
var bootstrapNext atomic.Uint32

// dialUpstream connects the session to the upstream broker it addresses:
// node -1 (a bootstrap port) tries the bootstrap brokers in turn, starting
// at a rotating index; node N dials N's advertised address.
func (s *Server) dialUpstream(ctx context.Context, node int32) (net.Conn, string, error) {
	var addrs []string
	if node < 0 {
		start := int(bootstrapNext.Add(1))
		for i := range s.opts.Bootstrap {
			addrs = append(addrs, s.opts.Bootstrap[(start+i)%len(s.opts.Bootstrap)])
		}
	} else {
		addr, ok := s.nodes.get(node)
		if !ok {
			return nil, "", fmt.Errorf("upstream node %d is unknown", node)
		}
		addrs = []string{addr}
	}
	var errs []error
	for _, addr := range addrs {
		c, err := s.dialAddr(ctx, addr)
		if err == nil {
			return c, addr, nil
		}
		errs = append(errs, err)
	}
	return nil, "", errors.Join(errs...)
}

func (s *Server) dialAddr(ctx context.Context, addr string) (net.Conn, error) {
	dial := s.opts.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: s.opts.DialTimeout, KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, &dialError{DialConnect, fmt.Errorf("dial upstream %s: %w", addr, err)}
	}
	// A direct connection, or the one to a plain http:// CONNECT proxy;
	// a SOCKS5 or https:// egress proxy's tunnel is another type and keeps
	// the host's algorithm.
	if tc, ok := c.(*net.TCPConn); ok {
		s.setCongestion(tc)
	}
	if utls := s.upstreamTLS.Load(); utls != nil {
		cfg := utls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(c, cfg)
		hctx, cancel := context.WithTimeout(ctx, s.opts.DialTimeout)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			c.Close()
			reason := DialTLS
			if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
				reason = DialTLSCertificate
			}
			return nil, &dialError{reason, fmt.Errorf("tls handshake with upstream %s: %w", addr, err)}
		}
		c = tc
	}
	if s.opts.UpstreamAuth != nil {
		actx, cancel := context.WithTimeout(ctx, s.opts.DialTimeout)
		defer cancel()
		lifetime, err := s.opts.UpstreamAuth(actx, c, addr)
		if err != nil {
			c.Close()
			reason := DialSASL
			if errors.Is(err, kerr.SaslAuthenticationFailed) {
				reason = DialSASLAuthFailed
			}
			return nil, &dialError{reason, fmt.Errorf("authenticate to upstream %s: %w", addr, err)}
		}
		if lifetime > 0 {
			return &expiringConn{Conn: c, expires: time.Now().Add(lifetime * 9 / 10)}, nil
		}
	}
	return c, nil
}

// expiringConn is an upstream connection whose SASL session ends at
// expires (with a margin); sessions stop using it before then.
type expiringConn struct {
	net.Conn
	expires time.Time
}

// discover asks the upstream for its brokers and opens a port for each on
// every listener, so ports exist before clients learn them and after a
// gateway restart a client holding old metadata still finds its broker.
func (s *Server) discover(ctx context.Context) error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.opts.Bootstrap...),
		kgo.DialTimeout(s.opts.DialTimeout),
		kgo.MetadataMinAge(time.Second),
		// The same dialer as sessions: the Dial hook and upstream TLS apply.
		kgo.Dialer(func(ctx context.Context, _, addr string) (net.Conn, error) {
			return s.dialAddr(ctx, addr)
		}),
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, s.opts.DialTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // brokers only, no topics
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		err = fmt.Errorf("discovery metadata: %w", err)
		s.discoveryErr.Store(&err)
		return err
	}
	s.discoveryErr.Store(new(error))
	for _, b := range resp.Brokers {
		s.learnBroker(b.NodeID, b.Host, b.Port)
	}
	return nil
}

// discoverFirst runs a discovery for a session that found no broker
// known yet, one at a time: sessions that waited behind another find
// its result. Bounded by the dial timeout (discover); a failure is in
// discoveryErr (Ready), and the session closes with its own error.
func (s *Server) discoverFirst() {
	s.discoverMu.Lock()
	defer s.discoverMu.Unlock()
	if len(s.nodes.list()) > 0 {
		return
	}
	s.discover(context.Background())
}

func (s *Server) discoveryLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.MetadataRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.discover(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("broker discovery failed", "err", err)
			}
		}
	}
}

// learnBroker records node's upstream address and opens its port on every
// listener.
func (s *Server) learnBroker(node int32, host string, port int32) {
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	if s.nodes.set(node, addr) {
		s.log.Info("upstream broker", "node", node, "addr", addr)
	}
	for _, l := range s.listeners {
		if l.sni != nil || l.opts.SinglePort != nil {
			continue // served by name, or as one virtual node, at the listener's one port
		}
		if _, err := l.brokerPort(node); err != nil {
			s.log.Error("cannot serve upstream broker", "listener", l.opts.Name, "node", node, "err", err)
		}
	}
}

// mapper implements rewrite.Mapper for one listener.
type mapper struct {
	srv *Server
	l   *listener
	vc  *vcluster // an SNI virtual cluster: brokers advertised under its pattern (sni.go)
}

var _ rewrite.Mapper = mapper{}

// Advertise returns where clients of this listener reach node. In upstream
// mode every broker node gets a port of its own (opened on first sight); the
// built-in broker is one node served at the bootstrap port itself.
func (m mapper) Advertise(kind rewrite.EndpointKind, node int32, host string, port int32) (string, int32, bool) {
	if m.l.sni != nil {
		return m.sniAdvertise(kind, node, host, port)
	}
	if !m.srv.upstreamMode() || m.l.opts.SinglePort != nil {
		// One node at the bootstrap port: the built-in broker, or the
		// virtual node of a single-port listener (route_nodes.go made
		// every node id the virtual one).
		port := m.l.bootPort()
		if m.l.opts.AdvertisePort > 0 {
			port = int32(m.l.opts.AdvertisePort)
		}
		return m.l.host, port, true
	}
	if kind == rewrite.Controller && !m.srv.nodes.known(node) {
		return "", 0, false // a controller-only node is not served by the gateway
	}
	if kind == rewrite.Broker {
		m.srv.learnBroker(node, host, port)
	}
	p, err := m.l.brokerPort(node)
	if err == nil {
		p, err = m.l.advertisedPort(p)
	}
	if err != nil {
		m.srv.log.Error("cannot serve upstream broker", "listener", m.l.opts.Name, "node", node, "err", err)
		return "", 0, false
	}
	return m.l.host, p, true
}

// Ready reports whether the gateway can serve: the built-in broker is
// recovered once the server exists; an upstream is ready once the last
// broker discovery reached it.
func (s *Server) Ready() error {
	if !s.upstreamMode() {
		return nil
	}
	p := s.discoveryErr.Load()
	if p == nil {
		return errors.New("upstream not reached yet")
	}
	return *p
}
