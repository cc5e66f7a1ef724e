//go:build linux

package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// recordPipe is a pipe a single-port Fetch part's record set is moved
// into from the upstream socket, and out of to the client's socket,
// with splice(2): the bytes stay in the kernel (pipe_records.go).
// Ownership: the free list's, then one part's (pipedRecords) until its
// merged answer is written or dropped.
type recordPipe struct{ r, w int }

// maxRecordPipes bounds the pipes open at once across the process (two
// descriptors and up to recordPipeSize of records each, 32 MiB in all:
// half of Linux's default fs.pipe-user-pages-soft, past which a user's
// new pipes get one page). A part that finds none free is read into
// memory, as before pipes.
const maxRecordPipes = 32

// recordPipes is the free list and the count of pipes open.
var recordPipes struct {
	mu   sync.Mutex
	free []*recordPipe
	open int
	// retry: the kernel refused a pipe or its size (descriptor limit,
	// fs.pipe-user-pages-soft); none is made before this time.
	retry time.Time
}

// recordPipeRetry is how long the gateway waits for another pipe after
// the kernel refused one.
const recordPipeRetry = time.Minute

// recordPipeFree reports whether getRecordPipe would likely return a
// pipe now (a part that would find none is read into memory whole, in
// one buffer of its size).
func recordPipeFree() bool {
	recordPipes.mu.Lock()
	defer recordPipes.mu.Unlock()
	return len(recordPipes.free) > 0 || (recordPipes.open < maxRecordPipes && time.Now().After(recordPipes.retry))
}

// getRecordPipe returns an empty pipe, or nil when none is free and no
// more may be made.
func getRecordPipe() *recordPipe {
	recordPipes.mu.Lock()
	defer recordPipes.mu.Unlock()
	if n := len(recordPipes.free); n > 0 {
		p := recordPipes.free[n-1]
		recordPipes.free = recordPipes.free[:n-1]
		return p
	}
	if recordPipes.open >= maxRecordPipes || time.Now().Before(recordPipes.retry) {
		return nil
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		recordPipes.retry = time.Now().Add(recordPipeRetry)
		return nil
	}
	if size, err := unix.FcntlInt(uintptr(fds[0]), unix.F_SETPIPE_SZ, recordPipeSize); err != nil || size < recordPipeSize {
		unix.Close(fds[0])
		unix.Close(fds[1])
		recordPipes.retry = time.Now().Add(recordPipeRetry)
		return nil
	}
	recordPipes.open++
	return &recordPipe{r: fds[0], w: fds[1]}
}

// recordPipesInUse is how many pipes are open and not free.
func recordPipesInUse() int {
	recordPipes.mu.Lock()
	defer recordPipes.mu.Unlock()
	return recordPipes.open - len(recordPipes.free)
}

// putRecordPipe gives p back; a pipe that may still hold bytes (its
// answer was not written whole) is closed instead.
func putRecordPipe(p *recordPipe, empty bool) {
	if p == nil {
		return
	}
	recordPipes.mu.Lock()
	defer recordPipes.mu.Unlock()
	if empty {
		recordPipes.free = append(recordPipes.free, p)
		return
	}
	unix.Close(p.r)
	unix.Close(p.w)
	recordPipes.open--
}

// write puts b (bytes the upstream reader had already buffered) into
// the pipe and returns how many it took (less when it is full).
func (p *recordPipe) write(b []byte) int {
	w := 0
	for w < len(b) {
		n, err := unix.Write(p.w, b[w:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		w += n
	}
	return w
}

// fill moves up to n bytes from the socket c into the pipe. It stops
// early, without error, when the pipe is full (the socket has bytes the
// pipe would not take); the caller reads the rest into memory. w, when
// set, follows the batch headers: each splice stops at the next header,
// which is peeked at first (batch_walk.go).
func (p *recordPipe) fill(c syscall.RawConn, n int, w *batchWalk) (moved int, err error) {
	var serr error
	var head [batchHeadLen]byte
	rerr := c.Read(func(fd uintptr) bool {
		for moved < n {
			want := n - moved
			if w != nil {
				if s := w.spliceable(); s > 0 {
					want = min(want, s)
				} else {
					need := w.at + batchHeadLen - w.pos
					k, _, perr := unix.Recvfrom(int(fd), head[:need], unix.MSG_PEEK|unix.MSG_DONTWAIT)
					switch {
					case perr == unix.EINTR:
						continue
					case perr == unix.EAGAIN:
						return false
					case perr != nil:
						serr = perr
						return true
					case k == 0:
						serr = io.ErrUnexpectedEOF
						return true
					}
					// Part of the header only: those bytes are spliced next
					// and the rest peeked after them. Waiting for the rest
					// here instead would wait forever if the socket's end had
					// already come (readiness is reported once, and a peek
					// that finds the same bytes again never sees the end).
					w.peeked(head[:k])
					continue
				}
			}
			k, err := unix.Splice(int(fd), nil, p.w, nil, want, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				// The socket has nothing yet (wait for it), or the pipe is
				// full (a pipe fills by slots, not bytes), and then the
				// socket has bytes to read (stop) or is at its end.
				var b [1]byte
				switch n, _, perr := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT); {
				case perr == unix.EAGAIN || perr == unix.EINTR:
					return false
				case perr != nil:
					serr = perr
				case n == 0:
					serr = io.ErrUnexpectedEOF
				}
				return true
			case err != nil:
				serr = err
				return true
			case k == 0:
				serr = io.ErrUnexpectedEOF
				return true
			}
			moved += int(k)
			if w != nil {
				w.skip(int(k))
			}
		}
		return true
	})
	if serr == nil {
		serr = rerr
	}
	if serr != nil {
		return moved, fmt.Errorf("splice upstream records into a pipe: %w", serr)
	}
	return moved, nil
}

// drainTo moves n bytes from the pipe to the socket c. progress is
// called when the socket's buffer fills after bytes moved, before the
// wait for room (it pushes the write deadline, so the deadline bounds a
// wait that follows no progress, as in writeProgress).
func (p *recordPipe) drainTo(c syscall.RawConn, n int, progress func()) error {
	var serr error
	werr := c.Write(func(fd uintptr) bool {
		moved := false
		for n > 0 {
			k, err := unix.Splice(p.r, nil, int(fd), nil, n, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				// The socket's buffer is full: wait for room, under a
				// deadline pushed if this step moved bytes.
				if moved {
					progress()
				}
				return false
			case err != nil:
				serr = err
				return true
			case k == 0:
				serr = errors.New("record pipe empty before its records were written")
				return true
			}
			n -= int(k)
			moved = true
		}
		return true
	})
	if serr == nil {
		serr = werr
	}
	if serr != nil {
		return fmt.Errorf("splice records to the client: %w", serr)
	}
	return nil
}

// readTo copies the n bytes the pipe holds to w, for an answer written
// through a writer that is not a socket (materialize).
func (p *recordPipe) readTo(w io.Writer, n int) error {
	buf := make([]byte, min(n, 64<<10))
	for n > 0 {
		k, err := unix.Read(p.r, buf[:min(n, len(buf))])
		if err == unix.EINTR {
			continue
		}
		if err != nil || k <= 0 {
			return fmt.Errorf("read a record pipe with %d bytes left: %v", n, err)
		}
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// rawConn is c's syscall.RawConn when it is a plain TCP connection (the
// only kind records are spliced to or from), else nil.
func rawConn(c net.Conn) syscall.RawConn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
