package auth

import (
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/xdg-go/scram"
)

// The SCRAM server is xdg-go/scram's. Messages are checked here first, to
// Kafka's grammar (ScramMessages.java) and to what xdg-go/scram can take
// without panicking (an empty gs2 flag, a proof longer than the hash), and
// so that failures get Kafka-like, client-safe messages.

// scramFirst is a parsed client-first message (RFC 5802 section 7).
type scramFirst struct {
	gs2     string // the gs2 header, "n,," or "n,a=...,"; c= must echo it
	authzid string
	user    string // decoded: "=2C" is ',' and "=3D" is '='
	nonce   string
}

// parseScramClientFirst checks "n,[a=authzid],n=user,r=nonce[,ext...]".
// Kafka supports only the "n" gs2 flag (no channel binding), and the one
// extension it knows is tokenauth (delegation tokens), which tollgate does
// not issue.
func parseScramClientFirst(msg string) (scramFirst, error) {
	var f scramFirst
	if !utf8.ValidString(msg) {
		return f, errors.New("not UTF-8")
	}
	gs2, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return f, errors.New("no gs2 header")
	}
	switch gs2 {
	case "n":
	case "y", "p":
		return f, errors.New("channel binding is not supported (gs2 flag must be n)")
	default:
		if strings.HasPrefix(gs2, "p=") {
			return f, errors.New("channel binding is not supported (gs2 flag must be n)")
		}
		return f, fmt.Errorf("bad gs2 flag")
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return f, errors.New("gs2 header not terminated")
	}
	if authz != "" {
		a, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return f, errors.New("bad authzid")
		}
		var err error
		if f.authzid, err = decodeSASLName(a); err != nil {
			return f, err
		}
	}
	f.gs2 = msg[:len(msg)-len(bare)]
	fields := strings.Split(bare, ",")
	if len(fields) < 2 {
		return f, errors.New("missing user or nonce")
	}
	if strings.HasPrefix(fields[0], "m=") {
		return f, errors.New("mandatory extensions are not supported")
	}
	u, ok := strings.CutPrefix(fields[0], "n=")
	if !ok || u == "" {
		return f, errors.New("missing user")
	}
	var err error
	if f.user, err = decodeSASLName(u); err != nil {
		return f, err
	}
	n, ok := strings.CutPrefix(fields[1], "r=")
	if !ok || !printableNonce(n) {
		return f, errors.New("missing or bad nonce")
	}
	f.nonce = n
	for _, ext := range fields[2:] {
		k, v, ok := strings.Cut(ext, "=")
		if !ok || k == "" {
			return f, errors.New("bad extension")
		}
		if k == "tokenauth" && strings.EqualFold(v, "true") {
			return f, errors.New("delegation tokens (tokenauth) are not supported")
		}
	}
	return f, nil
}

// decodeSASLName undoes RFC 5802's saslname escaping; any other '=' is an
// error (the RFC says the server must fail the exchange).
func decodeSASLName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("bad '=' escape in a name")
		}
		i += 2
	}
	return b.String(), nil
}

