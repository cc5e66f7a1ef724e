package proxy

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"
)

// This file is the gateway's read-only view for the web console: the
// listeners and their address map, and the open client connections.
// Nothing here changes state; every value is a copy.

// ListenerInfo describes one client-facing listener.
type ListenerInfo struct {
	Name      string        `json:"name"`
	Bound     string        `json:"bound"`     // the bootstrap address actually bound
	Advertise string        `json:"advertise"` // the host clients are told
	Mode      string        `json:"mode"`      // how brokers are addressed: port-per-broker or sni
	Brokers   []BrokerRoute `json:"brokers"`
}

// BrokerRoute is one row of a listener's address map: upstream node →
// the address it really has → the address clients are given.
type BrokerRoute struct {
	Node       int32  `json:"node"`
	Upstream   string `json:"upstream"` // "built-in" for the built-in broker
	Bound      string `json:"bound"`
	Advertised string `json:"advertised"`
}

// ConnInfo is one open client connection.
type ConnInfo struct {
	ID              uint64    `json:"id"`
	Listener        string    `json:"listener"`
	Remote          string    `json:"remote"`
	Node            int32     `json:"node"` // upstream node of the port it came in on; -1 bootstrap
	Since           time.Time `json:"since"`
	TLS             bool      `json:"tls"`
	ClientID        string    `json:"client_id"`
	Principal       string    `json:"principal"`
	SoftwareName    string    `json:"software_name"`
	SoftwareVersion string    `json:"software_version"`
}

// connIdent is what a session's read loop last published about who is on
// the connection (read loop writes, anyone reads through the pointer).
type connIdent struct {
	clientID, principal, softwareName, softwareVersion string
}

// publishIdent stores the session's identity for Connections when it
// changed: the client id of the request being read (clientID), the
// principal and the client software. Read loop only (it owns the fields
// it copies); called for every request from stageObserve.
func (s *session) publishIdent(clientID []byte) {
	cur := s.ident.Load()
	if cur != nil && cur.clientID == string(clientID) && cur.principal == s.subj.Principal &&
		cur.softwareName == s.softwareName && cur.softwareVersion == s.softwareVersion {
		return // no allocation: string(clientID) in a comparison does not copy
	}
	s.ident.Store(&connIdent{string(clientID), s.subj.Principal, s.softwareName, s.softwareVersion})
}

// Connections lists the open client connections, oldest first.
func (s *Server) Connections() []ConnInfo {
	s.mu.Lock()
	out := make([]ConnInfo, 0, len(s.sessions))
	for sess := range s.sessions {
		ci := ConnInfo{ID: sess.id, Listener: sess.l.opts.Name, Remote: sess.remote, Node: sess.shownNode.Load(),
			Since: sess.started, TLS: sess.l.opts.TLS != nil}
		if id := sess.ident.Load(); id != nil {
			ci.ClientID, ci.Principal, ci.SoftwareName, ci.SoftwareVersion = id.clientID, id.principal, id.softwareName, id.softwareVersion
		}
		out = append(out, ci)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b ConnInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Listeners describes every listener and its address map.
func (s *Server) Listeners() []ListenerInfo {
	out := make([]ListenerInfo, 0, len(s.listeners))
	for _, l := range s.listeners {
		li := ListenerInfo{Name: l.opts.Name, Bound: l.boot.Addr().String(), Advertise: l.host, Mode: "port-per-broker", Brokers: []BrokerRoute{}}
		switch {
		case l.sni != nil:
			li.Mode = "sni"
			li.Brokers = s.sniRoutes(l)
		case !s.upstreamMode():
			li.Brokers = append(li.Brokers, BrokerRoute{Node: 0, Upstream: "built-in", Bound: li.Bound,
				Advertised: net.JoinHostPort(l.host, strconv.Itoa(int(l.advertisedBootPort())))})
		default:
			li.Brokers = s.routes(l)
		}
		out = append(out, li)
	}
	return out
}

// advertisedBootPort is the port clients are told for the bootstrap port.
func (l *listener) advertisedBootPort() int32 {
	if l.opts.AdvertisePort > 0 {
		return int32(l.opts.AdvertisePort)
	}
	return l.bootPort()
}

// advertisedPort is the port clients are told for a port of l bound at
// bound: with AdvertisePort set, every port of the listener moves by the
// same offset, AdvertisePort − the bound bootstrap port (a NAT or port
// forward that maps the listener's port layout; configs.Listener.
// AdvertisedPort), else bound.
func (l *listener) advertisedPort(bound int32) (int32, error) {
	if l.opts.AdvertisePort <= 0 {
		return bound, nil
	}
	p := int64(bound) + int64(l.opts.AdvertisePort) - int64(l.bootPort())
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %d advertised at %d (advertise port %d, bootstrap port %d): out of range 1-65535",
			bound, p, l.opts.AdvertisePort, l.bootPort())
	}
	return int32(p), nil
}

// sniRoutes is an SNI listener's map: every broker by name at the one
// port (sniAdvertise).
func (s *Server) sniRoutes(l *listener) []BrokerRoute {
	port := strconv.Itoa(int(l.advertisedBootPort()))
	bound := l.boot.Addr().String()
	if !s.upstreamMode() {
		return []BrokerRoute{{Node: 0, Upstream: "built-in", Bound: bound, Advertised: net.JoinHostPort(l.sni.brokerName(0), port)}}
	}
	out := []BrokerRoute{}
	for node, up := range s.nodes.all() {
		out = append(out, BrokerRoute{Node: node, Upstream: up, Bound: bound, Advertised: net.JoinHostPort(l.sni.brokerName(node), port)})
	}
	slices.SortFunc(out, func(a, b BrokerRoute) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// all copies the registry.
func (r *nodeRegistry) all() map[int32]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[int32]string, len(r.addrs))
	for n, a := range r.addrs {
		out[n] = a
	}
	return out
}

func (s *Server) routes(l *listener) []BrokerRoute {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]BrokerRoute, 0, len(l.brokers))
	for node, ln := range l.brokers {
		up, _ := s.nodes.get(node)
		adv := ""
		if port, err := l.advertisedPort(int32(ln.Addr().(*net.TCPAddr).Port)); err == nil {
			adv = net.JoinHostPort(l.host, strconv.Itoa(int(port)))
		}
		out = append(out, BrokerRoute{Node: node, Upstream: up, Bound: ln.Addr().String(), Advertised: adv})
	}
	slices.SortFunc(out, func(a, b BrokerRoute) int { return cmp.Compare(a.Node, b.Node) })
	return out
}
