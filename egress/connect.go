package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// maxConnectReply bounds the proxy's answer to CONNECT (status line and
// headers); a proxy that sends more is broken or hostile.
const maxConnectReply = 64 << 10

// connect asks the HTTP proxy on c for a tunnel to addr (RFC 9110
// §9.3.6), with Basic credentials when user is set, and returns the
// tunnel. Bytes the proxy sent after its reply's headers — the start of
// the broker's stream — are kept in front of the returned connection.
// The exchange is bounded by ctx.
func connect(ctx context.Context, c net.Conn, addr string, user *url.Userinfo) (net.Conn, error) {
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
		defer c.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: addr},
		Host:   addr,
		Header: make(http.Header),
	}
	if user != nil {
		pw, _ := user.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user.Username()+":"+pw)))
	}
	if err := req.Write(c); err != nil {
		return nil, fmt.Errorf("%w: send CONNECT %s: %w", ErrProxyUnreachable, addr, ctxErr(ctx, err))
	}
	br := bufio.NewReaderSize(&limitedReader{r: c, n: maxConnectReply}, 4096)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("read the proxy's answer to CONNECT %s: %w", addr, ctxErr(ctx, err))
	}
	// A refusal's body is not read: without a length it would last
	// until the proxy closes, and the connection is dropped anyway.
	if resp.StatusCode != http.StatusOK {
		status := resp.Proto + " " + resp.Status
		// 407 is the standard answer; tinyproxy answers a CONNECT with
		// bad credentials with 401.
		if resp.StatusCode == http.StatusProxyAuthRequired || resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("%w: CONNECT %s: %s", ErrProxyAuth, addr, status)
		}
		return nil, fmt.Errorf("%w: CONNECT %s: %s", ErrProxyRefused, addr, status)
	}
	if n := br.Buffered(); n > 0 {
		early, _ := br.Peek(n)
		return &prefixedConn{Conn: c, early: append([]byte(nil), early...)}, nil
	}
	return c, nil
}

// ctxErr names the context as the cause when the socket deadline taken
// from it fired (possibly a moment before the context's own timer).
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	var ne net.Error
	if _, ok := ctx.Deadline(); ok && errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
	}
	return err
}

// limitedReader reads at most n bytes in all (the CONNECT reply), then
// fails instead of reporting EOF, so an endless header is an error.
type limitedReader struct {
	r io.Reader
	n int
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("the proxy's CONNECT reply exceeds %d bytes", maxConnectReply)
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= n
	return n, err
}

// prefixedConn replays bytes read past the CONNECT reply before reading
// the connection again. Only the reader touches early.
type prefixedConn struct {
	net.Conn
	early []byte
}

func (p *prefixedConn) Read(b []byte) (int, error) {
	if len(p.early) > 0 {
		n := copy(b, p.early)
		p.early = p.early[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}