// printableNonce: RFC 5802 "printable" is %x21-2B / %x2D-7E.
func printableNonce(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// scramFinal is a parsed client-final message.
type scramFinal struct {
	cbind []byte
	nonce string
	proof []byte
}

// parseScramClientFinal checks "c=b64,r=nonce[,ext...],p=b64proof" with a
// proof of exactly the hash's size.
func parseScramClientFinal(msg string, hashSize int) (scramFinal, error) {
	var f scramFinal
	fields := strings.Split(msg, ",")
	if len(fields) < 3 {
		return f, errors.New("missing fields")
	}
	c, ok := strings.CutPrefix(fields[0], "c=")
	if !ok {
		return f, errors.New("missing channel binding")
	}
	var err error
	if f.cbind, err = base64.StdEncoding.DecodeString(c); err != nil {
		return f, errors.New("channel binding is not base64")
	}
	if f.nonce, ok = strings.CutPrefix(fields[1], "r="); !ok || !printableNonce(f.nonce) {
		return f, errors.New("missing or bad nonce")
	}
	p, ok := strings.CutPrefix(fields[len(fields)-1], "p=")
	if !ok {
		return f, errors.New("missing proof")
	}
	if f.proof, err = base64.StdEncoding.DecodeString(p); err != nil {
		return f, errors.New("proof is not base64")
	}
	if len(f.proof) != hashSize {
		return f, fmt.Errorf("proof is %d bytes, want %d", len(f.proof), hashSize)
	}
	return f, nil
}

// scramExchange runs one SCRAM conversation.
type scramExchange struct {
	s           *Server
	mech        string
	hash        func() hash.Hash
	hashSize    int
	conv        *scram.ServerConversation
	first       scramFirst
	firstBare   string // client-first-message-bare, as received
	serverFirst string // server-first-message, as sent
	nonce       string // client nonce + server nonce, from server-first
	cred        scram.StoredCredentials
	unknown     bool // the user does not exist: fake credentials were offered
}

func newScramExchange(s *Server, mech string, h func() hash.Hash) *scramExchange {
	x := &scramExchange{s: s, mech: mech, hash: h, hashSize: h().Size()}
	gen := scram.HashGeneratorFcn(h)
	// The lookup ignores the name xdg-go passes (still escaped) and
	// uses the one parsed above. The credential is kept for the
	// librdkafka nonce form, which is verified here (finishDoubledNonce).
	srv, _ := gen.NewServer(func(string) (scram.StoredCredentials, error) {
		x.cred = x.credential()
		return x.cred, nil
	})
	x.conv = srv.NewConversation()
	return x
}

// credential returns the user's stored credential, or a fake one for an
// unknown user: same shape, a salt stable for that name, keys no password
// matches. Both fail at the final step with the same message.
func (x *scramExchange) credential() scram.StoredCredentials {
	if c, ok := x.s.usersSnapshot().Credential(x.first.user, x.mech); ok {
		return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations}, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
	}
	x.unknown = true
	h := scramHashes[x.mech]
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(hmacSum(h, x.s.secret, "salt\x00"+x.first.user)[:saltBytes]), Iters: DefaultIterations},
		StoredKey:  hmacSum(h, x.s.secret, "stored\x00"+x.first.user),
		ServerKey:  hmacSum(h, x.s.secret, "server\x00"+x.first.user),
	}
}

func (x *Exchange) stepScram(token []byte) ([]byte, bool, error) {
	sx := x.scram
	msg := string(token)
	switch x.step {
	case 1:
		f, err := parseScramClientFirst(msg)
		if err != nil {
			return nil, false, &authError{msg: "Authentication failed: invalid SCRAM client-first message: " + err.Error(), reason: "client-first: " + err.Error()}
		}
		if f.authzid != "" && f.authzid != f.user {
			// ScramSaslServer: "Authentication failed: Client requested
			// an authorization id that is different from username".
			return nil, false, &authError{msg: "Authentication failed: Client requested an authorization id that is different from username", reason: "authzid differs"}
		}
		sx.first = f
		sx.firstBare = msg[len(f.gs2):]
		reply, err := sx.conv.Step(msg)
		if err != nil {
			return nil, false, malformed(x.mech, "client-first message")
		}
		// server-first is "r=<nonce>,s=...,i=..."; keep the nonce to
		// name a mismatch in the final message.
		if r, _, ok := strings.Cut(reply, ","); ok {
			sx.nonce = strings.TrimPrefix(r, "r=")
		}
		sx.serverFirst = reply
		return []byte(reply), false, nil
	case 2:
		f, err := parseScramClientFinal(msg, sx.hashSize)
		if err != nil {
			return nil, false, &authError{msg: "Authentication failed: invalid SCRAM client-final message: " + err.Error(), reason: "client-final: " + err.Error()}
		}
		if string(f.cbind) != sx.first.gs2 {
			return nil, false, &authError{msg: "Authentication failed: SCRAM channel binding does not match the gs2 header", reason: "channel binding mismatch"}
		}
		if subtle.ConstantTimeCompare([]byte(f.nonce), []byte(sx.nonce)) != 1 {
			if subtle.ConstantTimeCompare([]byte(f.nonce), []byte(sx.first.nonce+sx.nonce)) == 1 {
				return x.finishDoubledNonce(msg, f.proof)
			}
			// ScramSaslServer: "Invalid client nonce in the final client message."
			return nil, false, &authError{msg: "Authentication failed: Invalid client nonce in the final client message.", reason: "nonce mismatch"}
		}
		reply, err := sx.conv.Step(msg)
		if err != nil || !sx.conv.Valid() || sx.unknown {
			reason := "wrong password for " + quoteName(sx.first.user)
			if sx.unknown {
				reason = "unknown user " + quoteName(sx.first.user)
			}
			return nil, false, credentialsFailed(x.mech, reason)
		}
		x.finish(sx.first.user, time.Time{})
		return []byte(reply), true, nil
	}
	return nil, false, ErrExchangeDone
}

