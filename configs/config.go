package configs

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"
)

// Enumerated values. The YAML spells them exactly like this.
const (
	// Broker.Fsync
	FsyncAlways   = "always"   // fsync before acknowledging a produce (group commit)
	FsyncInterval = "interval" // fsync every Broker.FsyncInterval
	FsyncNever    = "never"    // leave flushing to the OS

	// Listener.Brokers
	BrokersPortPerBroker = "port-per-broker" // one port per broker: base + node id
	BrokersSNI           = "sni"             // one TLS port; the broker is chosen by the TLS server name
	BrokersSinglePort    = "single-port"     // the whole cluster as one virtual broker (single_port.go)

	// Admin.Listen value that disables the admin server.
	AdminOff = "off"

	// DefaultListenerName is the name of the first listener when it has none.
	DefaultListenerName = "default"
)

// ErrBrokerPort is returned by Listener.BrokerPort when a node id has no
// port in the listener's range.
var ErrBrokerPort = errors.New("node id has no port in the listener's broker port range")

// Config is the whole tollgate configuration. Build one with Default (then
// change fields and call Validate) or with Parse/Load.
type Config struct {
	Listeners []Listener `yaml:"listeners"`
	// Upstream is the Kafka cluster behind the gateway. Nil, or an empty
	// bootstrap list, means the built-in broker is the backend.
	Upstream *Upstream `yaml:"upstream,omitempty"`
	Broker   Broker    `yaml:"broker"`
	Admin    Admin     `yaml:"admin"`
	Limits   Limits    `yaml:"limits"`
	Log      Log       `yaml:"log"`
	// Policy is the access policy (see policy.go and package policy).
	Policy Policy `yaml:"policy"`
	Audit  Audit  `yaml:"audit"`
	// VirtualClusters are tenants' namespaces (vcluster.go; README,
	// "Virtual clusters").
	VirtualClusters []VirtualCluster `yaml:"virtual_clusters,omitempty"`

	// meta remembers where each field came from when the config was
	// parsed, so Validate can name the line. Nil for configs built in code.
	meta *sourceMeta
}

// Listener is one client-facing bind address of the gateway.
type Listener struct {
	// Name identifies the listener in rules, metrics and logs. The first
	// listener defaults to "default"; the others must be named. Names are
	// unique and made of letters, digits, '-', '_' and '.'.
	Name string `yaml:"name"`
	// Listen is the host:port of the bootstrap port. An empty host or
	// 0.0.0.0 / :: binds every interface; port 0 asks the kernel for one.
	Listen string `yaml:"listen"`
	// Advertise is the host (or host:port) clients are told to connect to.
	// Empty means AdvertisedHost's default. A port is the advertised
	// bootstrap port, and shifts every port of the listener by the same
	// amount (NAT, port forwarding). See AdvertisedHost/AdvertisedPort.
	Advertise string `yaml:"advertise,omitempty"`
	// Brokers selects how clients reach individual brokers:
	// "port-per-broker" (a port per node) or "sni" (one TLS port, the
	// node chosen by the server name the client sends; see SNI).
	Brokers string `yaml:"brokers"`
	// BrokerPortBase is the port of node 0; node N is served at base+N on
	// the listen host. Nil means the listen port + 1 (or kernel-chosen
	// ports when the listen port is 0); 0 means every broker port is
	// chosen by the kernel (tests).
	BrokerPortBase *int `yaml:"broker_port_base,omitempty"`

	// TLS, when set, makes the listener speak TLS (see security.go).
	TLS *ListenerTLS `yaml:"tls,omitempty"`
	// SASL, when set, makes the gateway the SASL server on this listener.
	SASL *ListenerSASL `yaml:"sasl,omitempty"`
	// SNI names the hosts of a "brokers: sni" listener (see edge.go).
	SNI *ListenerSNI `yaml:"sni,omitempty"`
	// VirtualNode is the node id a "brokers: single-port" listener
	// presents the whole cluster as (default 0; see single_port.go).
	VirtualNode *int `yaml:"virtual_node,omitempty"`
	// FetchAhead makes a "brokers: single-port" listener ask each broker
	// for the records a consumer will ask next as soon as an answer is
	// sent, not when the consumer's next Fetch arrives (default true; see
	// the proxy's route_fetch_ahead.go).
	FetchAhead *bool `yaml:"fetch_ahead,omitempty"`
}

