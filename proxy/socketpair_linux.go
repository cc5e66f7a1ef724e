package proxy

import "syscall"

// socketpair returns a connected pair of Unix stream sockets, closed on
// exec from the start.
func socketpair() ([2]int, error) {
	return syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
}
