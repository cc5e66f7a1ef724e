package configs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The security sections (package auth builds them):
//
//	listeners:
//	  - tls:                        # client-facing TLS on this listener
//	      cert: server.crt          # PEM; cert and key are reloaded when the files change
//	      key: server.key
//	      client_ca: ""             # PEM bundle; set = clients must present a certificate it signed (mTLS)
//	      min_version: "1.2"        # "1.2" | "1.3"
//	      ciphers: []               # TLS 1.2 suites as crypto/tls names them; empty = Go's defaults
//	      principal_from: ""        # "" (subject DN + mapping rules) | subject.CN | san.dns | san.uri | san.email
//	      principal_mapping_rules: [DEFAULT]   # Kafka ssl.principal.mapping.rules, one rule per entry
//	    sasl:                       # SASL termination: the gateway is the SASL server
//	      mechanisms: [SCRAM-SHA-512]   # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER
//	      users_file: users.yaml    # for PLAIN and SCRAM; `tollgate users` maintains it; reloaded live
//	      oauthbearer:              # for OAUTHBEARER
//	        jwks_file: ""           # one of jwks_file (reloaded live) and jwks_url (https, or http on loopback)
//	        jwks_url: ""
//	        jwks_refresh: 1h        # how often jwks_url is fetched again (also on an unknown kid, at most every 10s)
//	        issuer: ""              # required: the iss claim
//	        audience: ""            # required: one of the aud claim's values
//	        principal_claim: sub    # the claim that names the principal
//	        clock_skew: 30s         # leeway for exp, nbf and iat
//	      max_reauth: 0s            # KIP-368 session lifetime; 0 = none (OAUTHBEARER is still bounded by exp)
//	upstream:
//	  sasl:                         # the gateway's own identity towards the cluster
//	    mechanism: SCRAM-SHA-512    # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER
//	    username: tollgate          # PLAIN and SCRAM
//	    password_file: /run/secrets/kafka   # PLAIN and SCRAM; read at each dial, one trailing newline dropped
//	    token_file: ""              # OAUTHBEARER; read at each dial
//	  # or: sasl: passthrough       # relay the client's own SASL exchange to the broker

// SASL mechanism names, as Kafka spells them.
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
	MechOAuthBearer = "OAUTHBEARER"
)

// Mechanisms lists every SASL mechanism tollgate knows, in preference order.
var Mechanisms = []string{MechScramSHA512, MechScramSHA256, MechOAuthBearer, MechPlain}

// ListenerTLS.PrincipalFrom values.
const (
	PrincipalFromDN         = ""            // the subject DN (RFC 2253) through the mapping rules
	PrincipalFromCN         = "subject.CN"  // the subject's common name
	PrincipalFromSANDNS     = "san.dns"     // the first DNS name SAN
	PrincipalFromSANURI     = "san.uri"     // the first URI SAN
	PrincipalFromSANEmail   = "san.email"   // the first email SAN
	UpstreamSASLPassthrough = "passthrough" // Upstream.SASL written as a word
)

// Security defaults.
const (
	DefaultTLSMinVersion     = "1.2"
	DefaultJWKSRefresh       = Duration(3600e9) // 1h
	DefaultJWTClockSkew      = Duration(30e9)   // 30s
	DefaultPrincipalClaim    = "sub"
	DefaultPrincipalMapping  = "DEFAULT"
	maxSecretFileBytes       = 1 << 20
	maxUsersFileBytesForStat = 64 << 20
)

