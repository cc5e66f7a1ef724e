package proxy

import (
	"cmp"
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
	Mode      string        `json:"mode"`      // how brokers are addressed: port-per-broker
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
// changed. Read loop only (it owns the fields it copies).
func (s *session) publishIdent() {
	cur := s.ident.Load()
	if cur != nil && cur.clientID == s.subj.ClientID && cur.principal == s.subj.Principal &&
		cur.softwareName == s.softwareName && cur.softwareVersion == s.softwareVersion {
		return
	}
	s.ident.Store(&connIdent{s.subj.ClientID, s.subj.Principal, s.softwareName, s.softwareVersion})
}

// Connections lists the open client connections, oldest first.
func (s *Server) Connections() []ConnInfo {
	s.mu.Lock()
	out := make([]ConnInfo, 0, len(s.sessions))
	for sess := range s.sessions {
		ci := ConnInfo{ID: sess.id, Listener: sess.l.opts.Name, Remote: sess.remote, Node: sess.node,
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
		if !s.upstreamMode() {
			port := int(l.bootPort())
			if l.opts.AdvertisePort > 0 {
				port = l.opts.AdvertisePort
			}
			li.Brokers = append(li.Brokers, BrokerRoute{Node: 0, Upstream: "built-in", Bound: li.Bound,
				Advertised: net.JoinHostPort(l.host, strconv.Itoa(port))})
		} else {
			li.Brokers = s.routes(l)
		}
		out = append(out, li)
	}
	return out
}

func (s *Server) routes(l *listener) []BrokerRoute {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]BrokerRoute, 0, len(l.brokers))
	for node, ln := range l.brokers {
		up, _ := s.nodes.get(node)
		port := ln.Addr().(*net.TCPAddr).Port // broker ports are advertised as bound
		out = append(out, BrokerRoute{Node: node, Upstream: up, Bound: ln.Addr().String(),
			Advertised: net.JoinHostPort(l.host, strconv.Itoa(port))})
	}
	slices.SortFunc(out, func(a, b BrokerRoute) int { return cmp.Compare(a.Node, b.Node) })
	return out
}
