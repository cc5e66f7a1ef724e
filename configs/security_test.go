package configs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// securityFiles writes what the security sections point at and returns a
// replacer for CERT, KEY, CA, USERS, JWKS and SECRET in a YAML template.
func securityFiles(t *testing.T) *strings.Replacer {
	t.Helper()
	dir := t.TempDir()
	ca, cert, key := writeTLSFiles(t, dir)
	files := map[string]string{"users.yaml": "users: {}\n", "jwks.json": `{"keys":[]}`, "secret": "pw\n"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return strings.NewReplacer("CERT", cert, "KEY", key, "CA", ca,
		"USERS", filepath.Join(dir, "users.yaml"), "JWKS", filepath.Join(dir, "jwks.json"), "SECRET", filepath.Join(dir, "secret"))
}

func TestSecuritySections(t *testing.T) {
	r := securityFiles(t)
	src := r.Replace(`listeners:
  - name: outside
    listen: 127.0.0.1:0
    tls:
      cert: CERT
      key: KEY
      client_ca: CA
      ciphers: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]
      principal_mapping_rules: ["RULE:^CN=(.*?),OU=.*$/$1/L", DEFAULT]
    sasl:
      mechanisms: [SCRAM-SHA-512, PLAIN, OAUTHBEARER]
      users_file: USERS
      oauthbearer: {jwks_file: JWKS, issuer: https://idp, audience: tollgate}
      max_reauth: 1h
upstream:
  bootstrap: [k:9092]
  sasl: {mechanism: SCRAM-SHA-512, username: tollgate, password_file: SECRET}
`)
	c, err := Parse([]byte(src), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l := c.Listeners[0]
	if l.TLS == nil || l.TLS.MinVersion != "1.2" || l.TLS.ClientCA == "" || len(l.TLS.PrincipalMappingRules) != 2 {
		t.Errorf("tls = %+v", l.TLS)
	}
	o := l.SASL.OAuthBearer
	if len(l.SASL.Mechanisms) != 3 || l.SASL.MaxReauth != Duration(time.Hour) || o == nil ||
		o.JWKSRefresh != DefaultJWKSRefresh || o.PrincipalClaim != "sub" || o.ClockSkew != DefaultJWTClockSkew {
		t.Errorf("sasl = %+v, oauthbearer = %+v", l.SASL, o)
	}
	if s := c.Upstream.SASL; s == nil || s.Passthrough || s.Mechanism != MechScramSHA512 || s.Username != "tollgate" {
		t.Errorf("upstream sasl = %+v", s)
	}
	assertRoundTrip(t, c)

	c, err = Parse([]byte("upstream:\n  bootstrap: [k:9092]\n  sasl: passthrough\n"), "p.yaml")
	if err != nil || c.Upstream.SASL == nil || !c.Upstream.SASL.Passthrough {
		t.Fatalf("passthrough: %+v, %v", c, err)
	}
	out, _ := c.YAML()
	if !strings.Contains(string(out), "sasl: passthrough") {
		t.Errorf("effective YAML:\n%s", out)
	}
	assertRoundTrip(t, c)
}

func TestSecurityErrors(t *testing.T) {
	r := securityFiles(t)
	tlsBase := "listeners:\n  - tls:\n      cert: CERT\n      key: KEY\n"
	saslBase := "listeners:\n  - sasl:\n"
	cases := []struct {
		name, yaml, pos, field, msg string
	}{
		{"tls no cert", "listeners:\n  - tls: {key: KEY}\n", "2:10", "listeners[0].tls.cert", "a listener certificate is required"},
		{"tls missing file", "listeners:\n  - tls: {cert: /nonexistent.pem, key: KEY}\n", "2:17", "listeners[0].tls.cert", "no such file"},
		{"tls min version", tlsBase + "      min_version: \"1.1\"\n", "5:20", "listeners[0].tls.min_version", `"1.1": want "1.2" or "1.3"`},
		{"tls unknown cipher", tlsBase + "      ciphers: [TLS_X]\n", "5:17", "listeners[0].tls.ciphers[0]", `unknown cipher suite "TLS_X"`},
		{"tls insecure cipher", tlsBase + "      ciphers: [TLS_RSA_WITH_RC4_128_SHA]\n", "5:17", "listeners[0].tls.ciphers[0]", "insecure"},
		{"tls 1.3 cipher", tlsBase + "      ciphers: [TLS_AES_128_GCM_SHA256]\n", "5:17", "listeners[0].tls.ciphers[0]", "TLS 1.3 suite"},
		{"tls ciphers with 1.3", tlsBase + "      min_version: \"1.3\"\n      ciphers: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n", "6:16", "listeners[0].tls.ciphers", "TLS 1.2 only"},
		{"tls principal_from", tlsBase + "      client_ca: CA\n      principal_from: subject.O\n", "6:23", "listeners[0].tls.principal_from", `"subject.O": want subject.CN`},
		{"tls bad rule", tlsBase + "      client_ca: CA\n      principal_mapping_rules:\n        - RULE:(/x/\n", "7:11", "listeners[0].tls.principal_mapping_rules[0]", "missing closing )"},
		{"tls rule group", tlsBase + "      client_ca: CA\n      principal_mapping_rules: [\"RULE:a/$1/\"]\n", "6:33", "listeners[0].tls.principal_mapping_rules[0]", "group $1 does not exist"},
		{"tls rule case", tlsBase + "      client_ca: CA\n      principal_mapping_rules: [\"RULE:a/b/X\"]\n", "6:33", "listeners[0].tls.principal_mapping_rules[0]", `"X" after the replacement`},
		{"tls rules and from", tlsBase + "      client_ca: CA\n      principal_from: san.dns\n      principal_mapping_rules: [DEFAULT]\n", "7:32", "listeners[0].tls.principal_mapping_rules", "set one or the other"},
		{"tls principal without ca", tlsBase + "      principal_from: subject.CN\n", "3:7", "listeners[0].tls.client_ca", "need client certificates"},
		{"tls unknown field", tlsBase + "      ca: CA\n", "5:7", "listeners[0].tls", `unknown field "ca"`},
		{"sasl no mechanisms", saslBase + "      max_reauth: 1s\n", "3:7", "listeners[0].sasl.mechanisms", "at least one mechanism"},
		{"sasl unknown mechanism", saslBase + "      mechanisms: [GSSAPI]\n", "3:20", "listeners[0].sasl.mechanisms[0]", `"GSSAPI" is not a supported mechanism`},
		{"sasl mechanism twice", saslBase + "      mechanisms: [PLAIN, PLAIN]\n      users_file: USERS\n", "3:27", "listeners[0].sasl.mechanisms[1]", "listed twice"},
		{"sasl no users file", saslBase + "      mechanisms: [SCRAM-SHA-256]\n", "3:7", "listeners[0].sasl.users_file", "tollgate users add"},
		{"sasl users file missing", saslBase + "      mechanisms: [PLAIN]\n      users_file: /nonexistent.yaml\n", "4:19", "listeners[0].sasl.users_file", "no such file"},
		{"sasl users file unused", saslBase + "      mechanisms: [OAUTHBEARER]\n      users_file: USERS\n      oauthbearer: {jwks_file: JWKS, issuer: i, audience: a}\n", "4:19", "listeners[0].sasl.users_file", "no PLAIN or SCRAM"},
		{"sasl oauth missing", saslBase + "      mechanisms: [OAUTHBEARER]\n", "3:7", "listeners[0].sasl.oauthbearer", "needs an oauthbearer section"},
		{"oauth no jwks", saslBase + "      mechanisms: [OAUTHBEARER]\n      oauthbearer: {issuer: i, audience: a}\n", "4:20", "listeners[0].sasl.oauthbearer", "set jwks_file or jwks_url"},
		{"oauth both jwks", saslBase + "      mechanisms: [OAUTHBEARER]\n      oauthbearer: {jwks_url: \"https://x/\", jwks_file: JWKS, issuer: i, audience: a}\n", "4:31", "listeners[0].sasl.oauthbearer.jwks_url", "not both"},
		{"oauth http url", saslBase + "      mechanisms: [OAUTHBEARER]\n      oauthbearer: {jwks_url: \"http://idp.example/jwks\", issuer: i, audience: a}\n", "4:31", "listeners[0].sasl.oauthbearer.jwks_url", "use https"},
		{"oauth no issuer", saslBase + "      mechanisms: [OAUTHBEARER]\n      oauthbearer: {jwks_url: \"http://127.0.0.1:1/jwks\", audience: a}\n", "4:20", "listeners[0].sasl.oauthbearer.issuer", "required"},
		{"oauth no audience", saslBase + "      mechanisms: [OAUTHBEARER]\n      oauthbearer: {jwks_url: \"https://idp/jwks\", issuer: i}\n", "4:20", "listeners[0].sasl.oauthbearer.audience", "required"},
		{"sasl negative reauth", saslBase + "      mechanisms: [PLAIN]\n      users_file: USERS\n      max_reauth: -1s\n", "5:19", "listeners[0].sasl.max_reauth", "negative"},
		{"upstream sasl mechanism", "upstream:\n  sasl: {mechanism: GSSAPI}\n", "2:21", "upstream.sasl.mechanism", `"GSSAPI" is not a supported mechanism`},
		{"upstream sasl no mechanism", "upstream:\n  sasl: {username: u}\n", "2:9", "upstream.sasl.mechanism", "required"},
		{"upstream sasl no password", "upstream:\n  sasl:\n    mechanism: PLAIN\n    username: u\n", "3:5", "upstream.sasl.password_file", "needs a password_file"},
		{"upstream sasl no user", "upstream:\n  sasl:\n    mechanism: SCRAM-SHA-256\n    password_file: SECRET\n", "3:5", "upstream.sasl.username", "needs a username"},
		{"upstream password missing", "upstream:\n  sasl:\n    mechanism: PLAIN\n    username: u\n    password_file: /nonexistent\n", "5:20", "upstream.sasl.password_file", "no such file"},
		{"upstream oauth no token", "upstream:\n  sasl:\n    mechanism: OAUTHBEARER\n", "3:5", "upstream.sasl.token_file", "needs a token_file"},
		{"upstream token with scram", "upstream:\n  sasl:\n    mechanism: SCRAM-SHA-512\n    username: u\n    password_file: SECRET\n    token_file: SECRET\n", "6:17", "upstream.sasl.token_file", "token_file is for OAUTHBEARER"},
		{"passthrough and termination", "listeners:\n  - sasl:\n      mechanisms: [PLAIN]\n      users_file: USERS\nupstream:\n  sasl: passthrough\n", "3:7", "listeners[0].sasl", "cannot terminate SASL too (line 6)"},
		{"upstream sasl a list", "upstream:\n  sasl: [PLAIN]\n", "2:9", "upstream.sasl", "want passthrough or a mapping"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(r.Replace(c.yaml)), "t.yaml")
			if err == nil {
				t.Fatalf("Parse succeeded; want an error at %s", c.pos)
			}
			errs := unjoin(err)
			if len(errs) != 1 {
				t.Errorf("got %d errors, want 1:\n%v", len(errs), err)
			}
			want := fmt.Sprintf("t.yaml:%s: %s: ", c.pos, c.field)
			got := errs[0].Error()
			if !strings.HasPrefix(got, want) || !strings.Contains(got, c.msg) {
				t.Errorf("error:\n  %s\nwant prefix %q and %q", got, want, c.msg)
			}
			var fe *FieldError
			if !errors.As(errs[0], &fe) || fe.Field != c.field {
				t.Errorf("field %q, want %q", fieldOf(fe), c.field)
			}
		})
	}
}

