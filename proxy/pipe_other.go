//go:build !linux

package proxy

import (
	"io"
	"net"
	"syscall"
)

// recordPipe: records are spliced through pipes on Linux only
// (pipe_linux.go); elsewhere every part is read into memory.
type recordPipe struct{}

func getRecordPipe() *recordPipe                                       { return nil }
func putRecordPipe(*recordPipe, bool)                                  {}
func (*recordPipe) write([]byte) int                                   { return 0 }
func rawConn(net.Conn) syscall.RawConn                                 { return nil }
func (*recordPipe) fill(syscall.RawConn, int, *batchWalk) (int, error) { return 0, nil }
func (*recordPipe) drainTo(syscall.RawConn, int, func()) error         { return nil }

func recordPipesInUse() int                     { return 0 }
func recordPipeFree() bool                      { return false }
func (*recordPipe) readTo(io.Writer, int) error { return nil }
