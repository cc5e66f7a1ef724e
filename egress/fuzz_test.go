package egress

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// FuzzConnectReply feeds arbitrary proxy answers to the CONNECT client:
// it must never panic or hang, succeed only on a 200, and then hand over
// exactly the bytes after the reply's headers.
func FuzzConnectReply(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef"))
	f.Add([]byte("HTTP/1.0 407 Proxy Authentication Required\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\n"))
	f.Add([]byte("\x00\x00\x00\x10kafka"))
	f.Fuzz(func(t *testing.T, reply []byte) {
		client, server := net.Pipe()
		defer client.Close()
		go func() {
			defer server.Close()
			http.ReadRequest(bufio.NewReader(server))
			server.Write(reply)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := connect(ctx, client, "b:9092", nil)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(reply, []byte("HTTP/")) || !bytes.Contains(reply, []byte("200")) {
			t.Fatalf("success on a reply that is not an HTTP 200: %q", reply)
		}
		// What the tunnel yields first must be the tail of the reply,
		// after at least a status line and the blank line.
		c.SetReadDeadline(time.Now().Add(time.Second))
		rest, _ := io.ReadAll(c)
		if !bytes.HasSuffix(reply, rest) || len(reply)-len(rest) < len("HTTP/1.1 200\n\n") {
			t.Fatalf("after the reply got %q from %q", rest, reply)
		}
	})
}
