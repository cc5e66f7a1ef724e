package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// TestRelayErrBlamesTheRightSide: a spliced Fetch relay's error is the
// client's when it can only come from the write side (EPIPE), and the
// upstream's otherwise; the errors have the shape net.TCPConn.ReadFrom
// returns.
func TestRelayErrBlamesTheRightSide(t *testing.T) {
	splice := func(errno syscall.Errno) error {
		return &net.OpError{Op: "readfrom", Net: "tcp", Err: os.NewSyscallError("splice", errno)}
	}
	for _, c := range []struct {
		name   string
		err    error
		client bool
	}{
		{"broken pipe", splice(syscall.EPIPE), true},
		{"connection reset (either side)", splice(syscall.ECONNRESET), false},
		{"timeout", splice(syscall.ETIMEDOUT), false},
	} {
		got := relayErr(c.err)
		if isClientWriteErr(got) != c.client {
			t.Errorf("%s: client side %v, want %v (%v)", c.name, isClientWriteErr(got), c.client, got)
		}
		if !errors.Is(got, c.err.(*net.OpError).Err) {
			t.Errorf("%s: the cause is lost: %v", c.name, got)
		}
	}
	if relayErr(nil) != nil || relayErr(io.EOF) != io.EOF {
		t.Error("nil and EOF must pass unchanged")
	}
}
