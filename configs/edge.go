package configs

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Values of ListenerSNI.NoSNI.
const (
	NoSNIRefuse    = "refuse"    // a TLS hello without a server name is refused (default)
	NoSNIBootstrap = "bootstrap" // such a hello opens a bootstrap session
)

// NodePlaceholder stands for the node id in ListenerSNI.BrokerHost.
const NodePlaceholder = "{node}"

// Schemes of Upstream.Proxy.
const (
	ProxySOCKS5  = "socks5"  // SOCKS5; host names are resolved by the proxy
	ProxySOCKS5H = "socks5h" // the same (curl's name for it)
	ProxyHTTP    = "http"    // HTTP CONNECT
	ProxyHTTPS   = "https"   // HTTP CONNECT over TLS to the proxy
)

// ListenerSNI configures a "brokers: sni" listener: one TLS port, and the
// server name (SNI) of each client's TLS hello picks the session.
type ListenerSNI struct {
	// BootstrapHost is the name clients bootstrap with; it opens a
	// bootstrap session.
	BootstrapHost string `yaml:"bootstrap_host"`
	// BrokerHost is the name of each broker, with {node} (exactly once,
	// inside one DNS label) standing for its node id:
	// "b{node}.kafka.example.com". The gateway advertises these names.
	BrokerHost string `yaml:"broker_host"`
	// NoSNI decides a hello that names no server: refuse (default) or
	// bootstrap.
	NoSNI string `yaml:"no_sni,omitempty"`
}

// BootstrapOnNoSNI reports whether a hello without SNI is a bootstrap
// session.
func (s *ListenerSNI) BootstrapOnNoSNI() bool { return s.NoSNI == NoSNIBootstrap }

// listenerSNI checks a "brokers: sni" listener and its sni section.
func (v *validator) listenerSNI(p string, l *Listener) {
	s := l.SNI
	if s == nil {
		v.errf(p+".sni", nil, "brokers: sni needs an sni section with bootstrap_host and broker_host (e.g. broker_host: \"b{node}.kafka.example.com\")")
		return
	}
	if l.TLS == nil {
		v.errf(p+".brokers", l.Brokers, "brokers: sni needs a tls section: the broker is chosen by the TLS server name, which a plaintext listener never sees")
	}
	if l.BrokerPortBase != nil {
		v.errf(p+".broker_port_base", l.BrokerPortBase, "brokers: sni serves every broker at the listen port: remove broker_port_base")
	}
	bootOK := v.sniBootstrap(p+".sni.bootstrap_host", s.BootstrapHost)
	brokerOK := v.sniBrokerHost(p+".sni.broker_host", s.BrokerHost)
	if bootOK && brokerOK && MatchBrokerHost(s.BrokerHost, s.BootstrapHost) >= 0 {
		v.errf(p+".sni.bootstrap_host", s.BootstrapHost, "%q is also a broker name under broker_host %q: pick names that cannot be confused", s.BootstrapHost, s.BrokerHost)
	}
	switch s.NoSNI {
	case "", NoSNIRefuse, NoSNIBootstrap:
	default:
		v.errf(p+".sni.no_sni", s.NoSNI, "%q: want %s or %s", s.NoSNI, NoSNIRefuse, NoSNIBootstrap)
	}
	if l.Advertise != "" && bootOK {
		if host, _, err := splitAdvertise(l.Advertise); err == nil && !strings.EqualFold(strings.TrimSuffix(host, "."), strings.TrimSuffix(s.BootstrapHost, ".")) {
			v.errf(p+".advertise", l.Advertise, "in sni mode clients are told the sni names; advertise sets only the port: write %s:PORT", s.BootstrapHost)
		}
	}
}

func (v *validator) sniBootstrap(path, host string) bool {
	switch {
	case host == "":
		v.errf(path, host, "bootstrap_host is required: the name clients bootstrap with")
	case net.ParseIP(host) != nil:
		v.errf(path, host, "%q is an IP address: TLS clients send no server name for an address, so it must be a DNS name", host)
	case !validHost(host) || strings.Contains(host, "_"):
		v.errf(path, host, "%q is not a DNS name", host)
	default:
		return true
	}
	return false
}

func (v *validator) sniBrokerHost(path, pattern string) bool {
	if err := checkBrokerHost(pattern); err != nil {
		v.errf(path, pattern, "%q: %s", pattern, err)
		return false
	}
	return true
}

// checkBrokerHost checks a broker_host pattern: {node} exactly once,
// inside one label, and a valid DNS name around it.
func checkBrokerHost(pattern string) error {
	if pattern == "" {
		return fmt.Errorf("broker_host is required, with %s standing for the node id (e.g. \"b{node}.kafka.example.com\")", NodePlaceholder)
	}
	switch n := strings.Count(pattern, NodePlaceholder); {
	case n == 0:
		return fmt.Errorf("has no %s: every broker needs a name of its own", NodePlaceholder)
	case n > 1:
		return fmt.Errorf("has %s %d times: write it exactly once", NodePlaceholder, n)
	}
	sample := strings.Replace(pattern, NodePlaceholder, "0", 1)
	if strings.ContainsAny(strings.Replace(pattern, NodePlaceholder, "", 1), "{}") {
		return fmt.Errorf("has a brace that is not part of %s", NodePlaceholder)
	}
	if !validHost(sample) || strings.Contains(sample, "_") || net.ParseIP(sample) != nil {
		return fmt.Errorf("is not a DNS name once %s is replaced by a node id (%q)", NodePlaceholder, sample)
	}
	before, _, _ := strings.Cut(pattern, NodePlaceholder)
	// validHost already refused an empty label; a node id of many digits
	// must still fit the 63-byte label limit.
	label := sample[strings.LastIndexByte(before, '.')+1:]
	if i := strings.IndexByte(label, '.'); i >= 0 {
		label = label[:i]
	}
	if len(label)+9 > 63 {
		return fmt.Errorf("the label holding %s is too long for a 10-digit node id (DNS labels are at most 63 bytes)", NodePlaceholder)
	}
	return nil
}

