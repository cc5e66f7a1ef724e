package auth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
)

// Errors the session branches on.
var (
	// ErrUnsupportedMechanism: the client asked for a mechanism the
	// listener does not offer. Kafka answers SaslHandshake with
	// UNSUPPORTED_SASL_MECHANISM (33) and the enabled mechanisms.
	ErrUnsupportedMechanism = errors.New("unsupported SASL mechanism")
	// ErrAuthFailed: the exchange failed. The error wrapping it has a
	// client-safe Error() for SaslAuthenticate's ErrorMessage
	// (SASL_AUTHENTICATION_FAILED, 58); FailureReason has the detail for
	// the gateway's own log.
	ErrAuthFailed = errors.New("SASL authentication failed")
	// ErrExchangeDone: Step was called after the exchange finished.
	ErrExchangeDone = errors.New("SASL exchange already finished")
)

// maxTokenBytes bounds one client SASL token. SCRAM and PLAIN messages are
// a few hundred bytes; JWTs a few KiB.
const maxTokenBytes = 64 << 10

// authError is an authentication failure: msg goes to the client, reason
// to the gateway's log. Neither ever holds a password or token.
type authError struct {
	msg    string
	reason string
}

func (e *authError) Error() string { return e.msg }
func (e *authError) Unwrap() error { return ErrAuthFailed }

// FailureReason returns the detail behind an authentication failure for the
// gateway's log (for example "unknown user" where the client was only told
// "invalid credentials"); it is err.Error() for other errors.
func FailureReason(err error) string {
	var ae *authError
	if errors.As(err, &ae) {
		return ae.reason
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// credentialsFailed is Kafka's message for wrong credentials
// (SaslServerAuthenticator.handleSaslToken): it does not say whether the
// user exists.
func credentialsFailed(mech, reason string) error {
	return &authError{
		msg:    "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech,
		reason: reason,
	}
}

func malformed(mech, what string) error {
	return &authError{msg: "Authentication failed: malformed " + mech + " " + what, reason: "malformed " + what}
}

// Server is the SASL server of one listener. It is built once; the users
// file and the JWKS are reloaded when they change. It is safe for
// concurrent use.
type Server struct {
	mechs     []string
	users     *watched[*Users]
	jwt       *jwtVerifier
	maxReauth time.Duration
	log       *slog.Logger
	// secret keys the fake credentials offered for unknown users, so a
	// SCRAM client cannot tell them from real ones (RFC 5802 section 5.1).
	secret []byte
	now    func() time.Time
	cancel context.CancelFunc
}

// NewServer builds a listener's SASL server and loads its users file and
// JWKS; a file that cannot be loaded now is an error.
func NewServer(cfg *configs.ListenerSASL, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	if len(cfg.Mechanisms) == 0 {
		return nil, errors.New("sasl: no mechanisms")
	}
	s := &Server{maxReauth: time.Duration(cfg.MaxReauth), log: log, now: time.Now, secret: make([]byte, 32)}
	rand.Read(s.secret)
	var needUsers bool
	for _, m := range cfg.Mechanisms {
		switch m {
		case configs.MechPlain, configs.MechScramSHA256, configs.MechScramSHA512:
			needUsers = true
		case configs.MechOAuthBearer:
			if cfg.OAuthBearer == nil {
				return nil, errors.New("sasl: OAUTHBEARER needs an oauthbearer section")
			}
		default:
			return nil, fmt.Errorf("sasl: %q: %w", m, ErrUnsupportedMechanism)
		}
		if slices.Contains(s.mechs, m) {
			return nil, fmt.Errorf("sasl: %s listed twice", m)
		}
		s.mechs = append(s.mechs, m)
	}
	if needUsers {
		if cfg.UsersFile == "" {
			return nil, errors.New("sasl: PLAIN and SCRAM need a users_file")
		}
		path := cfg.UsersFile
		w, err := newWatched("users file "+path, log, func() (*Users, error) { return LoadUsers(path) }, path)
		if err != nil {
			return nil, fmt.Errorf("sasl: %w", err)
		}
		s.users = w
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if slices.Contains(s.mechs, configs.MechOAuthBearer) {
		v, err := newJWTVerifier(ctx, cfg.OAuthBearer, log, s.clock)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("sasl oauthbearer: %w", err)
		}
		s.jwt = v
	}
	return s, nil
}

func (s *Server) clock() time.Time { return s.now() }

// Mechanisms returns the enabled mechanisms in configured order (for
// SaslHandshake's response).
func (s *Server) Mechanisms() []string { return slices.Clone(s.mechs) }

// Close stops background work (a JWKS fetch in progress).
func (s *Server) Close() { s.cancel() }

// Exchange is one authentication attempt on one connection. It is not
// safe for concurrent use (a connection authenticates one step at a time).
type Exchange struct {
	s         *Server
	mech      string
	step      int
	finished  bool
	principal string
	lifetime  time.Duration
	scram     *scramExchange
}

// Start begins an exchange. An unknown mechanism is ErrUnsupportedMechanism.
func (s *Server) Start(mechanism string) (*Exchange, error) {
	if !slices.Contains(s.mechs, mechanism) {
		return nil, fmt.Errorf("%q (enabled: %v): %w", mechanism, s.mechs, ErrUnsupportedMechanism)
	}
	x := &Exchange{s: s, mech: mechanism}
	if h, ok := scramHashes[mechanism]; ok {
		x.scram = newScramExchange(s, mechanism, h)
	}
	return x, nil
}

// Mechanism is the exchange's mechanism.
func (x *Exchange) Mechanism() string { return x.mech }

// Principal is the authenticated user ("" until Step returns done).
func (x *Exchange) Principal() string { return x.principal }

// SessionLifetime is the KIP-368 session lifetime to send in
// SaslAuthenticate v1+ SessionLifetimeMillis, valid once done: 0 means no
// re-authentication is required; otherwise the listener's max_reauth,
// further bounded by the token's expiry for OAUTHBEARER (Kafka's
// SaslServerAuthenticator.calcCompletionTimesAndReturnSessionLifetimeMs).
func (x *Exchange) SessionLifetime() time.Duration { return x.lifetime }

// Step consumes one client token and returns the server's reply. done is
// true once the client is authenticated. An error ends the exchange: if it
// wraps ErrAuthFailed its Error() is safe to send to the client.
func (x *Exchange) Step(token []byte) (reply []byte, done bool, err error) {
	if x.finished {
		return nil, false, ErrExchangeDone
	}
	defer func() {
		if err != nil || done {
			x.finished = true
		}
		if err != nil {
			x.s.log.Debug("sasl authentication failed", "mechanism", x.mech, "reason", FailureReason(err))
		}
	}()
	x.step++
	if len(token) > maxTokenBytes {
		return nil, false, &authError{msg: "Authentication failed: SASL token too large", reason: fmt.Sprintf("token of %d bytes", len(token))}
	}
	switch x.mech {
	case configs.MechPlain:
		return x.stepPlain(token)
	case configs.MechOAuthBearer:
		return x.stepOAuth(token)
	default:
		return x.stepScram(token)
	}
}

func (x *Exchange) finish(principal string, expiry time.Time) {
	x.principal = principal
	x.lifetime = x.s.maxReauth
	if !expiry.IsZero() {
		left := expiry.Sub(x.s.now())
		if x.lifetime == 0 || left < x.lifetime {
			x.lifetime = left
		}
	}
}

// usersSnapshot returns the current users (reloading if the file changed).
func (s *Server) usersSnapshot() *Users { return s.users.get() }
