//go:build !linux

package bench

import (
	"errors"
	"net"
)

// setCongestion is Linux's TCP_CONGESTION; elsewhere --tcp-congestion is
// refused.
func setCongestion(*net.TCPConn, string) error {
	return errors.New("TCP_CONGESTION is Linux only")
}