// Upstream is the Kafka cluster the gateway forwards to.
type Upstream struct {
	// Bootstrap lists host:port seed brokers. YAML also accepts a single
	// string, comma-separated like Kafka's bootstrap.servers.
	Bootstrap []string `yaml:"bootstrap"`
	// TLS, when set (even to {}), makes upstream connections use TLS.
	TLS *UpstreamTLS `yaml:"tls,omitempty"`
	// SASL is the gateway's own identity towards the brokers, or
	// passthrough (see security.go). Nil: no SASL upstream.
	SASL *UpstreamSASL `yaml:"sasl,omitempty"`
	// DialTimeout bounds one TCP (and TLS) connect to a broker.
	DialTimeout Duration `yaml:"dial_timeout"`
	// Proxy is a forward proxy every upstream connection goes through:
	// socks5://[user:pass@]host:port, http://[user:pass@]host:port
	// (HTTP CONNECT) or https://… (TLS to the proxy). Empty: direct.
	Proxy string `yaml:"proxy,omitempty"`
	// ProxyCA verifies an https:// proxy's certificate (default: the
	// system roots).
	ProxyCA string `yaml:"proxy_ca,omitempty"`
	// NoProxy lists upstream hosts dialled directly: host names (a
	// leading dot, or none, also matches subdomains), IP addresses, CIDRs,
	// or "*".
	NoProxy []string `yaml:"no_proxy,omitempty"`
	// MetadataRefresh is how often the gateway refreshes its view of the
	// upstream brokers.
	MetadataRefresh Duration `yaml:"metadata_refresh"`
	// ForwardUnknownAPIs relays requests the gateway cannot decode (keys
	// newer than this build, up to 127; newer versions of keys whose
	// responses carry no address) instead of closing the connection.
	// Policy can still deny them by key number or the group "unknown".
	ForwardUnknownAPIs bool `yaml:"forward_unknown_apis,omitempty"`

	// proxyURL is Proxy as Validate parsed it (ProxyURL).
	proxyURL *parsedProxyURL
}

// UpstreamTLS configures TLS towards the upstream brokers. Files are PEM.
type UpstreamTLS struct {
	// CA is a bundle to verify brokers with; empty means the system roots.
	CA string `yaml:"ca,omitempty"`
	// Cert and Key are a client certificate for mTLS; set both or neither.
	Cert string `yaml:"cert,omitempty"`
	Key  string `yaml:"key,omitempty"`
	// ServerName overrides the name verified in broker certificates
	// (default: the host of the address being dialled).
	ServerName string `yaml:"server_name,omitempty"`
	// InsecureSkipVerify disables certificate verification (testing only).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify,omitempty"`

	// parsed is what Validate parsed (Material).
	parsed *upstreamTLSParsed
}

