// Package auth is security at the gateway's boundary, independent of the
// transport: client-facing TLS (ServerTLS, with certificate reload) and
// the principal a client certificate names (PrincipalMapper); the SASL
// server a listener runs when it terminates SASL (Server, Exchange: PLAIN,
// SCRAM-SHA-256/512, OAUTHBEARER); the users file that holds SCRAM
// credentials (Users); and the gateway's own SASL identity towards the
// upstream cluster (ClientMechanism, Authenticate).
//
// The session (package proxy) owns the Kafka framing: it answers
// SaslHandshake with Server.Mechanisms or UNSUPPORTED_SASL_MECHANISM (33)
// when Start returns ErrUnsupportedMechanism, feeds SaslAuthenticate
// tokens (or v0 raw tokens) to Exchange.Step, and answers an error
// wrapping ErrAuthFailed with SASL_AUTHENTICATION_FAILED (58) and the
// error's text, which is written for the client. Secrets never appear in
// an error or a log line; FailureReason gives the operator's detail.
//
// Libraries: SCRAM's server is github.com/xdg-go/scram (messages are
// checked against Kafka's grammar first), the upstream client mechanisms
// are franz-go's pkg/sasl, JWTs are checked with
// github.com/golang-jwt/jwt/v5. Files are watched by polling their stat
// (at most once a second, when the value is used), which also follows
// Kubernetes secret mounts.
package auth
