//go:build !linux

package proxy

import "net"

// limitUnsent is a no-op where TCP_NOTSENT_LOWAT is not set: the send
// buffer (SocketSendBufferBytes) alone bounds a stalled client there.
func limitUnsent(*net.TCPConn, int) error { return nil }
