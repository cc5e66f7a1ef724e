package proxy

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/wire"
)

// SASLServer authenticates clients of one listener (SASL termination at
// the gateway). Package auth implements it; cmd adapts it.
type SASLServer interface {
	Mechanisms() []string
	// Start begins an exchange; an unsupported mechanism is an error.
	Start(mechanism string) (SASLExchange, error)
}

// SASLExchange is one authentication attempt on one connection.
type SASLExchange interface {
	// Step consumes a client token and returns the reply; done once the
	// client is authenticated. An error's message is safe to send to the
	// client (it never says whether a user exists).
	Step(token []byte) (reply []byte, done bool, err error)
	Principal() string
	// SessionLifetime is how long the authentication holds (KIP-368); 0
	// means it does not expire.
	SessionLifetime() time.Duration
}

// saslState is a session's authentication state (SASL listeners only).
//
// Kafka's rules (docs/protocol.md §6): before authentication only
// ApiVersions, SaslHandshake and SaslAuthenticate are accepted, anything
// else closes the connection; after SaslHandshake v0 the client sends raw
// size-prefixed tokens with no Kafka header; a SaslHandshake on an
// authenticated connection starts re-authentication (KIP-368), which must
// keep the principal; a connection whose session expired is closed at its
// next request.
type saslState struct {
	server   SASLServer
	ex       SASLExchange
	authed   bool
	raw      bool // after SaslHandshake v0: the next frames are raw tokens
	expires  time.Time
	reauths  int
	failures int
}

var errAuthFailed = errors.New("authentication failed")

// preauthCheck enforces the pre-authentication rules for a request header.
func (s *session) preauthCheck(h wire.RequestHeader) error {
	st := s.sasl
	if st == nil {
		return nil
	}
	if apis.Of(h.Key).PreAuth {
		return nil
	}
	if !st.authed {
		return badRequest(closeAuthFailed, "%s before SASL authentication completed", apiName(h.Key))
	}
	if !st.expires.IsZero() && time.Now().After(st.expires) {
		return badRequest(closeAuthExpired, "SASL session expired (KIP-368) and the client did not re-authenticate")
	}
	return nil
}

// handleSASL answers SaslHandshake and SaslAuthenticate itself.
func (s *session) handleSASL(h wire.RequestHeader, size int) error {
	whole, err := s.readWhole(size)
	if err != nil {
		return err
	}
	req, err := decodeRequest(h, whole)
	if err != nil {
		return err
	}
	var resp kmsg.Response
	var closeAfter bool
	switch r := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp, closeAfter = s.saslHandshake(r)
	case *kmsg.SASLAuthenticateRequest:
		resp, closeAfter = s.saslAuthenticate(r)
	}
	ch := make(chan result, 1)
	ch <- result{body: wire.Bytes(resp.AppendTo(nil))}
	if err := s.push(pending{key: h.Key, version: h.Version, corr: h.Correlation, local: ch, closeAfter: closeAfter,
		obs: observed{start: time.Now(), bytesIn: 4 + size}}); err != nil {
		return err
	}
	if closeAfter {
		// Read nothing more: the refusal is answered, then the connection
		// closes (pipelined requests behind it are never forwarded).
		return &requestError{reason: closeAuthRejected, err: errAuthFailed}
	}
	return nil
}

func (s *session) saslHandshake(r *kmsg.SASLHandshakeRequest) (kmsg.Response, bool) {
	st := s.sasl
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = st.server.Mechanisms()
	if st.ex != nil && !st.authed {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, true
	}
	ex, err := st.server.Start(r.Mechanism)
	if err != nil {
		if s.srv.noisy.Allow("sasl_mechanism_not_offered", s.remote) {
			s.log.Warn("SASL mechanism not offered", "mechanism", r.Mechanism, "offered", resp.SupportedMechanisms)
		}
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, true
	}
	st.ex = ex
	st.raw = r.Version == 0
	return resp, false
}

func (s *session) saslAuthenticate(r *kmsg.SASLAuthenticateRequest) (kmsg.Response, bool) {
	st := s.sasl
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if st.ex == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake")
		return resp, true
	}
	reply, done, err := s.saslStep(r.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return resp, true
	}
	resp.SASLAuthBytes = reply
	if done {
		resp.SessionLifetimeMillis = st.ex.SessionLifetime().Milliseconds()
		st.ex = nil
	}
	return resp, false
}

// saslStep runs one step of the exchange and completes authentication.
func (s *session) saslStep(token []byte) ([]byte, bool, error) {
	st := s.sasl
	reply, done, err := st.ex.Step(token)
	if err != nil {
		st.failures++
		if s.srv.noisy.Allow("sasl_authentication_failed", s.remote) {
			s.log.Warn("SASL authentication failed", "err", err)
		}
		s.srv.guard.authFailed(s.subj.Addr.String(), time.Now())
		return nil, false, err
	}
	if !done {
		return reply, false, nil
	}
	principal := st.ex.Principal()
	if st.authed && principal != s.subj.Principal {
		if s.srv.noisy.Allow("reauth_principal_changed", s.remote) {
			s.log.Warn("re-authentication changed the principal", "was", s.subj.Principal, "now", principal)
		}
		return nil, false, fmt.Errorf("%w: re-authentication must keep the principal", errAuthFailed)
	}
	if st.authed {
		st.reauths++
	}
	st.authed = true
	s.subj.Principal = principal
	if lt := st.ex.SessionLifetime(); lt > 0 {
		st.expires = time.Now().Add(lt)
	} else {
		st.expires = time.Time{}
	}
	s.log.Info("authenticated", "principal", principal, "reauth", st.reauths > 0)
	return reply, true, nil
}

