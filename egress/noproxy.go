package egress

import (
	"net"
	"strings"
)

// noProxy is the parsed no_proxy list. Unlike Go's net/http defaults,
// loopback destinations are not bypassed implicitly: what is listed is
// what is dialled directly.
type noProxy struct {
	all     bool
	ips     []net.IP
	nets    []*net.IPNet
	domains []string // lower-case, no leading dot
}

func parseNoProxy(entries []string) noProxy {
	var n noProxy
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
		case e == "*":
			n.all = true
		case strings.Contains(e, "/"):
			if _, ipn, err := net.ParseCIDR(e); err == nil {
				n.nets = append(n.nets, ipn)
			}
		case net.ParseIP(e) != nil:
			n.ips = append(n.ips, net.ParseIP(e))
		default:
			n.domains = append(n.domains, strings.TrimSuffix(strings.TrimPrefix(e, "."), "."))
		}
	}
	return n
}

// match reports whether host (a name or an IP, no port) is dialled
// directly. A name matches an entry equal to it or a parent domain of it.
func (n noProxy) match(host string) bool {
	if n.all {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if ip := net.ParseIP(host); ip != nil {
		for _, x := range n.ips {
			if x.Equal(ip) {
				return true
			}
		}
		for _, ipn := range n.nets {
			if ipn.Contains(ip) {
				return true
			}
		}
		return false
	}
	for _, d := range n.domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}
