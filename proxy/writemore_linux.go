package proxy

import (
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// writeMore writes bufs to c in one sendmsg call with MSG_MORE, where c is
// a TCP socket: the kernel queues the bytes without pushing them, so they
// leave in the same segments as the bytes that follow — the splice of the
// rest of the frame — instead of in a packet of their own that wakes the
// peer for a few hundred bytes (a large Produce's head, a streamed Fetch's
// fields). The caller must send more of the same frame right after: the
// frame's last bytes never carry the flag. Other connections (TLS, test
// wrappers) get an ordinary write.
func writeMore(c net.Conn, bufs ...[]byte) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		nb := net.Buffers(bufs)
		_, err := nb.WriteTo(c)
		return err
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		for len(bufs) > 0 {
			n, err := unix.SendmsgBuffers(int(fd), bufs, nil, nil, unix.MSG_MORE|unix.MSG_NOSIGNAL)
			switch err {
			case nil:
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // wait until writable (and within the write deadline)
			default:
				serr = os.NewSyscallError("sendmsg", err)
				return true
			}
			for n > 0 && len(bufs) > 0 {
				k := min(n, len(bufs[0]))
				bufs[0] = bufs[0][k:]
				n -= k
				if len(bufs[0]) == 0 {
					bufs = bufs[1:]
				}
			}
		}
		return true
	})
	if err != nil {
		return err // the poller's: closed, or past the write deadline
	}
	if serr != nil {
		return &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: serr}
	}
	return nil
}