// MatchBrokerHost returns the node id name stands for under pattern (a
// valid broker_host), or -1. Names compare lower-cased, without a
// trailing dot; the id is decimal with no sign and no leading zero.
func MatchBrokerHost(pattern, name string) int32 {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	pattern = strings.ToLower(strings.TrimSuffix(pattern, "."))
	before, after, ok := strings.Cut(pattern, NodePlaceholder)
	if !ok || len(name) <= len(before)+len(after) || !strings.HasPrefix(name, before) || !strings.HasSuffix(name, after) {
		return -1
	}
	digits := name[len(before) : len(name)-len(after)]
	if len(digits) > 10 || (len(digits) > 1 && digits[0] == '0') {
		return -1
	}
	var n int64
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	if n > 1<<31-1 {
		return -1
	}
	return int32(n)
}

// upstreamProxy checks upstream.proxy, proxy_ca and no_proxy.
func (v *validator) upstreamProxy(u *Upstream) {
	u.proxyURL = nil
	if u.Proxy != "" {
		if pu, err := ParseProxyURL(u.Proxy); err != nil {
			v.errf("upstream.proxy", u.Proxy, "%s", err)
		} else {
			u.proxyURL = &parsedProxyURL{raw: u.Proxy, url: pu}
		}
	}
	if u.ProxyCA != "" {
		if !strings.HasPrefix(u.Proxy, ProxyHTTPS+"://") {
			v.errf("upstream.proxy_ca", u.ProxyCA, "proxy_ca is only used with an https:// proxy")
		} else {
			v.file("upstream.proxy_ca", u.ProxyCA)
		}
	}
	for i, e := range u.NoProxy {
		if err := checkNoProxy(e); err != nil {
			v.errf(fmt.Sprintf("upstream.no_proxy[%d]", i), e, "%q: %s", e, err)
		}
	}
}

// parsedProxyURL is upstream.proxy as Validate parsed it, with the text
// it was parsed from.
type parsedProxyURL struct {
	raw string
	url *url.URL
}

// ProxyURL returns upstream.proxy parsed (ParseProxyURL): as Validate
// parsed it, or parsed now when Proxy changed since (or was never
// validated). The URL is shared: do not modify it.
func (u *Upstream) ProxyURL() (*url.URL, error) {
	if p := u.proxyURL; p != nil && p.raw == u.Proxy {
		return p.url, nil
	}
	return ParseProxyURL(u.Proxy)
}

// ParseProxyURL parses an upstream.proxy value and checks its scheme,
// host and port. Credentials stay in the URL's User field.
func ParseProxyURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a proxy URL: %s", trimURLErr(err))
	}
	switch u.Scheme {
	case ProxySOCKS5, ProxySOCKS5H, ProxyHTTP, ProxyHTTPS:
	case "":
		return nil, fmt.Errorf("%q has no scheme: write socks5://host:port, http://host:port or https://host:port", redactURL(raw))
	default:
		return nil, fmt.Errorf("scheme %q is not a supported proxy: want socks5, http or https", u.Scheme)
	}
	host, port, err := splitHostPort(u.Host, false)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q needs host:port: %s", redactURL(raw), err)
	case host == "" || !validHost(host):
		return nil, fmt.Errorf("%q has an invalid host %q", redactURL(raw), host)
	case port == 0:
		return nil, fmt.Errorf("%q needs a port", redactURL(raw))
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%q: a proxy URL has no path, query or fragment", redactURL(raw))
	}
	if u.User != nil && u.User.Username() == "" {
		return nil, fmt.Errorf("%q has a password but no user name", redactURL(raw))
	}
	return u, nil
}

// redactURL hides a password so errors never print one.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

func trimURLErr(err error) string {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err.Error()
	}
	return err.Error()
}

// checkNoProxy accepts "*", an IP, a CIDR, or a host name with an
// optional leading dot.
func checkNoProxy(e string) error {
	switch {
	case e == "*":
		return nil
	case strings.Contains(e, "/"):
		if _, _, err := net.ParseCIDR(e); err != nil {
			return fmt.Errorf("not a CIDR: %s", err)
		}
		return nil
	case net.ParseIP(e) != nil:
		return nil
	case validHost(strings.TrimPrefix(e, ".")) && strings.TrimPrefix(e, ".") != "":
		return nil
	}
	return fmt.Errorf("want a host name, .domain, an IP address, a CIDR or *")
}

// CertKeyPair is one PEM certificate (chain) and its key.
type CertKeyPair struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// keyPair checks one entry of a certificates list.
func (v *validator) keyPair(p, cert, key string) (tls.Certificate, bool) {
	switch {
	case cert == "":
		v.errf(p+".cert", nil, "a certificate is required (cert and key)")
	case key == "":
		v.errf(p+".key", nil, "a key is required (cert and key)")
	default:
		if v.file(p+".cert", cert) && v.file(p+".key", key) {
			c, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				v.errf(p+".cert", cert, "load key pair %s and %s: %s", cert, key, err)
				return tls.Certificate{}, false
			}
			return c, true
		}
	}
	return tls.Certificate{}, false
}
