// Package egress dials upstream brokers through a forward proxy: SOCKS5
// (golang.org/x/net/proxy; host names are sent to the proxy, which
// resolves them) or HTTP CONNECT (RFC 9110 §9.3.6), plainly or over TLS
// to the proxy, with a no_proxy list of destinations dialled directly.
//
// The gateway gives the Dialer's DialContext to the proxy as its Dial
// hook, so every upstream connection — bootstrap, discovered brokers,
// discovery refreshes — goes through it, and upstream TLS and SASL are
// layered on the tunnel.
package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/proxy"
)

// Errors a dial through the proxy can be classified by (errors.Is).
var (
	// ErrProxyUnreachable: no TCP (or TLS) connection to the proxy itself.
	ErrProxyUnreachable = errors.New("proxy unreachable")
	// ErrProxyAuth: the proxy refused the credentials (HTTP 407 or 401, SOCKS5
	// username/password failure or no acceptable method).
	ErrProxyAuth = errors.New("proxy authentication failed")
	// ErrProxyRefused: the proxy answered but would not open the tunnel
	// (any other HTTP status than 200, a SOCKS5 failure reply).
	ErrProxyRefused = errors.New("proxy refused the tunnel")
)

// Config is what New needs.
type Config struct {
	// URL is socks5://, socks5h://, http:// or https://, with optional
	// user:password.
	URL *url.URL
	// NoProxy entries: "*", IPs, CIDRs, host names (matching the name and
	// its subdomains; a leading dot is the same).
	NoProxy []string
	// TLS is the client configuration towards an https:// proxy (nil:
	// system roots, server name from the URL).
	TLS *tls.Config
	// Timeout bounds reaching the proxy when the context has no deadline.
	Timeout time.Duration
}

// Dialer dials through the proxy, or directly for no_proxy destinations.
// It is safe for concurrent use.
type Dialer struct {
	url     *url.URL
	direct  net.Dialer
	bypass  noProxy
	tlsConf *tls.Config
	socks   proxy.ContextDialer // socks5 only
}

// New builds a Dialer. The URL must already be validated (configs
// ParseProxyURL); New still refuses an unknown scheme.
func New(cfg Config) (*Dialer, error) {
	if cfg.URL == nil {
		return nil, errors.New("egress: no proxy URL")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	d := &Dialer{
		url:    cfg.URL,
		direct: net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second},
		bypass: parseNoProxy(cfg.NoProxy),
	}
	switch cfg.URL.Scheme {
	case "socks5", "socks5h":
		var auth *proxy.Auth
		if u := cfg.URL.User; u != nil {
			pw, _ := u.Password()
			auth = &proxy.Auth{User: u.Username(), Password: pw}
		}
		sd, err := proxy.SOCKS5("tcp", cfg.URL.Host, auth, reachDialer{d})
		if err != nil {
			return nil, fmt.Errorf("egress: socks5 %s: %w", cfg.URL.Redacted(), err)
		}
		d.socks = sd.(proxy.ContextDialer)
	case "http":
	case "https":
		d.tlsConf = cfg.TLS
		if d.tlsConf == nil {
			d.tlsConf = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		d.tlsConf = d.tlsConf.Clone()
		if d.tlsConf.ServerName == "" {
			d.tlsConf.ServerName = cfg.URL.Hostname()
		}
	default:
		return nil, fmt.Errorf("egress: scheme %q is not a supported proxy", cfg.URL.Scheme)
	}
	return d, nil
}

// String names the proxy without its password, for logs.
func (d *Dialer) String() string { return d.url.Redacted() }

// DialContext opens a connection to addr (host:port) through the proxy,
// or directly when addr matches no_proxy.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("egress: %q: %w", addr, err)
	}
	if d.bypass.match(host) {
		return d.direct.DialContext(ctx, network, addr)
	}
	if d.socks != nil {
		c, err := d.socks.DialContext(ctx, network, addr)
		if err != nil {
			return nil, classifySOCKS(d.url, addr, err)
		}
		return c, nil
	}
	c, err := d.reach(ctx)
	if err != nil {
		return nil, err
	}
	tc, err := connect(ctx, c, addr, d.url.User)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("via proxy %s: %w", d.url.Redacted(), err)
	}
	return tc, nil
}

// reach opens the connection to the proxy itself (TLS for https://).
func (d *Dialer) reach(ctx context.Context) (net.Conn, error) {
	c, err := d.direct.DialContext(ctx, "tcp", d.url.Host)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrProxyUnreachable, d.url.Redacted(), err)
	}
	if d.tlsConf == nil {
		return c, nil
	}
	tc := tls.Client(c, d.tlsConf)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: TLS handshake with %s: %w", ErrProxyUnreachable, d.url.Redacted(), err)
	}
	return tc, nil
}

// reachDialer is the SOCKS5 client's way to the proxy, so that failing
// to reach it is told apart from the proxy's own answers.
type reachDialer struct{ d *Dialer }

func (r reachDialer) Dial(network, addr string) (net.Conn, error) {
	return r.DialContext(context.Background(), network, addr)
}

func (r reachDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := r.d.direct.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProxyUnreachable, err)
	}
	return c, nil
}

// classifySOCKS wraps an error of x/net's SOCKS5 client with the class
// of failure. Its messages are not typed, so the authentication ones are
// recognised by text (golang.org/x/net/internal/socks).
func classifySOCKS(u *url.URL, addr string, err error) error {
	var class error
	msg := err.Error()
	switch {
	case errors.Is(err, ErrProxyUnreachable):
		return fmt.Errorf("via proxy %s to %s: %w", u.Redacted(), addr, unwrapOp(err))
	case strings.Contains(msg, "authentication failed"), strings.Contains(msg, "no acceptable authentication methods"),
		strings.Contains(msg, "invalid username/password"):
		class = ErrProxyAuth
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("via proxy %s to %s: %w", u.Redacted(), addr, err)
	default:
		class = ErrProxyRefused
	}
	return fmt.Errorf("via proxy %s to %s: %w: %w", u.Redacted(), addr, class, unwrapOp(err))
}

// unwrapOp drops the net.OpError layer x/net adds (its text repeats the
// addresses already in our message).
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
