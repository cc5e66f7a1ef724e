package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/tollgate-kafka/tollgate/configs"
)

// JWT validation is golang-jwt/jwt/v5's; the JWKS (RFC 7517) is parsed
// here for the key types JWT signatures use (RSA, EC P-256/384/521,
// Ed25519), which is a few lines of base64url and big integers.

const (
	maxJWKSBytes     = 1 << 20
	jwksFetchTimeout = 10 * time.Second
	// jwksMinRefetch limits fetches triggered by unknown key ids, so
	// clients with made-up kids cannot make the gateway hammer the
	// identity provider.
	jwksMinRefetch = 10 * time.Second
)

// signingMethods are the JWS algorithms accepted. "none" and the HMAC
// algorithms are not: a JWKS publishes public keys.
var signingMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// keySet is one parsed JWKS.
type keySet struct {
	byKid map[string]crypto.PublicKey
	all   []crypto.PublicKey
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS reads {"keys":[...]}. Keys for encryption (use "enc") and of
// other types are skipped; a set with no usable key is an error.
func parseJWKS(data []byte) (*keySet, error) {
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse JWKS: %w", err)
	}
	ks := &keySet{byKid: map[string]crypto.PublicKey{}}
	for i, k := range doc.Keys {
		if k.Use == "enc" {
			continue
		}
		pub, err := k.publicKey()
		if err != nil {
			return nil, fmt.Errorf("parse JWKS key %d (kid %q): %w", i, k.Kid, err)
		}
		if pub == nil {
			continue
		}
		ks.all = append(ks.all, pub)
		if k.Kid != "" {
			ks.byKid[k.Kid] = pub
		}
	}
	if len(ks.all) == 0 {
		return nil, errors.New("parse JWKS: no RSA, EC or Ed25519 signing key")
	}
	return ks, nil
}