// ListenerTLS is client-facing TLS on one listener. Files are PEM.
type ListenerTLS struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// Certificates are more certificate/key pairs: a client's TLS server
	// name (SNI) picks the first whose names match it, else Cert. One
	// certificate per name is how a "brokers: sni" listener can do
	// without a wildcard.
	Certificates []CertKeyPair `yaml:"certificates,omitempty"`
	// ClientCA, when set, requires every client to present a
	// certificate signed by it; the certificate names the principal.
	ClientCA string `yaml:"client_ca,omitempty"`
	// MinVersion is "1.2" or "1.3". TLS 1.3 is always preferred when
	// both sides have it.
	MinVersion string `yaml:"min_version"`
	// Ciphers restricts the TLS 1.2 cipher suites (crypto/tls names,
	// such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256). TLS 1.3 suites are
	// not configurable in Go.
	Ciphers []string `yaml:"ciphers,omitempty"`
	// PrincipalFrom picks what in the client certificate names the
	// principal: "" (the subject DN through PrincipalMappingRules),
	// subject.CN, san.dns, san.uri or san.email.
	PrincipalFrom string `yaml:"principal_from,omitempty"`
	// PrincipalMappingRules are Kafka's ssl.principal.mapping.rules, one
	// per entry: "RULE:pattern/replacement/[LU]" or "DEFAULT". Empty
	// means [DEFAULT] (the DN itself).
	PrincipalMappingRules []string `yaml:"principal_mapping_rules,omitempty"`

	// parsed is what Validate parsed (Material, PrincipalRules).
	parsed *listenerTLSParsed
}

// ListenerSASL is SASL termination on one listener.
type ListenerSASL struct {
	Mechanisms []string `yaml:"mechanisms"`
	// UsersFile holds the salted SCRAM credentials for PLAIN and SCRAM.
	UsersFile   string       `yaml:"users_file,omitempty"`
	OAuthBearer *OAuthBearer `yaml:"oauthbearer,omitempty"`
	// MaxReauth is the session lifetime sent in SaslAuthenticate (KIP-368,
	// like connections.max.reauth.ms); 0 means none.
	MaxReauth Duration `yaml:"max_reauth"`
}

// OAuthBearer configures JWT validation for SASL/OAUTHBEARER.
type OAuthBearer struct {
	JWKSFile       string   `yaml:"jwks_file,omitempty"`
	JWKSURL        string   `yaml:"jwks_url,omitempty"`
	JWKSRefresh    Duration `yaml:"jwks_refresh"`
	Issuer         string   `yaml:"issuer"`
	Audience       string   `yaml:"audience"`
	PrincipalClaim string   `yaml:"principal_claim"`
	ClockSkew      Duration `yaml:"clock_skew"`
}

func (o *OAuthBearer) setDefaults() {
	*o = OAuthBearer{JWKSRefresh: DefaultJWKSRefresh, PrincipalClaim: DefaultPrincipalClaim, ClockSkew: DefaultJWTClockSkew}
}

func (t *ListenerTLS) setDefaults() { *t = ListenerTLS{MinVersion: DefaultTLSMinVersion} }

// UpstreamSASL is the gateway's own SASL identity towards the upstream
// cluster, or Passthrough: the client's SASL exchange is relayed.
type UpstreamSASL struct {
	Passthrough  bool   `yaml:"-"`
	Mechanism    string `yaml:"mechanism"`
	Username     string `yaml:"username,omitempty"`
	PasswordFile string `yaml:"password_file,omitempty"`
	TokenFile    string `yaml:"token_file,omitempty"`

	// undecodable is set when the YAML was neither shape; the decoder has
	// reported it, so Validate stays quiet about the empty fields.
	undecodable bool
}

// MarshalYAML writes "passthrough" for pass-through mode, so the effective
// configuration parses back to the same thing.
func (s UpstreamSASL) MarshalYAML() (any, error) {
	if s.Passthrough {
		return UpstreamSASLPassthrough, nil
	}
	type plain UpstreamSASL // no MarshalYAML: avoids recursion
	return plain(s), nil
}

// decodeYAML accepts "passthrough" or a mapping.
func (s *UpstreamSASL) decodeYAML(d *decoder, n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value == UpstreamSASLPassthrough {
			*s = UpstreamSASL{Passthrough: true}
			d.mark(path, n, true, UpstreamSASLPassthrough)
			return
		}
	case yaml.MappingNode:
		d.mapping(n, path, reflect.ValueOf(s).Elem())
		return
	}
	s.undecodable = true
	d.errorf(n, path, "want passthrough or a mapping {mechanism, username, password_file, token_file}, got %s", describe(n))
}

