//go:build !linux

package bench

import (
	"errors"
	"syscall"
)

// setCongestion is Linux's TCP_CONGESTION; elsewhere --tcp-congestion is
// refused.
func setCongestion(syscall.Conn, string) error {
	return errors.New("TCP_CONGESTION is Linux only")
}