// finishDoubledNonce completes an exchange whose client-final nonce is the
// client nonce followed by the whole server-first nonce, which itself
// already starts with the client nonce. librdkafka built its client-final
// message that way from v0.0.99 until 2.6.1 (confluentinc/librdkafka#4895,
// "avoid concatenating client side nonce once more"), and Debian's kcat
// still links such a version. Apache Kafka accepts the form since 3.8.1:
// apache/kafka commit 0a004562 made ScramSaslServer check that the final
// nonce ends with the server-first nonce instead of equalling it. We
// accept only this exact doubled form, not any suffix match.
//
// xdg-go/scram's ServerConversation rejects the nonce itself, so the proof
// is checked here per RFC 5802 section 3. The AuthMessage is built from the
// messages as actually sent: librdkafka computes its proof and expected
// ServerSignature over its own client-final message, doubled nonce and
// all, as Kafka's server does over the message it receives.
func (x *Exchange) finishDoubledNonce(msg string, proof []byte) ([]byte, bool, error) {
	sx := x.scram
	// parseScramClientFinal checked that the proof is the last field.
	withoutProof := msg[:strings.LastIndex(msg, ",p=")]
	authMsg := sx.firstBare + "," + sx.serverFirst + "," + withoutProof
	if !sx.verifyProof(authMsg, proof) || sx.unknown {
		reason := "wrong password for " + quoteName(sx.first.user)
		if sx.unknown {
			reason = "unknown user " + quoteName(sx.first.user)
		}
		return nil, false, credentialsFailed(x.mech, reason+" (librdkafka doubled-nonce form)")
	}
	x.s.log.Debug("accepted SCRAM client-final with the doubled nonce of librdkafka < 2.6.1",
		"mechanism", x.mech, "user", sx.first.user)
	x.finish(sx.first.user, time.Time{})
	sig := hmacSum(sx.hash, sx.cred.ServerKey, authMsg)
	return []byte("v=" + base64.StdEncoding.EncodeToString(sig)), true, nil
}

// verifyProof checks a client proof over authMsg against the stored
// credential (RFC 5802 section 3): ClientKey = ClientProof XOR
// HMAC(StoredKey, AuthMessage) must hash to StoredKey.
func (sx *scramExchange) verifyProof(authMsg string, proof []byte) bool {
	sig := hmacSum(sx.hash, sx.cred.StoredKey, authMsg)
	if len(proof) != len(sig) || len(sx.cred.StoredKey) != len(sig) {
		return false
	}
	clientKey := make([]byte, len(sig))
	subtle.XORBytes(clientKey, proof, sig)
	h := sx.hash()
	h.Write(clientKey)
	return subtle.ConstantTimeCompare(h.Sum(nil), sx.cred.StoredKey) == 1
}

// verifyPlain checks a PLAIN password against the user's SCRAM credential
// by deriving it from the password (constant-time compare). An unknown
// user costs the same derivation.
func (s *Server) verifyPlain(user, password string) (known, ok bool) {
	mech, c, known := s.usersSnapshot().plainCredential(user)
	if !known {
		mech = configs.MechScramSHA512
		h := scramHashes[mech]
		c = Credential{Salt: hmacSum(h, s.secret, "salt\x00"+user)[:saltBytes], Iterations: DefaultIterations, StoredKey: hmacSum(h, s.secret, "stored\x00"+user)}
	}
	got, err := DeriveCredential(mech, password, c.Salt, c.Iterations)
	if err != nil {
		return known, false
	}
	return known, hmac.Equal(got.StoredKey, c.StoredKey) && known
}

func (x *Exchange) stepPlain(token []byte) ([]byte, bool, error) {
	// RFC 4616: [authzid] NUL authcid NUL passwd. Kafka's PlainSaslServer
	// wants exactly three parts and the authzid empty or the user.
	parts := strings.Split(string(token), "\x00")
	if len(parts) != 3 {
		return nil, false, &authError{msg: fmt.Sprintf("Authentication failed: Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts)), reason: "malformed PLAIN message"}
	}
	authz, user, pass := parts[0], parts[1], parts[2]
	switch {
	case user == "":
		return nil, false, &authError{msg: "Authentication failed: username not specified", reason: "empty user"}
	case pass == "":
		return nil, false, &authError{msg: "Authentication failed: password not specified", reason: "empty password for " + quoteName(user)}
	case authz != "" && authz != user:
		return nil, false, &authError{msg: "Authentication failed: Client requested an authorization id that is different from username", reason: "authzid differs"}
	}
	known, ok := x.s.verifyPlain(user, pass)
	if !ok {
		reason := "wrong password for " + quoteName(user)
		if !known {
			reason = "unknown user " + quoteName(user)
		}
		return nil, false, credentialsFailed(x.mech, reason)
	}
	x.finish(user, time.Time{})
	// PlainSaslServer returns an empty challenge on success.
	return []byte{}, true, nil
}

// quoteName quotes a client-supplied name for a log line, cut short.
func quoteName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return fmt.Sprintf("%q", s)
}
