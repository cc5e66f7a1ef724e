package proxy

import "syscall"

// pendingInput reports whether the socket fd has bytes to read, or its
// end or an error to report: a one-byte MSG_PEEK that does not block.
func pendingInput(fd uintptr) bool {
	var b [1]byte
	n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return n > 0 || err != syscall.EAGAIN
}
