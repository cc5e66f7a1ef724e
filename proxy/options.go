package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"time"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/policy"
)

// Options is the gateway's runtime plan, built once by cmd from the
// validated configuration. The proxy never reads the YAML itself.
type Options struct {
	Listeners []ListenerOptions

	// Upstream mode: bootstrap addresses of the upstream cluster. Empty
	// means the Local backend serves every request.
	Bootstrap       []string
	UpstreamTLS     *tls.Config // nil: plaintext
	DialTimeout     time.Duration
	MetadataRefresh time.Duration
	// Dial, if set, opens upstream TCP connections instead of net.Dialer
	// (the egress package's dialer through upstream.proxy, or a test that
	// redirects an advertised address). Every upstream dial uses it —
	// sessions and discovery — and TLS and SASL, if configured, are
	// layered on what it returns.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// UpstreamAuth, if set, authenticates every upstream connection as the
	// gateway's own identity (SASL) right after TLS, and returns the
	// session lifetime the upstream granted (0: none). A session whose
	// upstream authentication is about to expire stops reading, answers
	// what it has, and closes, so its client reconnects (and the new
	// upstream connection authenticates afresh) instead of the broker
	// closing it mid-request.
	UpstreamAuth func(ctx context.Context, conn net.Conn, addr string) (time.Duration, error)

	// ForwardUnknownAPIs relays (as bytes) requests the gateway cannot
	// decode: keys newer than this build and newer versions of keys whose
	// responses carry no address. Off: they close the connection (unknown.go).
	ForwardUnknownAPIs bool

	// Local is the built-in broker; used when Bootstrap is empty.
	Local Local

	// Answerer, if set, answers the keys it takes in the gateway itself,
	// for either backend (answer.go).
	Answerer Answerer

	// Quotas, if set, are the client quotas the gateway enforces
	// (quota_stage.go); nil or empty enforces none.
	Quotas *policy.Quotas

	MaxFrameBytes        int32
	MaxPreauthFrameBytes int32 // frame limit before SASL authentication completes
	// MaxRequestBytes caps the frames of every API but Produce, which
	// alone may use MaxFrameBytes (body.go).
	MaxRequestBytes int32
	// MaxRequestBytesInFlight is the budget of request bytes held in
	// memory across all connections (Kafka's queued.max.request.bytes);
	// at least MaxFrameBytes, so one frame always fits.
	MaxRequestBytesInFlight int64
	// MaxConnections caps client connections across listeners, and
	// MaxConnectionsPerAddress those from one IP; 0 means no cap. A
	// connection over a cap is closed at once (Kafka's max.connections and
	// max.connections.per.ip do the same).
	MaxConnections           int
	MaxConnectionsPerAddress int
	// ConnectionRatePerAddress caps new connections per second from one
	// IP (burst: the same number); 0 means no cap. AuthFailuresPerAddress
	// failed SASL authentications from one IP within AuthLockout refuse
	// its new connections for the rest of AuthLockout; 0 means no lockout.
	ConnectionRatePerAddress float64
	AuthFailuresPerAddress   int
	AuthLockout              time.Duration
	// AuthTimeout bounds how long a connection on a SASL listener may stay
	// unauthenticated (a SASL exchange that never finishes).
	AuthTimeout time.Duration
	MaxInFlight int // pipelined requests per connection before reading stops
	// SocketSendBufferBytes is the SO_SNDBUF of client connections
	// (Kafka's socket.send.buffer.bytes); 0 or below leaves the kernel's
	// autotuning (the default).
	SocketSendBufferBytes int
	// SocketUnsentBytes is the TCP_NOTSENT_LOWAT of client connections:
	// how much of a response may wait in the kernel unsent; 0 takes the
	// default (128 KiB), below 0 leaves the kernel's (no limit).
	SocketUnsentBytes int
	// TCPCongestion is the TCP congestion control algorithm (TCP_CONGESTION)
	// of client and upstream connections; "" leaves the host's. New
	// refuses a name the host does not offer.
	TCPCongestion string
	IdleTimeout   time.Duration // no frame started for this long closes the connection
	FrameTimeout  time.Duration // a started frame must finish within this (pushed forward on progress)
	DrainTimeout  time.Duration // graceful shutdown bound

	Logger *slog.Logger
	// LogSummaryInterval is how often repeated client-triggered log lines
	// (refusals, malformed frames, failed logins, TLS mistakes) are
	// summarized; the first few of each interval are logged in full
	// (package lograte). 0 means lograte's default, a minute.
	LogSummaryInterval time.Duration
	// Hooks receive metrics events (nil: none). Audit is the audit trail
	// (nil: off).
	Hooks Hooks
	Audit *audit.Trail

	// VirtualClusters are tenants' namespaces (vcluster.go), in match
	// order.
	VirtualClusters []VirtualCluster
}