// Broker configures the built-in broker, used when there is no upstream.
type Broker struct {
	// DataDir holds the logs; relative paths are relative to the working
	// directory of the process (not the config file).
	DataDir string `yaml:"data_dir"`
	// Fsync is always, interval or never.
	Fsync string `yaml:"fsync"`
	// FsyncInterval is the flush period used when Fsync is "interval".
	FsyncInterval Duration `yaml:"fsync_interval"`
	// AutoCreateTopics creates a topic on first Metadata/Produce request,
	// as Kafka's auto.create.topics.enable.
	AutoCreateTopics bool `yaml:"auto_create_topics"`
	// Defaults are topic config defaults by Kafka name, stored in Kafka's
	// own string form (see TopicConfigNames and CanonicalTopicConfig).
	Defaults map[string]string `yaml:"defaults,omitempty"`
	// CleanerDedupeBuffer bounds the log cleaner's key -> offset map
	// (Kafka's log.cleaner.dedupe.buffer.size, 128MiB).
	CleanerDedupeBuffer Size `yaml:"cleaner_dedupe_buffer"`
	// CleanerBackoff is how often the log cleaner looks for compacted
	// partitions to clean (log.cleaner.backoff.ms, 15s).
	CleanerBackoff Duration `yaml:"cleaner_backoff"`
	// NodeID is the built-in broker's node id (Kafka's node.id), 0 by
	// default. Nothing stored depends on it, so it may change between
	// runs; the gateway passes node ids through unchanged.
	NodeID int `yaml:"node_id"`
}

// Admin configures the HTTP admin server (/metrics, /healthz, /readyz,
// /tap, and the web console under /ui/; see admin.go).
type Admin struct {
	// Listen is host:port, or "off" to disable the admin server.
	Listen string `yaml:"listen"`
	// Auth, when set, is required on every path but /healthz and /readyz.
	Auth *AdminAuth `yaml:"auth,omitempty"`
	// TLS, when set, serves the admin server over HTTPS.
	TLS *AdminTLS `yaml:"tls,omitempty"`
	// UI is the web console.
	UI AdminUI `yaml:"ui"`
	// AllowedHosts are host names (no port) requests may carry in their
	// Host header besides the listen host, loopback names and IP
	// addresses; anything else is refused, against DNS rebinding
	// (metrics/adminhost.go).
	AllowedHosts []string `yaml:"allowed_hosts,omitempty"`
}

// Limits bound what one client can make the gateway hold.
type Limits struct {
	// MaxFrameBytes caps a request frame (like socket.request.max.bytes).
	MaxFrameBytes Size `yaml:"max_frame_bytes"`
	// MaxPreauthFrameBytes caps frames before authentication completes.
	MaxPreauthFrameBytes Size `yaml:"max_preauth_frame_bytes"`
	// MaxRequestBytes caps the frames of every API but Produce (which
	// alone may use MaxFrameBytes): no other request needs 100 MiB, and a
	// Metadata of that size decodes into gigabytes.
	MaxRequestBytes Size `yaml:"max_request_bytes"`
	// MaxRequestBytesInFlight is the memory budget for request bodies
	// held across all connections (Kafka's queued.max.request.bytes);
	// when it is spent the gateway stops reading until requests finish.
	MaxRequestBytesInFlight Size `yaml:"max_request_bytes_in_flight"`
	// MaxConnections caps client connections across all listeners.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerAddress caps connections from one client IP; 0
	// means no per-address cap (clients behind one NAT or load balancer).
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// MaxInFlight caps pipelined requests per connection awaiting a response.
	MaxInFlight int `yaml:"max_in_flight"`
	// SocketSendBufferBytes is the SO_SNDBUF of client connections, as
	// Kafka's socket.send.buffer.bytes; 0 leaves the kernel's autotuning
	// (Kafka's -1), the default.
	SocketSendBufferBytes Size `yaml:"socket_send_buffer_bytes"`
	// SocketUnsentBytes is the TCP_NOTSENT_LOWAT of client connections:
	// what of a response may wait unsent in the kernel for a client that
	// does not read; 0 leaves the kernel's default (no limit).
	SocketUnsentBytes Size `yaml:"socket_unsent_bytes"`
	// TCPCongestionControl is the TCP congestion control algorithm
	// (TCP_CONGESTION, tcp(7)) of tollgate's own connections: to clients
	// and to the upstream cluster (direct, or to a plain http:// egress
	// proxy; not a SOCKS5 or https:// proxy's tunnel, nor the Kafka audit
	// sink's client). "" leaves the host's (net.ipv4.tcp_congestion_control),
	// the default. Linux only.
	TCPCongestionControl string `yaml:"tcp_congestion_control"`
	// IdleTimeout closes a connection with no request for this long
	// (like connections.max.idle.ms).
	IdleTimeout Duration `yaml:"idle_timeout"`
	// FrameTimeout bounds one frame once its first byte has arrived; the
	// deadline moves forward whenever bytes make progress.
	FrameTimeout Duration `yaml:"frame_timeout"`
	// DrainTimeout bounds graceful shutdown.
	DrainTimeout Duration `yaml:"drain_timeout"`
	// ConnectionRatePerAddress caps new connections per second from one
	// IP (like Kafka's max.connection.creation.rate, per address); 0 = no cap.
	ConnectionRatePerAddress int `yaml:"connection_rate_per_address"`
	// AuthFailuresPerAddress failed SASL authentications from one IP within
	// AuthLockout refuse its new connections for the rest of AuthLockout;
	// 0 = no lockout.
	AuthFailuresPerAddress int      `yaml:"auth_failures_per_address"`
	AuthLockout            Duration `yaml:"auth_lockout"`
	// AuthTimeout closes connections on a SASL listener that are still
	// unauthenticated this long after they opened.
	AuthTimeout Duration `yaml:"auth_timeout"`
}

