package metrics

import (
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
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
// Ownership: set up before Start, then read only; lastLog is atomic.
type hostCheck struct {
	listen  string
	extra   []string
	lastLog atomic.Int64 // unix nanos of the last refusal logged
}

// refusedLogInterval rate-limits the log line for refused Host headers,
// which any client can send at will.
const refusedLogInterval = time.Minute

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

func (h *hostCheck) logRefused(log *slog.Logger, r *http.Request) {
	now := time.Now().UnixNano()
	last := h.lastLog.Load()
	if now-last < int64(refusedLogInterval) || !h.lastLog.CompareAndSwap(last, now) {
		return
	}
	log.Warn("admin request refused: unknown Host (DNS rebinding?); add the name to admin.allowed_hosts if it is yours",
		"host", r.Host, "remote", r.RemoteAddr, "path", r.URL.Path, "log_interval", refusedLogInterval)
}
