package congestion

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Set sets the TCP congestion control algorithm of c (TCP_CONGESTION,
// tcp(7)): a connection, or a listener whose accepted connections inherit
// it.
func Set(c syscall.Conn, name string) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, name)
	}); err != nil {
		return err
	}
	return serr
}

// Check reports whether this process may set name on its TCP sockets, on
// a socket of its own: the kernel must have it or load it
// (net.ipv4.tcp_available_congestion_control) and, without CAP_NET_ADMIN,
// allow it (net.ipv4.tcp_allowed_congestion_control). A route locked to
// another algorithm (ip route ... congctl lock) can still refuse it on a
// connection; Set's callers log that.
func Check(name string) error {
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