// Log configures tollgate's own log output.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // json | text
}

// Default values, shared by Default, the decoder (a section or list entry
// the file mentions starts from these) and the docs. This is the one table
// of defaults: proxy.Options and broker.Config fill their zero settings
// from it too (DESIGN.md, "Configuration → plan → gateway").
const (
	DefaultListen           = "127.0.0.1:9092"
	DefaultAdminListen      = "127.0.0.1:9089" // below the default bootstrap port, so no broker port (bootstrap+1+N) can be it
	DefaultDataDir          = "./tollgate-data"
	DefaultMaxFrameBytes    = 100 * MiB
	DefaultMaxPreauthBytes  = 512 * KiB
	DefaultMaxRequestBytes  = 8 * MiB
	DefaultMaxInFlightMem   = 512 * MiB
	DefaultMaxConnections   = 10000
	DefaultMaxConnsPerAddr  = 0 // no cap, as Kafka's max.connections.per.ip
	DefaultMaxInFlight      = 100
	DefaultSocketSendBuffer = Size(0)         // autotuned; Kafka's socket.send.buffer.bytes is 102400 (README "Limits")
	DefaultSocketUnsent     = Size(128 * KiB) // TCP_NOTSENT_LOWAT: what a stalled client holds in the kernel
	DefaultDialTimeout      = Duration(10 * time.Second)
	DefaultMetadataRefresh  = Duration(30 * time.Second)
	DefaultFsyncInterval    = Duration(50 * time.Millisecond)
	DefaultCleanerDedupe    = Size(128 << 20)
	DefaultCleanerBackoff   = Duration(15 * time.Second)
	DefaultIdleTimeout      = Duration(10 * time.Minute)
	DefaultFrameTimeout     = Duration(30 * time.Second)
	DefaultDrainTimeout     = Duration(15 * time.Second)
	DefaultConnRatePerAddr  = 0 // no cap, as Kafka's max.connection.creation.rate
	DefaultAuthFailures     = 10
	DefaultAuthLockout      = Duration(time.Minute)
	DefaultAuthTimeout      = Duration(10 * time.Second)
)

