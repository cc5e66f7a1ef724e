package proxy

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// tcpClose is TCP_CLOSE of the kernel's TCP states (include/net/tcp_states.h):
// where a socket goes when its peer resets it.
const tcpClose = 7

// peerClosed reports whether w is a TCP socket the kernel has closed (its
// peer reset it), from TCP_INFO; false when that cannot be told.
func peerClosed(w any) bool {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	rc.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			closed = info.State == tcpClose
		}
	})
	return closed
}
