package proxy

import (
	"net"

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
