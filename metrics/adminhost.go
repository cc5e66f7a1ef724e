package metrics

import (
	"net"
	"strings"
)

// hostCheck decides which Host headers the admin server answers, against
// DNS rebinding: a web page on evil.example that re-points its own name
// at 127.0.0.1 makes the browser send requests to the admin server that
// the browser treats as same-origin with the page, but whose Host is
// still evil.example. Accepted:
//   - an IP address (a rebinding page's requests always carry its own
//     name; a request naming an address was addressed to this server);
//   - "localhost" and names under ".localhost" (RFC 6761: loopback);
//   - the admin listen host, when it is a name;
//   - the names configured in admin.allowed_hosts (AllowHosts).
//
// A name is compared without its port, case-insensitively. A request
// without a Host (HTTP/1.0) comes from no browser and is served.
// Ownership: set up before Start, then read only.
type hostCheck struct {
	listen string
	extra  []string
}

func (h *hostCheck) allowed(hostport string) bool {
	host := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		host = hh
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	switch {
	case host == "":
		return true
	case net.ParseIP(host) != nil:
		return true
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return true
	case strings.EqualFold(host, h.listen):
		return true
	}
	for _, n := range h.extra {
		if strings.EqualFold(host, strings.TrimSuffix(n, ".")) {
			return true
		}
	}
	return false
}