func TestParsePrincipalRule(t *testing.T) {
	for _, c := range []struct {
		rule, dn, want string
	}{
		{"RULE:^CN=(.*?),OU=.*$/$1/", "CN=a,OU=b", "a"},
		{" RULE:^CN=(.*?),OU=.*$/$1/L ", "CN=A,OU=b", "A"}, // case is applied by the mapper
		{`RULE:^CN=(.*)$/x\/$1\$/`, "CN=a", "x/a$"},
		{`RULE:^(.)(.)(.)(.)(.)(.)(.)(.)(.)(.)(.)$/$11-$1/`, "abcdefghijk", "k-a"},
		{`RULE:^(.)(.)$/$12/`, "ab", "a2"}, // $12 is $1 then "2": there is no group 12
		{`RULE:^CN=(\/[a-z]+)$/$1/`, "CN=/ab", "/ab"},
	} {
		r, err := ParsePrincipalRule(c.rule)
		if err != nil {
			t.Errorf("%q: %v", c.rule, err)
			continue
		}
		if !r.Pattern.MatchString(c.dn) {
			t.Errorf("%q does not match %q", c.rule, c.dn)
			continue
		}
		if got := r.Pattern.ReplaceAllString(c.dn, r.Template); got != c.want {
			t.Errorf("%q on %q = %q, want %q", c.rule, c.dn, got, c.want)
		}
	}
	if r, _ := ParsePrincipalRule("RULE:x/y/"); r.Pattern.MatchString("axa") {
		t.Error("a rule pattern must match the whole DN")
	}
	if r, err := ParsePrincipalRule("DEFAULT"); err != nil || !r.Default {
		t.Errorf("DEFAULT: %+v %v", r, err)
	}
}
