package proxy

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestWriteMore: bytes written with writeMore arrive whole and in order
// ahead of an ordinary write that follows, through a TCP socket whose
// send buffer fills (the peer starts reading late), so the call meets
// short sends and EAGAIN; and through a connection that is not TCP.
func TestWriteMore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer r.Close()

	a := bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB: more than the socket buffers hold
	b := bytes.Repeat([]byte("abcdefghij"), 150_001)
	end := []byte("end of frame")
	want := append(append(append([]byte(nil), a...), b...), end...)
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(50 * time.Millisecond) // let the sender fill the buffers
		buf := make([]byte, len(want))
		r.SetReadDeadline(time.Now().Add(30 * time.Second))
		io.ReadFull(r, buf)
		got <- buf
	}()
	w.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := writeMore(w, a, b); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(end); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(<-got, want) {
		t.Fatal("TCP: the peer read different bytes")
	}

	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	go func() {
		writeMore(p1, []byte("not "), []byte("tcp"))
		p1.Close()
	}()
	if all, _ := io.ReadAll(p2); string(all) != "not tcp" {
		t.Fatalf("pipe: read %q", all)
	}
}