// handleRawToken handles one raw token after a SaslHandshake v0: a size
// prefix and the token, answered the same way (PLAIN's success is an empty
// token); a failure simply closes, as v0 has no way to say why.
func (s *session) handleRawToken(size int) error {
	whole, err := s.readWhole(size)
	if err != nil {
		return err
	}
	reply, done, err := s.saslStep(whole[4:])
	if err != nil {
		return badRequest(closeAuthFailed, "SASL (v0 raw tokens): %w", err)
	}
	if done {
		s.sasl.raw, s.sasl.ex = false, nil
	}
	ch := make(chan result, 1)
	ch <- result{body: wire.Bytes(reply)}
	return s.push(pending{local: ch, raw: true})
}

// writeRaw writes a raw SASL v0 token: a size prefix and the bytes.
func (s *session) writeRaw(body []byte) error {
	s.wbuf = binary.BigEndian.AppendUint32(s.wbuf[:0], uint32(len(body)))
	s.wbuf = append(s.wbuf, body...)
	_, err := s.client.Write(s.wbuf)
	return err
}

// handshakeTLS runs the server side of TLS on the client connection,
// within the frame timeout, and takes the principal from a verified
// client certificate.
func (s *session) handshakeTLS() error {
	var route *sniConn
	tc := newTLSClient(s.client, func(c net.Conn) *tls.Conn {
		t, r := s.l.tlsServer(c)
		route = r
		return t
	})
	tc.SetDeadline(time.Now().Add(s.srv.opts.FrameTimeout))
	if err := tc.Handshake(); err != nil {
		if route != nil && route.refused != "" {
			return route.handshakeError(s.l.sni)
		}
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) {
			return fmt.Errorf("TLS handshake: the client is not speaking TLS (plaintext Kafka on a TLS listener?): %w", err)
		}
		return fmt.Errorf("TLS handshake: %w", err)
	}
	tc.SetDeadline(time.Time{})
	if route != nil {
		s.node = route.node // SNI: the name chose the broker
		s.shownNode.Store(route.node)
		// In a virtual cluster's pattern, the name also chose the cluster
		// (vcluster.go), and brokers are advertised under the same pattern
		// (mapper.vcName), set before any response is written.
		s.sniVC, s.mapper.vc = route.vc, route.vc
	}
	if !s.adopt(func() { s.client = tc }) {
		return net.ErrClosed
	}
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		s.tlsSubject = certs[0].Subject.String()
		if s.l.opts.Principal != nil {
			p, err := s.l.opts.Principal(certs[0])
			if err != nil {
				return fmt.Errorf("principal from client certificate %q: %w", s.tlsSubject, err)
			}
			s.subj.Principal = p
		}
	}
	return nil
}

// Pass-through SASL (a listener that does not terminate SASL in front of
// an upstream that does): the gateway relays the exchange but still learns
// who authenticated, for policy and audit. It reads the user name from the
// client's first SaslAuthenticate token (PLAIN "authzid\0user\0password",
// SCRAM client-first "n,,n=user,r=...") and adopts it once the upstream
// answers that request without error. The password is never kept.

// saslUser returns the user a PLAIN or SCRAM first token names, or "".
func saslUser(token []byte) string {
	if parts := bytes.Split(token, []byte{0}); len(parts) == 3 { // PLAIN
		if len(parts[0]) > 0 {
			return string(parts[0])
		}
		return string(parts[1])
	}
	msg := string(token)
	// SCRAM client-first: gs2 header "n,," or "y,," (optionally with
	// "a=authzid"), then "n=user,r=nonce".
	if !strings.HasPrefix(msg, "n,") && !strings.HasPrefix(msg, "y,") {
		return ""
	}
	for _, f := range strings.Split(msg, ",")[2:] {
		if u, ok := strings.CutPrefix(f, "n="); ok {
			return strings.NewReplacer("=2C", ",", "=3D", "=").Replace(u)
		}
	}
	return ""
}

// passthroughStep reads a relayed SaslAuthenticate request and returns
// the principal to adopt if the upstream accepts it ("" for none): PLAIN
// completes in its one step; SCRAM only when its final message (the proof)
// is accepted — its first message names the user but proves nothing.
func (s *session) passthroughStep(h wire.RequestHeader, whole []byte) string {
	req, err := decodeRequest(h, whole)
	if err != nil {
		return ""
	}
	r, ok := req.(*kmsg.SASLAuthenticateRequest)
	if !ok {
		return ""
	}
	tok := r.SASLAuthBytes
	switch {
	case bytes.Count(tok, []byte{0}) == 2: // PLAIN
		return saslUser(tok)
	case bytes.HasPrefix(tok, []byte("c=")): // SCRAM client-final
		return s.passUser
	default: // SCRAM client-first, or a mechanism not understood
		s.passUser = saslUser(tok)
		return ""
	}
}

// adoptPassthroughPrincipal, on the read loop, takes the principal the
// write loop saw the upstream accept.
func (s *session) adoptPassthroughPrincipal() {
	if p := s.passPrincipal.Swap(nil); p != nil {
		s.subj.Principal = *p
		s.log.Info("authenticated by the upstream (SASL pass-through)", "principal", *p)
	}
}
