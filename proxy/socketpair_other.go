//go:build !linux

package proxy

import "syscall"

// socketpair returns a connected pair of Unix stream sockets, closed on
// exec. Without SOCK_CLOEXEC the flag is set after, under ForkLock as the
// standard library does, so no exec starts in between.
func socketpair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return fds, err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	return fds, nil
}