func b64url(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// publicKey returns nil, nil for a key type it does not use.
func (k jwk) publicKey() (crypto.PublicKey, error) {
	switch k.Kty {
	case "RSA":
		n, err := b64url(k.N)
		if err != nil || len(n) == 0 {
			return nil, errors.New("bad RSA modulus n")
		}
		e, err := b64url(k.E)
		if err != nil || len(e) == 0 || len(e) > 4 {
			return nil, errors.New("bad RSA exponent e")
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < 2048 {
			return nil, fmt.Errorf("RSA key of %d bits: want at least 2048", pub.N.BitLen())
		}
		return pub, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, fmt.Errorf("unsupported EC curve %q", k.Crv)
		}
		x, err1 := b64url(k.X)
		y, err2 := b64url(k.Y)
		size := (curve.Params().BitSize + 7) / 8
		if err1 != nil || err2 != nil || len(x) != size || len(y) != size {
			return nil, errors.New("bad EC point")
		}
		// Building the uncompressed point and parsing it checks that the
		// point is on the curve.
		point := append([]byte{4}, append(x, y...)...)
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return nil, fmt.Errorf("bad EC point: %w", err)
		}
		return pub, nil
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, nil
		}
		x, err := b64url(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("bad Ed25519 key")
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, nil
}

// keySource gives the current key set; kid is the key id a token names
// ("" when none), which lets a URL source refetch for a rotated key.
type keySource interface {
	keys(kid string) (*keySet, error)
}

type fileKeys struct{ w *watched[*keySet] }

func (f fileKeys) keys(string) (*keySet, error) { return f.w.get(), nil }

// urlKeys fetches a JWKS over HTTP(S): at start, when a token arrives
// after the refresh interval (in the background), and when a token names a
// kid the set lacks (waiting for it; at most every jwksMinRefetch). A
// failed fetch keeps the last good set.
type urlKeys struct {
	url     string
	refresh time.Duration
	client  *http.Client
	ctx     context.Context
	log     *slog.Logger
	now     func() time.Time

	mu          sync.Mutex
	cur         *keySet
	fetched     time.Time
	lastAttempt time.Time
	fetching    bool
}

func (u *urlKeys) fetch() (*keySet, error) {
	ctx, cancel := context.WithTimeout(u.ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", u.url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := u.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch JWKS %s: HTTP %s", u.url, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", u.url, err)
	}
	if len(data) > maxJWKSBytes {
		return nil, fmt.Errorf("fetch JWKS %s: larger than %d bytes", u.url, maxJWKSBytes)
	}
	return parseJWKS(data)
}

func (u *urlKeys) keys(kid string) (*keySet, error) {
	u.mu.Lock()
	now := u.now()
	cur := u.cur
	missing := cur == nil || (kid != "" && cur.byKid[kid] == nil)
	stale := cur == nil || now.Sub(u.fetched) >= u.refresh
	fetch := (missing || stale) && !u.fetching && now.Sub(u.lastAttempt) >= jwksMinRefetch
	if fetch {
		u.lastAttempt, u.fetching = now, true
	}
	u.mu.Unlock()
	switch {
	case fetch && !missing:
		// Stale but usable: refresh without holding up this exchange.
		go u.refreshNow()
	case fetch:
		// The token's key may be in the new set: wait for it (bounded
		// by jwksFetchTimeout). Other exchanges meanwhile use cur.
		u.refreshNow()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cur == nil {
		return nil, errors.New("no JWKS could be fetched yet")
	}
	return u.cur, nil
}

func (u *urlKeys) refreshNow() {
	ks, err := u.fetch()
	u.mu.Lock()
	defer u.mu.Unlock()
	u.fetching = false
	if err != nil {
		u.log.Warn("JWKS fetch failed; keeping the previous keys", "url", u.url, "err", err)
		return
	}
	u.cur, u.fetched = ks, u.now()
}

type jwtVerifier struct {
	cfg    configs.OAuthBearer
	src    keySource
	parser *jwt.Parser
}

func newJWTVerifier(ctx context.Context, cfg *configs.OAuthBearer, log *slog.Logger, now func() time.Time) (*jwtVerifier, error) {
	v := &jwtVerifier{cfg: *cfg}
	if v.cfg.PrincipalClaim == "" {
		v.cfg.PrincipalClaim = configs.DefaultPrincipalClaim
	}
	switch {
	case cfg.JWKSFile != "":
		path := cfg.JWKSFile
		w, err := newWatched("JWKS file "+path, log, func() (*keySet, error) {
			data, err := readSmallFile(path, maxJWKSBytes)
			if err != nil {
				return nil, err
			}
			return parseJWKS(data)
		}, path)
		if err != nil {
			return nil, err
		}
		v.src = fileKeys{w}
	case cfg.JWKSURL != "":
		if err := configs.CheckJWKSURL(cfg.JWKSURL); err != nil {
			return nil, err
		}
		refresh := time.Duration(cfg.JWKSRefresh)
		if refresh <= 0 {
			refresh = time.Duration(configs.DefaultJWKSRefresh)
		}
		u := &urlKeys{url: cfg.JWKSURL, refresh: refresh, client: &http.Client{Timeout: jwksFetchTimeout}, ctx: ctx, log: log, now: now}
		// A provider that is down at start is not fatal: the keys are
		// fetched again at the first token.
		u.keys("")
		v.src = u
	default:
		return nil, errors.New("set jwks_file or jwks_url")
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(signingMethods),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(time.Duration(cfg.ClockSkew)),
		jwt.WithTimeFunc(now),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	v.parser = jwt.NewParser(opts...)
	return v, nil
}

// errUnknownKid is wrapped when a token names a key the JWKS lacks.
var errUnknownKid = errors.New("unknown key id")

// verify checks a compact JWS and returns the principal and expiry.
func (v *jwtVerifier) verify(token string) (string, time.Time, error) {
	claims := jwt.MapClaims{}
	_, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		ks, err := v.src.keys(kid)
		if err != nil {
			return nil, err
		}
		if kid == "" {
			set := jwt.VerificationKeySet{}
			for _, k := range ks.all {
				set.Keys = append(set.Keys, k)
			}
			return set, nil
		}
		k, ok := ks.byKid[kid]
		if !ok {
			return nil, fmt.Errorf("%w %q", errUnknownKid, kid)
		}
		return k, nil
	})
	if err != nil {
		return "", time.Time{}, err
	}
	p, _ := claims[v.cfg.PrincipalClaim].(string)
	if p == "" {
		return "", time.Time{}, fmt.Errorf("token has no %q claim", v.cfg.PrincipalClaim)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return "", time.Time{}, errors.New("token has no valid exp claim")
	}
	return p, exp.Time, nil
}

// parseOAuthBearer reads the client's initial response (RFC 7628 section
// 3.1, Kafka's OAuthBearerClientInitialResponse):
// "n,[a=authzid]," 0x01 "auth=Bearer <token>" 0x01 [key=value 0x01 ...] 0x01.
func parseOAuthBearer(msg string) (authzid, token string, err error) {
	rest, ok := strings.CutPrefix(msg, "n,")
	if !ok {
		return "", "", errors.New("gs2 header must start with n,")
	}
	authz, kvs, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", errors.New("gs2 header not terminated")
	}
	if authz != "" {
		a, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return "", "", errors.New("bad authzid")
		}
		if authzid, err = decodeSASLName(a); err != nil {
			return "", "", err
		}
	}
	body, ok := strings.CutPrefix(kvs, "\x01")
	if !ok || !strings.HasSuffix(body, "\x01\x01") {
		return "", "", errors.New("key/value pairs not framed by 0x01")
	}
	for _, kv := range strings.Split(strings.TrimSuffix(body, "\x01\x01"), "\x01") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return "", "", errors.New("bad key/value pair")
		}
		if k == "auth" {
			if token != "" {
				return "", "", errors.New("auth given twice")
			}
			t, ok := strings.CutPrefix(v, "Bearer ")
			if !ok || t == "" {
				return "", "", errors.New("auth is not \"Bearer <token>\"")
			}
			token = t
		}
	}
	if token == "" {
		return "", "", errors.New("no auth=Bearer token")
	}
	return authzid, token, nil
}

func (x *Exchange) stepOAuth(token []byte) ([]byte, bool, error) {
	if x.step != 1 {
		return nil, false, ErrExchangeDone
	}
	authz, jws, err := parseOAuthBearer(string(token))
	if err != nil {
		return nil, false, &authError{msg: "Authentication failed: invalid OAUTHBEARER initial response: " + err.Error(), reason: err.Error()}
	}
	principal, exp, err := x.s.jwt.verify(jws)
	if err != nil {
		// golang-jwt's messages ("token has invalid claims: token is
		// expired") name what is wrong without echoing the token.
		return nil, false, &authError{msg: "Authentication failed: invalid token: " + err.Error(), reason: err.Error()}
	}
	if authz != "" && authz != principal {
		return nil, false, &authError{msg: "Authentication failed: the authorization id does not match the token's principal", reason: "authzid differs"}
	}
	if !exp.After(x.s.now()) {
		// Within the clock skew leeway but already past: there is no
		// session lifetime left to grant.
		return nil, false, &authError{msg: "Authentication failed: invalid token: token is expired", reason: "expired within leeway"}
	}
	x.finish(principal, exp)
	// Kafka's OAuthBearerSaslServer answers success with an empty token.
	return []byte{}, true, nil
}
