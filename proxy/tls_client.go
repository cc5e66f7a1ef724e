package proxy

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
)

// A client's TLS connection, tuned for bulk transfer.
//
// crypto/tls seals at most 16 KiB of plaintext per record (RFC 8446
// §5.1) and hands every record to the socket in its own Write: a 1 MiB
// Fetch response took 64 write system calls, where the plaintext path
// splices it in a few. tlsClient gathers the records one Write of
// tls.Conn produces and gives them to the socket at once (batchConn), and
// copies record sets from the upstream into the connection through a
// large pooled buffer (ReadFrom), so a large response costs one write
// call per tlsCopyBuf bytes instead of one per record. Kernel TLS, which
// would let the plaintext path's splice work under TLS, is not an option:
// Go's crypto/tls does not offer it.

// tlsCopyBuf is how much ReadFrom moves per tls.Conn Write (and so per
// write system call): 16 full records.
const tlsCopyBuf = 256 << 10

// tlsCopyPool holds ReadFrom's buffers; a connection holds one only while
// it copies.
var tlsCopyPool = sync.Pool{New: func() any { b := make([]byte, tlsCopyBuf); return &b }}

// batchPool holds batchConn's gather buffers, taken per Write.
var batchPool = sync.Pool{New: func() any { b := make([]byte, 0, tlsCopyBuf+tlsCopyBuf/16); return &b }}

// batchConn is the socket under a client's tls.Conn. Between begin and end
// it gathers what tls.Conn writes (one record per Write call) and end
// writes it in one call; outside a batch (handshake, alerts, key updates,
// close_notify) writes go straight through. tls.Conn serialises its
// writers (its out lock), and mu guards the batch against a write that
// tls.Conn makes from a Read (a KeyUpdate answer) while a batch is open:
// those bytes join the batch in order.
type batchConn struct {
	net.Conn
	mu    sync.Mutex
	open  bool
	batch *[]byte

	// rbuf holds bytes read from the socket that tls.Conn has not asked
	// for yet, rbuf[roff:rend]; nil when there are none. Only tls.Conn
	// reads (its handshake and in locks serialise the calls), so the
	// fields need no lock.
	rbuf       *[]byte
	roff, rend int
}

// Read hands out buffered bytes first; with none, it reads what the
// socket has (up to tlsCopyBuf) and keeps what p cannot take. A read
// into p directly would cost a system call per TLS record.
func (b *batchConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.rbuf == nil {
		if len(p) >= tlsCopyBuf {
			return b.Conn.Read(p)
		}
		buf := tlsCopyPool.Get().(*[]byte)
		n, err := b.Conn.Read(*buf)
		if n <= len(p) {
			copy(p, (*buf)[:n])
			tlsCopyPool.Put(buf)
			return n, err
		}
		// More than p takes: keep the rest. An error that came with the
		// bytes comes again from the next socket read.
		b.rbuf, b.roff, b.rend = buf, 0, n
	}
	n := copy(p, (*b.rbuf)[b.roff:b.rend])
	b.roff += n
	if b.roff == b.rend {
		tlsCopyPool.Put(b.rbuf)
		b.rbuf = nil
	}
	return n, nil
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	if b.open {
		*b.batch = append(*b.batch, p...)
		b.mu.Unlock()
		return len(p), nil
	}
	b.mu.Unlock()
	return b.Conn.Write(p)
}

func (b *batchConn) begin() {
	b.mu.Lock()
	b.open = true
	b.batch = batchPool.Get().(*[]byte)
	b.mu.Unlock()
}

// end writes the batch (an error is the socket's) and closes it.
func (b *batchConn) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open = false
	buf := b.batch
	b.batch = nil
	var err error
	if len(*buf) > 0 {
		_, err = b.Conn.Write(*buf)
	}
	if cap(*buf) <= 2*tlsCopyBuf {
		*buf = (*buf)[:0]
		batchPool.Put(buf)
	}
	return err
}

// NetConn is the socket (resetConn reaches the TCP connection through it).
func (b *batchConn) NetConn() net.Conn { return b.Conn }

// tlsClient is the session's client connection on a TLS listener.
type tlsClient struct {
	*tls.Conn
	raw *batchConn
}

// newTLSClient wraps c in a batchConn and returns it with the tls.Conn
// that start builds on it (a server, possibly through the SNI router).
func newTLSClient(c net.Conn, start func(net.Conn) *tls.Conn) *tlsClient {
	raw := &batchConn{Conn: c}
	return &tlsClient{Conn: start(raw), raw: raw}
}

// Write seals p into records and writes them with one system call. A
// write error is the socket's; tls.Conn remembers it either way, since
// gathering only delays the failure to end.
func (t *tlsClient) Write(p []byte) (int, error) {
	t.raw.begin()
	n, err := t.Conn.Write(p)
	if ferr := t.raw.end(); err == nil && ferr != nil {
		return 0, ferr
	}
	return n, err
}

// ReadFrom copies r (the upstream socket) into the connection through a
// pooled tlsCopyBuf buffer: each Write carries what one read returned, up
// to 16 records.
func (t *tlsClient) ReadFrom(r io.Reader) (int64, error) {
	bp := tlsCopyPool.Get().(*[]byte)
	defer tlsCopyPool.Put(bp)
	buf := *bp
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			w, werr := t.Write(buf[:n])
			total += int64(w)
			if werr != nil {
				return total, clientWriteErr{werr}
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// NetConn is the socket beneath TLS.
func (t *tlsClient) NetConn() net.Conn { return t.raw.Conn }

// copyTo moves n bytes of a request from the connection to w (the
// upstream socket) through a pooled tlsCopyBuf buffer, filled before each
// write: tls.Conn's Read returns one record (16 KiB) at a time, and
// writing each would cost the upstream socket a system call per record.
// The frame's size says how many bytes are coming, so waiting to fill
// the buffer holds nothing back. It returns the bytes written; an error
// from w is wrapped by upstreamWriteErr.
func (t *tlsClient) copyTo(w io.Writer, n int64) (int64, error) {
	bp := tlsCopyPool.Get().(*[]byte)
	defer tlsCopyPool.Put(bp)
	var total int64
	for n > 0 {
		r, err := io.ReadFull(t.Conn, (*bp)[:min(n, int64(len(*bp)))])
		if r > 0 {
			if _, werr := w.Write((*bp)[:r]); werr != nil {
				return total, upstreamWriteErr(werr)
			}
			total += int64(r)
			n -= int64(r)
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
