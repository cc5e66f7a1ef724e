//go:build !linux

package congestion

import (
	"errors"
	"syscall"
)

var errUnsupported = errors.New("tcp_congestion_control is supported on Linux only")

// Set is never called where Check fails.
func Set(syscall.Conn, string) error { return errUnsupported }

// Check refuses any algorithm: TCP_CONGESTION is Linux's.
func Check(string) error { return errUnsupported }