// ListenerOptions describes one client-facing listener.
type ListenerOptions struct {
	Name      string
	Listen    string // bind address of the bootstrap port
	Advertise string // host clients are told to connect to
	// AdvertisePort, if set, is the port clients are told for the
	// bootstrap port (NAT, port mapping), and every other port of the
	// listener is advertised moved by the same offset (AdvertisePort −
	// the bound bootstrap port): upstream node N's port, bound at
	// BrokerPortBase+N, is advertised at AdvertisePort + (BrokerPortBase −
	// bootstrap port) + N. The built-in broker, SNI and single-port
	// listeners serve every node at the bootstrap port, advertised at
	// AdvertisePort.
	AdvertisePort int
	// BrokerPortBase: node N of the upstream is served at BrokerPortBase+N.
	// -1 means the bootstrap port + 1; 0 means a kernel-chosen port per
	// node (stable only for the life of the process; meant for tests).
	BrokerPortBase int

	// TLS, if set, makes the listener (bootstrap and broker ports) TLS;
	// with client certificates required, Principal names the client from
	// its verified certificate.
	TLS       *tls.Config
	Principal func(cert *x509.Certificate) (string, error)
	// SASL, if set, makes the gateway authenticate clients itself: until
	// then only ApiVersions, SaslHandshake and SaslAuthenticate pass, in
	// frames of at most MaxPreauthFrameBytes.
	SASL SASLServer
	// SNI, if set (TLS is then required), serves every broker at the
	// bootstrap port: the TLS server name picks the session (sni.go).
	// No per-broker port is opened and BrokerPortBase is unused.
	SNI *SNIOptions
	// SinglePort, if set (upstream mode), presents the whole upstream
	// cluster as one virtual broker at the bootstrap port and routes each
	// request to the brokers that must answer it (route.go). No per-broker
	// port is opened.
	SinglePort *SinglePortOptions
}

// setDefaults fills zero settings from the configuration's one table of
// defaults (configs.Default*), so a proxy built in code (tests) behaves as
// one provisioned from a configuration file.
func (o *Options) setDefaults() {
	if o.DialTimeout <= 0 {
		o.DialTimeout = configs.DefaultDialTimeout.D()
	}
	if o.MetadataRefresh <= 0 {
		o.MetadataRefresh = configs.DefaultMetadataRefresh.D()
	}
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = int32(configs.DefaultMaxFrameBytes)
	}
	// The request bounds (body.go): 8 MiB holds a Metadata or Fetch
	// naming 100,000 partitions several times over, and a SyncGroup of a
	// large group; Produce alone may use MaxFrameBytes.
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = int32(configs.DefaultMaxRequestBytes)
	}
	o.MaxRequestBytes = min(o.MaxRequestBytes, o.MaxFrameBytes)
	if o.MaxRequestBytesInFlight <= 0 {
		o.MaxRequestBytesInFlight = int64(configs.DefaultMaxInFlightMem)
	}
	o.MaxRequestBytesInFlight = max(o.MaxRequestBytesInFlight, int64(o.MaxFrameBytes))
	if o.MaxPreauthFrameBytes <= 0 {
		o.MaxPreauthFrameBytes = int32(configs.DefaultMaxPreauthBytes) // Kafka's sasl.server.max.receive.size
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = configs.DefaultMaxInFlight
	}
	if o.SocketUnsentBytes == 0 {
		o.SocketUnsentBytes = int(configs.DefaultSocketUnsent)
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = configs.DefaultIdleTimeout.D()
	}
	if o.FrameTimeout <= 0 {
		o.FrameTimeout = configs.DefaultFrameTimeout.D()
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = configs.DefaultDrainTimeout.D()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Hooks == nil {
		o.Hooks = noHooks{}
	}
	if o.AuthTimeout <= 0 {
		o.AuthTimeout = configs.DefaultAuthTimeout.D()
	}
	if o.AuthLockout <= 0 {
		o.AuthLockout = configs.DefaultAuthLockout.D()
	}
}
