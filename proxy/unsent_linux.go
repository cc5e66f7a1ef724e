package proxy

import (
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// limitUnsent sets c's TCP_NOTSENT_LOWAT to n bytes: the kernel then takes
// no more of a write while n bytes or more of the socket's queue are not
// yet sent (tcp(7)). Bytes sent and awaiting their acknowledgement do not
// count, so the congestion window may grow to what the path carries.
func limitUnsent(c *net.TCPConn, n int) error {
	return setTCPOption(c, func(fd int) error {
		return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n)
	})
}

// setCongestion sets c's TCP congestion control algorithm (TCP_CONGESTION,
// tcp(7)).
func setCongestion(c *net.TCPConn, name string) error {
	return setTCPOption(c, func(fd int) error {
		return unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, name)
	})
}

// setTCPOption runs set on c's file descriptor and returns its error.
func setTCPOption(c *net.TCPConn, set func(fd int) error) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = set(int(fd)) }); err != nil {
		return err
	}
	return serr
}

// checkCongestion reports whether this process may set name on its TCP
// sockets, on a socket of its own: the kernel must have it or load it
// (net.ipv4.tcp_available_congestion_control) and, without CAP_NET_ADMIN,
// allow it (net.ipv4.tcp_allowed_congestion_control). A route locked to
// another algorithm (ip route ... congctl lock) can still refuse it on a
// connection; setCongestion's callers log that.
func checkCongestion(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil { // a host without IPv4
		fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	}
	if err != nil {
		return fmt.Errorf("tcp_congestion_control %q: check: %w", name, err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, name); err != nil {
		avail, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
		allowed, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
		return fmt.Errorf("tcp_congestion_control %q cannot be set: %w (this host has: %s; allowed without CAP_NET_ADMIN: %s)",
			name, err, strings.TrimSpace(string(avail)), strings.TrimSpace(string(allowed)))
	}
	return nil
}
