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
// client's when it can only come from the write side (EPIPE) or is a
// reset with the client's socket closed, and the upstream's otherwise;
// the errors have the shape net.TCPConn.ReadFrom returns.
func TestRelayErrBlamesTheRightSide(t *testing.T) {
	splice := func(errno syscall.Errno) error {
		return &net.OpError{Op: "readfrom", Net: "tcp", Err: os.NewSyscallError("splice", errno)}
	}
	for _, c := range []struct {
		name         string
		err          error
		clientClosed bool
		client       bool
	}{
		{"broken pipe", splice(syscall.EPIPE), false, true},
		{"connection reset, client socket open", splice(syscall.ECONNRESET), false, false},
		{"connection reset, client socket closed", splice(syscall.ECONNRESET), true, true},
		{"timeout", splice(syscall.ETIMEDOUT), true, false},
	} {
		got := relayErr(c.err, func() bool { return c.clientClosed })
		if isClientWriteErr(got) != c.client {
			t.Errorf("%s: client side %v, want %v (%v)", c.name, isClientWriteErr(got), c.client, got)
		}
		if !errors.Is(got, c.err.(*net.OpError).Err) {
			t.Errorf("%s: the cause is lost: %v", c.name, got)
		}
	}
	never := func() bool { return false }
	if relayErr(nil, never) != nil || relayErr(io.EOF, never) != io.EOF {
		t.Error("nil and EOF must pass unchanged")
	}
}