// PrincipalRule is one parsed ssl.principal.mapping.rules entry.
type PrincipalRule struct {
	Default bool
	// Pattern is the rule's regular expression, anchored: Kafka applies
	// a rule only when it matches the whole DN (Matcher.matches).
	Pattern *regexp.Regexp
	// Template is the replacement in regexp.Expand syntax (Java's $1 and
	// \x escapes converted).
	Template string
	// Case is 'L' (lower-case the result), 'U' (upper-case) or 0.
	Case byte
}

// ParsePrincipalRule parses one rule in Kafka's syntax
// (SslPrincipalMapper): "DEFAULT", or "RULE:pattern/replacement/" with an
// optional L or U after the last slash; a '/' inside pattern or
// replacement is written "\/".
func ParsePrincipalRule(s string) (PrincipalRule, error) {
	s = strings.TrimSpace(s)
	if s == DefaultPrincipalMapping {
		return PrincipalRule{Default: true}, nil
	}
	rest, ok := strings.CutPrefix(s, "RULE:")
	if !ok {
		return PrincipalRule{}, fmt.Errorf("%q: want DEFAULT or RULE:pattern/replacement/[LU]", s)
	}
	pattern, rest, ok := cutUnescapedSlash(rest)
	if !ok {
		return PrincipalRule{}, fmt.Errorf("%q: missing '/' after the pattern", s)
	}
	repl, rest, ok := cutUnescapedSlash(rest)
	if !ok {
		return PrincipalRule{}, fmt.Errorf("%q: missing '/' after the replacement", s)
	}
	var r PrincipalRule
	switch rest {
	case "":
	case "L", "U":
		r.Case = rest[0]
	default:
		return PrincipalRule{}, fmt.Errorf("%q: %q after the replacement: want nothing, L or U", s, rest)
	}
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return PrincipalRule{}, fmt.Errorf("%q: pattern %q: %s", s, pattern, regexErrText(err))
	}
	r.Pattern = re
	r.Template, err = javaReplacement(repl, re.NumSubexp())
	if err != nil {
		return PrincipalRule{}, fmt.Errorf("%q: replacement %q: %s", s, repl, err)
	}
	return r, nil
}

// regexErrText drops the "error parsing regexp: " prefix; the message
// names the rule already.
func regexErrText(err error) string {
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}

// cutUnescapedSlash splits s at the first '/' not preceded by '\' and
// unescapes "\/" in the part before it.
func cutUnescapedSlash(s string) (before, after string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '/':
			b.WriteByte('/')
			i++
		case s[i] == '/':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}

