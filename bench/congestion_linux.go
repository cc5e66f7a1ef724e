package bench

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// setCongestion sets the TCP congestion control algorithm of c, a
// connection or a listener (whose accepted connections inherit it): the
// relay's side of --tcp-congestion, which the gateway gets from
// limits.tcp_congestion_control.
func setCongestion(c syscall.Conn, name string) error {
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
	if serr != nil {
		return fmt.Errorf("TCP_CONGESTION %q: %w", name, serr)
	}
	return nil
}
