package configs

import "math"

// listenerSinglePort checks a "brokers: single-port" listener: the whole
// upstream cluster is presented as one virtual broker at the listen port,
// and the gateway routes each request (or each partition of it) to the
// upstream broker that must answer it.
func (v *validator) listenerSinglePort(p string, l *Listener) {
	if l.SNI != nil {
		v.errf(p+".sni", nil, "sni is set but brokers is %q: set brokers: %s", l.Brokers, BrokersSNI)
	}
	if l.BrokerPortBase != nil {
		v.errf(p+".broker_port_base", l.BrokerPortBase, "brokers: single-port serves the whole cluster at the listen port: remove broker_port_base")
	}
	if n := l.VirtualNode; n != nil && (*n < 0 || *n > math.MaxInt32) {
		v.errf(p+".virtual_node", *n, "the virtual node id must be 0 or more and fit an int32 (Kafka node ids are non-negative)")
	}
	if !v.c.UpstreamMode() {
		v.errf(p+".brokers", l.Brokers, "brokers: single-port routes requests over an upstream cluster: the built-in broker is already one node at one port, use %s", BrokersPortPerBroker)
	}
	if u := v.c.Upstream; u != nil && u.SASL != nil && u.SASL.Passthrough {
		v.errf(p+".brokers", l.Brokers, "brokers: single-port cannot relay the client's SASL exchange (upstream.sasl: passthrough): one client connection fans out to several upstream brokers, and a SASL exchange authenticates exactly one connection. Terminate SASL at the listener (listeners[].sasl) and give the gateway its own upstream.sasl credentials")
	}
}

// FetchesAhead reports whether a single-port listener fetches ahead.
func (l *Listener) FetchesAhead() bool {
	return l.FetchAhead == nil || *l.FetchAhead
}

// VirtualNodeID returns the node id a single-port listener presents.
func (l *Listener) VirtualNodeID() int32 {
	if l.VirtualNode == nil {
		return 0
	}
	return int32(*l.VirtualNode)
}