// javaReplacement converts a java.util.regex replacement ($n group
// references, \c literal escapes) to a regexp.Expand template. Java reads
// as many digits after '$' as still name an existing group.
func javaReplacement(repl string, groups int) (string, error) {
	var b strings.Builder
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch c {
		case '\\':
			if i+1 == len(repl) {
				return "", fmt.Errorf("trailing '\\'")
			}
			i++
			if repl[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(repl[i])
			}
		case '$':
			j := i + 1
			if j == len(repl) || repl[j] < '0' || repl[j] > '9' {
				return "", fmt.Errorf("'$' must be followed by a group number (write \\$ for a dollar sign)")
			}
			n := int(repl[j] - '0')
			j++
			for j < len(repl) && repl[j] >= '0' && repl[j] <= '9' && n*10+int(repl[j]-'0') <= groups {
				n = n*10 + int(repl[j]-'0')
				j++
			}
			if n > groups {
				return "", fmt.Errorf("group $%d does not exist (the pattern has %d)", n, groups)
			}
			fmt.Fprintf(&b, "${%d}", n)
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// tls12Ciphers maps the configurable (TLS 1.2) suite names to ids.
func tls12Ciphers() map[string]uint16 {
	m := map[string]uint16{}
	for _, s := range tls.CipherSuites() {
		if !onlyTLS13(s) {
			m[s.Name] = s.ID
		}
	}
	return m
}

func onlyTLS13(s *tls.CipherSuite) bool {
	return len(s.SupportedVersions) == 1 && s.SupportedVersions[0] == tls.VersionTLS13
}

// CipherSuiteIDs resolves TLS 1.2 cipher suite names (as crypto/tls spells
// them). Insecure suites and TLS 1.3 suites are refused.
func CipherSuiteIDs(names []string) ([]uint16, error) {
	known := tls12Ciphers()
	var ids []uint16
	for _, n := range names {
		id, ok := known[n]
		if !ok {
			for _, s := range tls.InsecureCipherSuites() {
				if s.Name == n {
					return nil, fmt.Errorf("%s is insecure and not offered", n)
				}
			}
			for _, s := range tls.CipherSuites() {
				if s.Name == n {
					return nil, fmt.Errorf("%s is a TLS 1.3 suite, which Go does not let you configure", n)
				}
			}
			return nil, fmt.Errorf("unknown cipher suite %q", n)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// TLSVersion maps "1.2" / "1.3" to the crypto/tls constant.
func TLSVersion(s string) (uint16, error) {
	switch s {
	case "1.2":
		return tls.VersionTLS12, nil
	case "1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("%q: want \"1.2\" or \"1.3\"", s)
}

// listenerTLS checks a listener's TLS section and, when it has no
// problem, keeps what it parsed (ListenerTLS.Material, PrincipalRules).
func (v *validator) listenerTLS(p string, t *ListenerTLS) {
	t.parsed = nil
	before := v.errs.count()
	m := &TLSMaterial{}
	var extra []tls.Certificate
	for i, pair := range t.Certificates {
		if c, ok := v.keyPair(fmt.Sprintf("%s.certificates[%d]", p, i), pair.Cert, pair.Key); ok {
			extra = append(extra, c)
		}
	}
	switch {
	case t.Cert == "":
		v.errf(p+".cert", nil, "a listener certificate is required (cert and key)")
	case t.Key == "":
		v.errf(p+".key", nil, "a listener key is required (cert and key)")
	default:
		certOK := v.file(p+".cert", t.Cert)
		keyOK := v.file(p+".key", t.Key)
		if certOK && keyOK {
			if c, err := tls.LoadX509KeyPair(t.Cert, t.Key); err != nil {
				v.errf(p+".cert", t.Cert, "load key pair %s and %s: %s", t.Cert, t.Key, err)
			} else {
				m.Certificates = append(m.Certificates, c)
			}
		}
	}
	m.Certificates = append(m.Certificates, extra...)
	if t.ClientCA != "" && v.file(p+".client_ca", t.ClientCA) {
		m.CAs = v.caPool(p+".client_ca", t.ClientCA)
	}
	ver, err := TLSVersion(t.MinVersion)
	if err != nil {
		v.errf(p+".min_version", t.MinVersion, "%s", err)
	}
	m.MinVersion = ver
	for i, c := range t.Ciphers {
		if ids, err := CipherSuiteIDs([]string{c}); err != nil {
			v.errf(fmt.Sprintf("%s.ciphers[%d]", p, i), c, "%s", err)
		} else {
			m.CipherSuites = append(m.CipherSuites, ids...)
		}
	}
	if len(t.Ciphers) > 0 && ver == tls.VersionTLS13 {
		v.errf(p+".ciphers", nil, "ciphers apply to TLS 1.2 only, and min_version is 1.3")
	}
	rules := v.principal(p, t)
	if v.errs.count() == before {
		paths := []string{t.Cert, t.Key, t.ClientCA}
		for _, c := range t.Certificates {
			paths = append(paths, c.Cert, c.Key)
		}
		m.Files = v.files(paths...)
		t.parsed = &listenerTLSParsed{from: *t, material: m, rules: rules}
	}
}

// caPool reads and parses a CA bundle v.file has checked, or reports why
// it cannot (nil).
func (v *validator) caPool(field, path string) *x509.CertPool {
	data, err := os.ReadFile(path)
	if err != nil {
		v.errf(field, path, "read %s: %s", path, err)
		return nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		v.errf(field, path, "%s holds no PEM certificate", path)
		return nil
	}
	return pool
}

// principal checks principal_from and principal_mapping_rules and returns
// the parsed rules ([DEFAULT] when there are none).
func (v *validator) principal(p string, t *ListenerTLS) []PrincipalRule {
	switch t.PrincipalFrom {
	case PrincipalFromDN, PrincipalFromCN, PrincipalFromSANDNS, PrincipalFromSANURI, PrincipalFromSANEmail:
	default:
		v.errf(p+".principal_from", t.PrincipalFrom, "%q: want subject.CN, san.dns, san.uri or san.email (or leave it out for the subject DN)", t.PrincipalFrom)
	}
	if t.PrincipalFrom != PrincipalFromDN && len(t.PrincipalMappingRules) > 0 {
		v.errf(p+".principal_mapping_rules", nil, "mapping rules apply to the subject DN, and principal_from is %s: set one or the other", t.PrincipalFrom)
	}
	rules := []PrincipalRule{{Default: true}}
	if len(t.PrincipalMappingRules) > 0 {
		rules = nil
	}
	for i, r := range t.PrincipalMappingRules {
		if pr, err := ParsePrincipalRule(r); err != nil {
			v.errf(fmt.Sprintf("%s.principal_mapping_rules[%d]", p, i), r, "%s", err)
		} else {
			rules = append(rules, pr)
		}
	}
	if (t.PrincipalFrom != "" || len(t.PrincipalMappingRules) > 0) && t.ClientCA == "" {
		v.errf(p+".client_ca", nil, "principal_from and principal_mapping_rules need client certificates: set client_ca")
	}
	return rules
}

func (v *validator) listenerSASL(p string, s *ListenerSASL) {
	if len(s.Mechanisms) == 0 {
		v.errf(p+".mechanisms", nil, "at least one mechanism is required: %s", strings.Join(Mechanisms, ", "))
	}
	seen := map[string]bool{}
	var needUsers, needOAuth bool
	for i, m := range s.Mechanisms {
		mp := fmt.Sprintf("%s.mechanisms[%d]", p, i)
		switch m {
		case MechPlain, MechScramSHA256, MechScramSHA512:
			needUsers = true
		case MechOAuthBearer:
			needOAuth = true
		default:
			v.errf(mp, m, "%q is not a supported mechanism: want %s", m, strings.Join(Mechanisms, ", "))
			continue
		}
		if seen[m] {
			v.errf(mp, m, "%s is listed twice", m)
		}
		seen[m] = true
	}
	switch {
	case needUsers && s.UsersFile == "":
		v.errf(p+".users_file", nil, "PLAIN and SCRAM need a users file: create one with `tollgate users add NAME --file users.yaml`")
	case s.UsersFile != "":
		v.regularFile(p+".users_file", s.UsersFile, maxUsersFileBytesForStat, "users file")
		if !needUsers {
			v.errf(p+".users_file", s.UsersFile, "no PLAIN or SCRAM mechanism uses it")
		}
	}
	switch {
	case needOAuth && s.OAuthBearer == nil:
		v.errf(p+".oauthbearer", nil, "OAUTHBEARER needs an oauthbearer section (jwks_file or jwks_url, issuer, audience)")
	case s.OAuthBearer != nil:
		if !needOAuth {
			v.errf(p+".oauthbearer", nil, "OAUTHBEARER is not in mechanisms")
		}
		v.oauthBearer(p+".oauthbearer", s.OAuthBearer)
	}
	if s.MaxReauth < 0 {
		v.errf(p+".max_reauth", s.MaxReauth, "%s is negative: want 0 (no re-authentication) or a duration", s.MaxReauth)
	}
}

func (v *validator) oauthBearer(p string, o *OAuthBearer) {
	switch {
	case o.JWKSFile == "" && o.JWKSURL == "":
		v.errf(p, nil, "set jwks_file or jwks_url")
	case o.JWKSFile != "" && o.JWKSURL != "":
		v.errf(p+".jwks_url", o.JWKSURL, "set jwks_file or jwks_url, not both")
	case o.JWKSFile != "":
		v.regularFile(p+".jwks_file", o.JWKSFile, maxSecretFileBytes, "JWKS file")
	default:
		if err := CheckJWKSURL(o.JWKSURL); err != nil {
			v.errf(p+".jwks_url", o.JWKSURL, "%s", err)
		}
	}
	if o.Issuer == "" {
		v.errf(p+".issuer", nil, "required: the iss claim tokens must carry")
	}
	if o.Audience == "" {
		v.errf(p+".audience", nil, "required: a value the aud claim of tokens must carry")
	}
	if o.PrincipalClaim == "" {
		v.errf(p+".principal_claim", o.PrincipalClaim, "must not be empty (default %s)", DefaultPrincipalClaim)
	}
	v.positive(p+".jwks_refresh", o.JWKSRefresh)
	if o.ClockSkew < 0 {
		v.errf(p+".clock_skew", o.ClockSkew, "%s is negative", o.ClockSkew)
	}
}

// CheckJWKSURL accepts https URLs, and http only to a loopback host: keys
// fetched in clear text could be replaced by anyone on the path.
func CheckJWKSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %s", s, err)
	}
	switch u.Scheme {
	case "https":
	case "http":
		host := u.Hostname()
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("%q: http is allowed only to a loopback host; use https", s)
		}
	default:
		return fmt.Errorf("%q: want an https URL", s)
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", s)
	}
	return nil
}

// regularFile checks that path names a regular file no larger than max.
func (v *validator) regularFile(field, path string, max int64, what string) bool {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		v.errf(field, path, "%s", err)
		return false
	case !fi.Mode().IsRegular():
		v.errf(field, path, "%s is not a regular file, want a %s", path, what)
		return false
	case fi.Size() > max:
		v.errf(field, path, "%s is %d bytes, too large for a %s", path, fi.Size(), what)
		return false
	}
	return true
}

func (v *validator) upstreamSASL(s *UpstreamSASL) {
	const p = "upstream.sasl"
	if s.undecodable {
		return
	}
	if s.Passthrough {
		for i := range v.c.Listeners {
			if v.c.Listeners[i].SASL != nil {
				v.errf(fmt.Sprintf("listeners[%d].sasl", i), nil, "upstream sasl is passthrough (the broker authenticates clients), so a listener cannot terminate SASL too%s", v.where(p))
			}
		}
		return
	}
	switch s.Mechanism {
	case MechPlain, MechScramSHA256, MechScramSHA512:
		if s.Username == "" {
			v.errf(p+".username", nil, "%s needs a username", s.Mechanism)
		}
		if s.PasswordFile == "" {
			v.errf(p+".password_file", nil, "%s needs a password_file", s.Mechanism)
		} else {
			v.regularFile(p+".password_file", s.PasswordFile, maxSecretFileBytes, "password file")
		}
		if s.TokenFile != "" {
			v.errf(p+".token_file", s.TokenFile, "token_file is for OAUTHBEARER, and mechanism is %s", s.Mechanism)
		}
	case MechOAuthBearer:
		if s.TokenFile == "" {
			v.errf(p+".token_file", nil, "OAUTHBEARER needs a token_file")
		} else {
			v.regularFile(p+".token_file", s.TokenFile, maxSecretFileBytes, "token file")
		}
		if s.PasswordFile != "" {
			v.errf(p+".password_file", s.PasswordFile, "password_file is for PLAIN and SCRAM, and mechanism is OAUTHBEARER")
		}
	case "":
		v.errf(p+".mechanism", nil, "required: %s (or write sasl: passthrough)", strings.Join(Mechanisms, ", "))
	default:
		v.errf(p+".mechanism", s.Mechanism, "%q is not a supported mechanism: want %s", s.Mechanism, strings.Join(Mechanisms, ", "))
	}
}
