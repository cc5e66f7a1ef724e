package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

type testKey struct {
	kid  string
	priv crypto.Signer
	alg  jwt.SigningMethod
}

func newRSAKey(t *testing.T, kid string) testKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{kid, k, jwt.SigningMethodRS256}
}

func newECKey(t *testing.T, kid string) testKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{kid, k, jwt.SigningMethodES256}
}

func (k testKey) jwk() map[string]string {
	enc := base64.RawURLEncoding.EncodeToString
	switch p := k.priv.Public().(type) {
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": k.kid, "use": "sig", "n": enc(p.N.Bytes()), "e": enc(big.NewInt(int64(p.E)).Bytes())}
	case *ecdsa.PublicKey:
		b, _ := p.Bytes() // 0x04 || X || Y
		n := (len(b) - 1) / 2
		return map[string]string{"kty": "EC", "kid": k.kid, "crv": "P-256", "x": enc(b[1 : 1+n]), "y": enc(b[1+n:])}
	}
	panic("unknown key type")
}

func jwksJSON(t *testing.T, keys ...testKey) []byte {
	var doc struct {
		Keys []map[string]string `json:"keys"`
	}
	for _, k := range keys {
		doc.Keys = append(doc.Keys, k.jwk())
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (k testKey) sign(t *testing.T, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(k.alg, claims)
	if k.kid != "" {
		tok.Header["kid"] = k.kid
	}
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func goodClaims(exp time.Duration) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"iss": "https://idp.example", "aud": "tollgate", "sub": "svc-orders", "iat": now.Unix(), "exp": now.Add(exp).Unix()}
}

func oauthServer(t *testing.T, ob *configs.OAuthBearer, maxReauth time.Duration) *Server {
	t.Helper()
	ob.Issuer, ob.Audience = "https://idp.example", "tollgate"
	ob.JWKSRefresh, ob.PrincipalClaim, ob.ClockSkew = configs.DefaultJWKSRefresh, "sub", configs.Duration(5*time.Second)
	s, err := NewServer(&configs.ListenerSASL{Mechanisms: []string{configs.MechOAuthBearer}, OAuthBearer: ob, MaxReauth: configs.Duration(maxReauth)}, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func bearer(t *testing.T, s *Server, token string) (*Exchange, error) {
	t.Helper()
	return drive(t, s, oauth.Auth{Token: token}.AsMechanism())
}

func TestOAuthBearer(t *testing.T) {
	dir := t.TempDir()
	rsaKey, ecKey, other := newRSAKey(t, "rsa-1"), newECKey(t, "ec-1"), newRSAKey(t, "rsa-1")
	jwks := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwks, jwksJSON(t, rsaKey, ecKey), 0o600); err != nil {
		t.Fatal(err)
	}
	s := oauthServer(t, &configs.OAuthBearer{JWKSFile: jwks}, time.Hour)

	for _, k := range []testKey{rsaKey, ecKey} {
		x, err := bearer(t, s, k.sign(t, goodClaims(10*time.Minute)))
		if err != nil {
			t.Fatalf("%s: valid token refused: %v", k.kid, err)
		}
		if x.Principal() != "svc-orders" {
			t.Errorf("principal %q", x.Principal())
		}
		// The session lifetime is the token's remaining life, below max_reauth.
		if l := x.SessionLifetime(); l <= 9*time.Minute || l > 10*time.Minute {
			t.Errorf("lifetime %v, want about 10m", l)
		}
	}
	// max_reauth bounds a long-lived token.
	if x, err := bearer(t, s, rsaKey.sign(t, goodClaims(48*time.Hour))); err != nil || x.SessionLifetime() != time.Hour {
		t.Errorf("long token: lifetime %v, %v", x.SessionLifetime(), err)
	}

	mod := func(f func(jwt.MapClaims)) jwt.MapClaims { c := goodClaims(10 * time.Minute); f(c); return c }
	noKid := rsaKey
	noKid.kid = ""
	bad := map[string]struct {
		token string
		want  string
	}{
		"expired":       {rsaKey.sign(t, mod(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() })), "expired"},
		"no exp":        {rsaKey.sign(t, mod(func(c jwt.MapClaims) { delete(c, "exp") })), "exp"},
		"wrong issuer":  {rsaKey.sign(t, mod(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })), "issuer"},
		"wrong aud":     {rsaKey.sign(t, mod(func(c jwt.MapClaims) { c["aud"] = []string{"other"} })), "audience"},
		"no sub":        {rsaKey.sign(t, mod(func(c jwt.MapClaims) { delete(c, "sub") })), `"sub"`},
		"future iat":    {rsaKey.sign(t, mod(func(c jwt.MapClaims) { c["iat"] = time.Now().Add(time.Hour).Unix() })), "before issued"},
		"unknown kid":   {newRSAKey(t, "rsa-9").sign(t, goodClaims(time.Minute)), "unknown key id"},
		"bad signature": {other.sign(t, goodClaims(time.Minute)), "signature"},
		"tampered":      {tamper(rsaKey.sign(t, goodClaims(time.Minute))), "signature"},
		"hmac alg":      {hmacToken(t), "signing method"},
		"not a jwt":     {"abc.def", "malformed"},
	}
	for name, c := range bad {
		_, err := bearer(t, s, c.token)
		if !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrAuthFailed mentioning %q", name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), c.token) {
			t.Errorf("%s: the token leaked into the error", name)
		}
	}
	// A token without kid is tried against every key.
	if _, err := bearer(t, s, noKid.sign(t, goodClaims(time.Minute))); err != nil {
		t.Errorf("token without kid: %v", err)
	}

	// Replace the JWKS: the old key stops working, the new one works.
	if err := os.WriteFile(jwks+".new", jwksJSON(t, other), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(jwks+".new", jwks); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() bool { _, err := bearer(t, s, other.sign(t, goodClaims(time.Minute))); return err == nil })
	if _, err := bearer(t, s, ecKey.sign(t, goodClaims(time.Minute))); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("a key removed from the JWKS still verifies: %v", err)
	}
}

