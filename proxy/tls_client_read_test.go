package proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
)

// chunkConn is a socket that has all of data ready: each Read returns as
// much as p takes, as a loopback socket with a full receive buffer does.
type chunkConn struct {
	net.Conn
	r     *bytes.Reader
	reads int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// TestBatchConnReadCoalesces: tls.Conn's small reads (a 5-byte record
// header, then the record) are served from one socket read per 256 KiB,
// and every byte arrives once, in order.
func TestBatchConnReadCoalesces(t *testing.T) {
	data := make([]byte, 1<<20+12345)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	raw := &chunkConn{r: bytes.NewReader(data)}
	b := &batchConn{Conn: raw}
	var got []byte
	sizes := []int{5, 16384 + 256, 1, 7000, 300 << 10} // the last one bypasses the buffer when it is empty
	for i := 0; ; i++ {
		p := make([]byte, sizes[i%len(sizes)])
		n, err := b.Read(p)
		got = append(got, p[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, not the %d written (or not in order)", len(got), len(data))
	}
	// 1 MiB in 256 KiB socket reads plus the final EOF read; a read per
	// call would be thousands.
	if want := len(data)/tlsCopyBuf + 3; raw.reads > want {
		t.Fatalf("%d socket reads for %d bytes; want at most %d", raw.reads, len(data), want)
	}
	if b.rbuf != nil {
		t.Fatal("a drained connection still holds its read buffer")
	}
}
