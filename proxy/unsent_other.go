//go:build !linux

package proxy

import (
	"errors"
	"net"
)

// limitUnsent is a no-op where TCP_NOTSENT_LOWAT is not set: the send
// buffer (SocketSendBufferBytes) alone bounds a stalled client there.
func limitUnsent(*net.TCPConn, int) error { return nil }

// setCongestion is never called where checkCongestion fails.
func setCongestion(*net.TCPConn, string) error { return errUnsupportedCongestion }

var errUnsupportedCongestion = errors.New("tcp_congestion_control is supported on Linux only")

// checkCongestion refuses any algorithm: TCP_CONGESTION is Linux's.
func checkCongestion(string) error { return errUnsupportedCongestion }
