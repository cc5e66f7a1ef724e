package configs

import "fmt"

// ConnsPerClientPerBroker is how many connections one ordinary client may
// open to each broker it talks to: franz-go (kgo) keeps separate
// connections per broker for produce, fetch, group and slow requests plus
// one for everything else; librdkafka and the Java client open one per
// broker. A client in a consumer group also talks to its group
// coordinator, one more.
const ConnsPerClientPerBroker = 5

// ClientConnections is what one ordinary client can open through the
// gateway: ConnsPerClientPerBroker per broker plus the bootstrap
// connection. The number of upstream brokers is not known before
// metadata arrives; the bootstrap list is its lower bound (the built-in
// broker is one node).
func (c *Config) ClientConnections() int {
	brokers := 1
	if c.UpstreamMode() {
		brokers = max(1, len(c.Upstream.Bootstrap))
	}
	return ConnsPerClientPerBroker*brokers + 1
}

// limitsWarnings reports limits that are valid but likely to refuse a
// legitimate workload (part of Warnings).
func (c *Config) limitsWarnings() []string {
	var out []string
	l := c.Limits
	if n := l.MaxConnectionsPerAddress; n > 0 && n < c.ClientConnections() {
		out = append(out, fmt.Sprintf("limits.max_connections_per_address: %d is below what one ordinary client opens (%d: up to %d connections per broker plus bootstrap); a single client will be refused, and clients behind one NAT or load balancer share the cap",
			n, c.ClientConnections(), ConnsPerClientPerBroker))
	}
	if n := l.ConnectionRatePerAddress; n > 0 && n < c.ClientConnections() {
		out = append(out, fmt.Sprintf("limits.connection_rate_per_address: %d/s is below what one ordinary client opens at start (%d connections); clients will be refused while they connect",
			n, c.ClientConnections()))
	}
	return out
}
