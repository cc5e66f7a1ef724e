package auth

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ErrPassthrough is returned by ClientMechanism for pass-through mode: the
// gateway has no identity of its own; the client's exchange is relayed.
var ErrPassthrough = errors.New("upstream sasl is passthrough: the gateway relays the client's SASL exchange")

// ErrUpstreamAuth wraps an upstream broker's refusal (its error code and
// message), as opposed to an I/O failure.
var ErrUpstreamAuth = errors.New("upstream SASL authentication refused")

const (
	maxSecretBytes = 1 << 20
	// maxUpstreamSASLFrame bounds a response during the handshake; the
	// answers are small (a SCRAM message, a list of mechanisms).
	maxUpstreamSASLFrame = 1 << 20
	clientID             = "tollgate"
)

// readSecret reads a password or token file at dial time, so a rotated
// secret is used by the next connection. One trailing newline (what an
// editor or `echo` adds) is dropped; other whitespace is part of the
// secret.
func readSecret(path, what string) (string, error) {
	b, err := readSmallFile(path, maxSecretBytes)
	if err != nil {
		return "", fmt.Errorf("read upstream sasl %s: %w", what, err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("upstream sasl %s %s is empty", what, path)
	}
	return s, nil
}

// ClientMechanism returns the franz-go mechanism for the gateway's own
// upstream identity. Secrets are read from their files each time the
// mechanism authenticates.
func ClientMechanism(cfg *configs.UpstreamSASL) (sasl.Mechanism, error) {
	if cfg.Passthrough {
		return nil, ErrPassthrough
	}
	user, pwFile, tokFile := cfg.Username, cfg.PasswordFile, cfg.TokenFile
	scramAuth := func(context.Context) (scram.Auth, error) {
		pw, err := readSecret(pwFile, "password_file")
		return scram.Auth{User: user, Pass: pw}, err
	}
	switch cfg.Mechanism {
	case configs.MechPlain:
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			pw, err := readSecret(pwFile, "password_file")
			return plain.Auth{User: user, Pass: pw}, err
		}), nil
	case configs.MechScramSHA256:
		return scram.Sha256(scramAuth), nil
	case configs.MechScramSHA512:
		return scram.Sha512(scramAuth), nil
	case configs.MechOAuthBearer:
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := readSecret(tokFile, "token_file")
			return oauth.Auth{Token: tok}, err
		}), nil
	}
	return nil, fmt.Errorf("upstream sasl mechanism %q: %w", cfg.Mechanism, ErrUnsupportedMechanism)
}

// Authenticate runs SaslHandshake v1 and SaslAuthenticate (v1, for
// SessionLifetimeMs, KIP-368) over a fresh upstream connection, before any
// other request, and returns the session lifetime the broker granted (0:
// none). The caller must re-authenticate the connection before it ends,
// with no request in flight. ctx's deadline, if any, bounds the exchange.
// Brokers before Kafka 2.2 (no SaslAuthenticate v1) are not supported.
func Authenticate(ctx context.Context, conn net.Conn, m sasl.Mechanism, host string) (time.Duration, error) {
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
		defer conn.SetDeadline(time.Time{})
	}
	// Unblock the reads and writes below if ctx ends first.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()

	rt := &roundTripper{conn: conn, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = m.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := rt.do(hs, hsResp); err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("upstream SaslHandshake %s: %w", m.Name(), err))
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return 0, fmt.Errorf("upstream SaslHandshake %s (broker offers %v): %w: %w", m.Name(), hsResp.SupportedMechanisms, ErrUpstreamAuth, err)
	}
	session, token, err := m.Authenticate(ctx, host)
	if err != nil {
		return 0, fmt.Errorf("upstream sasl %s: %w", m.Name(), err)
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = 1
		req.SASLAuthBytes = token
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := rt.do(req, resp); err != nil {
			if ctx.Err() == nil && closedByPeer(err) {
				// Kafka answers a refused SaslAuthenticate v1+ with
				// SASL_AUTHENTICATION_FAILED, then closes (KIP-152,
				// SaslServerAuthenticator); a broker that closes without
				// the answer (kfake does) refuses the same way.
				return 0, fmt.Errorf("upstream SaslAuthenticate %s: the broker closed the connection without an answer, taken as a refusal: %w: %w (%w)",
					m.Name(), ErrUpstreamAuth, kerr.SaslAuthenticationFailed, err)
			}
			return 0, ctxErr(ctx, fmt.Errorf("upstream SaslAuthenticate %s: %w", m.Name(), err))
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			return 0, fmt.Errorf("upstream SaslAuthenticate %s%s: %w: %w", m.Name(), msg, ErrUpstreamAuth, err)
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return 0, fmt.Errorf("upstream sasl %s: %w", m.Name(), err)
		}
		if done {
			return time.Duration(resp.SessionLifetimeMillis) * time.Millisecond, nil
		}
		token = next
	}
}

// closedByPeer reports whether err is the peer closing or resetting the
// connection.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return err
}

// roundTripper writes one request and reads its response, in order, with
// its own correlation ids. SaslHandshake v1 and SaslAuthenticate v1 are
// not flexible, so their response header is the correlation id alone.
type roundTripper struct {
	conn net.Conn
	f    *kmsg.RequestFormatter
	corr int32
	buf  []byte
}

func (rt *roundTripper) do(req kmsg.Request, resp kmsg.Response) error {
	rt.corr++
	rt.buf = rt.f.AppendRequest(rt.buf[:0], req, rt.corr)
	if _, err := rt.conn.Write(rt.buf); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	var head [8]byte
	if _, err := io.ReadFull(rt.conn, head[:]); err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	size := int32(binary.BigEndian.Uint32(head[:4]))
	if size < 4 || size > maxUpstreamSASLFrame {
		return fmt.Errorf("response size %d out of range 4-%d", size, maxUpstreamSASLFrame)
	}
	if corr := int32(binary.BigEndian.Uint32(head[4:])); corr != rt.corr {
		return fmt.Errorf("response correlation id %d, want %d", corr, rt.corr)
	}
	body := make([]byte, size-4)
	if _, err := io.ReadFull(rt.conn, body); err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("decode %T: %w", resp, err)
	}
	return nil
}