// Default returns a configuration with every default filled in: one
// listener on 127.0.0.1:9092 and the built-in broker as the backend.
func Default() *Config {
	c := &Config{
		Listeners: []Listener{defaultListener()},
		Broker: Broker{
			DataDir:          DefaultDataDir,
			Fsync:            FsyncAlways,
			FsyncInterval:    DefaultFsyncInterval,
			AutoCreateTopics: true,

			CleanerDedupeBuffer: DefaultCleanerDedupe,
			CleanerBackoff:      DefaultCleanerBackoff,
		},
		Admin: Admin{Listen: DefaultAdminListen, UI: AdminUI{Enabled: true, Principal: DefaultConsolePrincipal}},
		Limits: Limits{
			MaxFrameBytes:            DefaultMaxFrameBytes,
			MaxPreauthFrameBytes:     DefaultMaxPreauthBytes,
			MaxRequestBytes:          DefaultMaxRequestBytes,
			MaxRequestBytesInFlight:  DefaultMaxInFlightMem,
			MaxConnections:           DefaultMaxConnections,
			MaxConnectionsPerAddress: DefaultMaxConnsPerAddr,
			MaxInFlight:              DefaultMaxInFlight,
			SocketSendBufferBytes:    DefaultSocketSendBuffer,
			SocketUnsentBytes:        DefaultSocketUnsent,
			IdleTimeout:              DefaultIdleTimeout,
			FrameTimeout:             DefaultFrameTimeout,
			DrainTimeout:             DefaultDrainTimeout,
			ConnectionRatePerAddress: DefaultConnRatePerAddr,
			AuthFailuresPerAddress:   DefaultAuthFailures,
			AuthLockout:              DefaultAuthLockout,
			AuthTimeout:              DefaultAuthTimeout,
		},
		Log:    Log{Level: "info", Format: "text"},
		Audit:  defaultAudit(),
		Policy: Policy{Default: PolicyAllow},
	}
	c.Listeners[0].Name = DefaultListenerName
	return c
}

func defaultListener() Listener {
	return Listener{Listen: DefaultListen, Brokers: BrokersPortPerBroker}
}

// NewUpstream returns an Upstream with the given bootstrap list and the
// default timeouts, for code (flags) that builds a config.
func NewUpstream(bootstrap ...string) *Upstream {
	u := &Upstream{Bootstrap: bootstrap}
	u.setDefaults()
	return u
}

// setDefaults is called by the decoder on a section or list entry it
// allocates, so fields the file leaves out keep their defaults.
func (u *Upstream) setDefaults() {
	u.DialTimeout = DefaultDialTimeout
	u.MetadataRefresh = DefaultMetadataRefresh
}

func (l *Listener) setDefaults() { *l = defaultListener() }

// UpstreamMode reports whether the gateway forwards to an upstream cluster
// (true) or serves from the built-in broker (false).
func (c *Config) UpstreamMode() bool {
	return c.Upstream != nil && len(c.Upstream.Bootstrap) > 0
}

// Enabled reports whether the admin server should run.
func (a Admin) Enabled() bool { return a.Listen != AdminOff && a.Listen != "" }

