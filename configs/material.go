package configs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"reflect"
)

// TLSMaterial is what Validate read and parsed to check a TLS section:
// its key pairs, CA pool, minimum version and cipher suites. Package auth
// builds the section's tls.Config from it, so the files are not read and
// parsed a second time on the way from the YAML to the running gateway
// (they are again when they change: auth watches them).
//
// Ownership: set by Validate, read-only afterwards; shared by copies of
// the configuration.
type TLSMaterial struct {
	// Certificates are the key pairs: cert/key first, then a listener's
	// certificates entries in order; an upstream section's client
	// certificate, if any.
	Certificates []tls.Certificate
	// CAs is the parsed client_ca (listener) or ca (upstream); nil when
	// the section sets none.
	CAs *x509.CertPool
	// MinVersion and CipherSuites are a listener's min_version and
	// ciphers as crypto/tls constants (upstream: zero and nil).
	MinVersion   uint16
	CipherSuites []uint16
	// Files are the section's files as Validate found them (os.Stat just
	// before it read each one), by path: a watcher that starts from this
	// material compares later versions against these, so a file replaced
	// after Validate is still noticed as a change.
	Files map[string]os.FileInfo
}

// listenerTLSParsed is what Validate kept for one ListenerTLS, with a
// copy of the section it was parsed from: a section changed after Validate
// (code that edits a validated config) is parsed afresh, never served
// stale values.
type listenerTLSParsed struct {
	from     ListenerTLS
	material *TLSMaterial
	rules    []PrincipalRule
}

type upstreamTLSParsed struct {
	from     UpstreamTLS
	material *TLSMaterial
}

// Material returns the TLS material Validate parsed for this section, or
// nil when Validate has not checked the section as it is now (or found a
// problem in it): the caller then reads the files itself.
func (t *ListenerTLS) Material() *TLSMaterial {
	if p := t.current(); p != nil {
		return p.material
	}
	return nil
}

// PrincipalRules returns the parsed principal_mapping_rules ([DEFAULT]
// when empty): the ones Validate parsed, or, for a section Validate has
// not checked as it is now, parsed here.
func (t *ListenerTLS) PrincipalRules() ([]PrincipalRule, error) {
	if p := t.current(); p != nil && p.rules != nil {
		return p.rules, nil
	}
	return parsePrincipalRules(t.PrincipalMappingRules)
}

func (t *ListenerTLS) current() *listenerTLSParsed {
	p := t.parsed
	if p == nil {
		return nil
	}
	now := *t
	now.parsed = nil
	if !reflect.DeepEqual(now, p.from) {
		return nil
	}
	return p
}

// Material returns the TLS material Validate parsed for this section, or
// nil (see ListenerTLS.Material).
func (t *UpstreamTLS) Material() *TLSMaterial {
	p := t.parsed
	if p == nil {
		return nil
	}
	now := *t
	now.parsed = nil
	if !reflect.DeepEqual(now, p.from) {
		return nil
	}
	return p.material
}

// parsePrincipalRules parses mapping rules, [DEFAULT] when there are none.
// An error names the entry (principal_mapping_rules[i]).
func parsePrincipalRules(src []string) ([]PrincipalRule, error) {
	if len(src) == 0 {
		src = []string{DefaultPrincipalMapping}
	}
	rules := make([]PrincipalRule, 0, len(src))
	for i, r := range src {
		pr, err := ParsePrincipalRule(r)
		if err != nil {
			return nil, fmt.Errorf("principal_mapping_rules[%d]: %w", i, err)
		}
		rules = append(rules, pr)
	}
	return rules, nil
}

// files picks the stats of paths from what v.file saw.
func (v *validator) files(paths ...string) map[string]os.FileInfo {
	m := make(map[string]os.FileInfo, len(paths))
	for _, p := range paths {
		if fi, ok := v.seen[p]; ok {
			m[p] = fi
		}
	}
	return m
}