func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	payload = []byte(strings.Replace(string(payload), "svc-orders", "svc-admins", 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

func hmacToken(t *testing.T) string {
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, goodClaims(time.Minute)).SignedString([]byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOAuthBearerMessage(t *testing.T) {
	k := newECKey(t, "ec")
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	os.WriteFile(jwks, jwksJSON(t, k), 0o600)
	s := oauthServer(t, &configs.OAuthBearer{JWKSFile: jwks}, 0)
	tok := k.sign(t, goodClaims(time.Minute))
	for msg, ok := range map[string]bool{
		"n,,\x01auth=Bearer " + tok + "\x01\x01":                    true,
		"n,a=svc-orders,\x01auth=Bearer " + tok + "\x01x=y\x01\x01": true,
		"n,a=someone,\x01auth=Bearer " + tok + "\x01\x01":           false,
		"n,,\x01auth=Bearer " + tok + "\x01":                        false,
		"y,,\x01auth=Bearer " + tok + "\x01\x01":                    false,
		"n,,\x01auth=Basic " + tok + "\x01\x01":                     false,
		"n,,\x01x=y\x01\x01":                                        false,
		"":                                                          false,
	} {
		x, _ := s.Start(configs.MechOAuthBearer)
		_, done, err := x.Step([]byte(msg))
		if done != ok || (err == nil) != ok {
			t.Errorf("%q: done=%v err=%v, want ok=%v", msg, done, err, ok)
		}
		if !ok && !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%q: %v is not ErrAuthFailed", msg, err)
		}
	}
}

func TestJWKSFromURL(t *testing.T) {
	k1, k2 := newRSAKey(t, "k1"), newECKey(t, "k2")
	var body atomic.Value
	body.Store(jwksJSON(t, k1))
	var fetches atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Write(body.Load().([]byte))
	}))
	defer hs.Close()
	s := oauthServer(t, &configs.OAuthBearer{JWKSURL: hs.URL + "/jwks"}, 0)
	if _, err := bearer(t, s, k1.sign(t, goodClaims(time.Minute))); err != nil {
		t.Fatalf("k1: %v", err)
	}
	// The provider rotates to k2; a token naming k2 triggers a refetch, but
	// only once per jwksMinRefetch, so fake the clock forward.
	body.Store(jwksJSON(t, k2))
	n := fetches.Load()
	s.now = func() time.Time { return time.Now().Add(jwksMinRefetch + time.Second) }
	if _, err := bearer(t, s, k2.sign(t, jwt.MapClaims(goodClaimsAt(time.Now().Add(jwksMinRefetch+time.Second))))); err != nil {
		t.Fatalf("k2 after rotation: %v", err)
	}
	if fetches.Load() != n+1 {
		t.Errorf("fetches %d -> %d, want one refetch", n, fetches.Load())
	}
	// Unknown kids do not refetch again within jwksMinRefetch.
	for range 3 {
		bearer(t, s, newRSAKey(t, "zz").sign(t, goodClaims(time.Minute)))
	}
	if fetches.Load() != n+1 {
		t.Errorf("unknown kids refetched: %d fetches", fetches.Load())
	}
	// Past jwks_refresh, a token with a known kid is verified at once with
	// the current keys, and the set is refreshed in the background.
	later := time.Now().Add(2 * time.Hour)
	s.now = func() time.Time { return later }
	if _, err := bearer(t, s, k2.sign(t, goodClaimsAt(later))); err != nil {
		t.Fatalf("k2 with a stale set: %v", err)
	}
	waitFor(t, 5*time.Second, func() bool { return fetches.Load() == n+2 })
}

func goodClaimsAt(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{"iss": "https://idp.example", "aud": "tollgate", "sub": "svc-orders", "iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix()}
}

func TestParseJWKS(t *testing.T) {
	for name, doc := range map[string]string{
		"not json":  "{",
		"no keys":   `{"keys":[]}`,
		"only enc":  `{"keys":[{"kty":"RSA","use":"enc","n":"AQAB","e":"AQAB"}]}`,
		"small rsa": `{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`,
		"bad curve": `{"keys":[{"kty":"EC","crv":"P-1","x":"AA","y":"AA"}]}`,
		"off curve": `{"keys":[{"kty":"EC","crv":"P-256","x":"` + strings.Repeat("A", 43) + `","y":"` + strings.Repeat("A", 43) + `"}]}`,
	} {
		if _, err := parseJWKS([]byte(doc)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	ks, err := parseJWKS([]byte(`{"keys":[{"kty":"oct","k":"AA"},{"kty":"OKP","crv":"Ed25519","kid":"ed","x":"` + base64.RawURLEncoding.EncodeToString(make([]byte, 32)) + `"}]}`))
	if err != nil || ks.byKid["ed"] == nil || len(ks.all) != 1 {
		t.Errorf("Ed25519 set: %v %+v", err, ks)
	}
}