// SlogLevel maps Level to a slog.Level (info for anything unknown; Validate
// rejects unknown levels).
func (l Log) SlogLevel() slog.Level {
	switch l.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// ListenPort returns the port part of Listen (0 = kernel-chosen).
func (l *Listener) ListenPort() (int, error) {
	_, port, err := splitHostPort(l.Listen, true)
	return port, err
}

// AdvertisedHost is the host clients are told to connect to: the host of
// Advertise when set; otherwise the listen host, unless that is a
// wildcard (empty, 0.0.0.0, ::), in which case the machine's hostname, as
// Kafka does for an advertised listener with no host. Binding every
// interface means remote clients are expected, and 127.0.0.1 would send
// them to their own machine. If the hostname cannot be read, "localhost".
func (l *Listener) AdvertisedHost() string {
	if l.Advertise != "" {
		if h, _, err := splitAdvertise(l.Advertise); err == nil {
			return h
		}
		return l.Advertise
	}
	host, _, err := splitHostPort(l.Listen, true)
	if err == nil && !isWildcard(host) {
		return host
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

// AdvertisedPort is the bootstrap port clients are told: the port of
// Advertise when it has one, else bound (the port the listener actually
// bound, which differs from the configured one when that is 0).
//
// A port in Advertise means the listener is reached through a port
// mapping that moves every port by one offset, advertise port − listen
// port: the bootstrap port is advertised at the advertise port, and on a
// port-per-broker listener in front of an upstream, node N (bound at
// BrokerPort(N), base + N) at advertise port + (base − listen port) + N;
// with the default base (listen port + 1) that is advertise port + 1 + N.
// The built-in broker and sni and single-port listeners serve every node
// at the one port, so they advertise only the advertise port. Validate
// refuses what this cannot honour (kernel-chosen ports on such a
// port-per-broker listener, a shifted range out of 1-65535, a collision
// with another listener's advertised ports).
func (l *Listener) AdvertisedPort(bound int) int {
	if p := l.advertisePort(); p != 0 {
		return p
	}
	return bound
}

// advertisePort is the port of Advertise, 0 when it has none.
func (l *Listener) advertisePort() int {
	if _, p, err := splitAdvertise(l.Advertise); err == nil {
		return p
	}
	return 0
}

// BrokerPortBaseOrDefault returns the effective broker port base: the
// configured one, else listen port + 1, else 0 (kernel-chosen) when the
// listen port is 0.
func (l *Listener) BrokerPortBaseOrDefault() int {
	if l.BrokerPortBase != nil {
		return *l.BrokerPortBase
	}
	p, err := l.ListenPort()
	if err != nil || p == 0 {
		return 0
	}
	return p + 1
}

// BrokerPort returns the port to bind for a node id: base + node, or 0 to
// let the kernel choose when the base is 0. It fails with ErrBrokerPort
// when the node id is negative or base + node is above 65535.
func (l *Listener) BrokerPort(node int32) (int, error) {
	base := l.BrokerPortBaseOrDefault()
	if node < 0 {
		return 0, fmt.Errorf("listener %s node %d: %w", l.Name, node, ErrBrokerPort)
	}
	if base == 0 {
		return 0, nil
	}
	p := int64(base) + int64(node)
	if p > 65535 {
		return 0, fmt.Errorf("listener %s node %d: port %d > 65535: %w", l.Name, node, p, ErrBrokerPort)
	}
	return int(p), nil
}

// splitHostPort splits "host:port" and checks the port range; zeroOK
// allows port 0.
func splitHostPort(addr string, zeroOK bool) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, errors.New(trimAddrErr(err))
	}
	port, err := parsePort(ps, zeroOK)
	if err != nil {
		return "", 0, err
	}
	return host, port, nil
}

// splitAdvertise accepts "host" or "host:port" (port 1-65535); the port is
// 0 when absent.
func splitAdvertise(addr string) (string, int, error) {
	if host, ps, err := net.SplitHostPort(addr); err == nil {
		port, err := parsePort(ps, false)
		return host, port, err
	}
	// A bare IPv6 address has colons but no port.
	if len(addr) > 1 && addr[0] == '[' && addr[len(addr)-1] == ']' {
		return addr[1 : len(addr)-1], 0, nil
	}
	return addr, 0, nil
}

func parsePort(ps string, zeroOK bool) (int, error) {
	port, err := strconv.Atoi(ps)
	if err != nil {
		return 0, fmt.Errorf("port %q is not a number", ps)
	}
	if port < 0 || port > 65535 || (port == 0 && !zeroOK) {
		if zeroOK {
			return 0, fmt.Errorf("port %d is out of range 0-65535", port)
		}
		return 0, fmt.Errorf("port %d is out of range 1-65535", port)
	}
	return port, nil
}

// trimAddrErr drops the "address x: " prefix net.AddrError adds, since our
// messages quote the address themselves.
func trimAddrErr(err error) string {
	var ae *net.AddrError
	if errors.As(err, &ae) {
		return ae.Err
	}
	return err.Error()
}

func isWildcard(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
