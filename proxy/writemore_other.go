//go:build !linux

package proxy

import "net"

// writeMore writes bufs to c (writemore_linux.go sends them with MSG_MORE).
func writeMore(c net.Conn, bufs ...[]byte) error {
	nb := net.Buffers(bufs)
	_, err := nb.WriteTo(c)
	return err
}
