package auth

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"

	"github.com/tollgate-kafka/tollgate/configs"
)

// ErrNoPrincipal is returned by PrincipalMapper.Principal when the client
// certificate yields no principal: no mapping rule matches its subject, or
// it lacks the field principal_from names. Kafka closes such a connection
// (SslPrincipalMapper's NoMatchingRule); the session does the same.
var ErrNoPrincipal = errors.New("the client certificate names no principal")

// PrincipalMapper turns a verified client certificate into the principal
// that policy and audit see. It is immutable and safe for concurrent use.
type PrincipalMapper struct {
	from  string
	rules []configs.PrincipalRule
}

// NewPrincipalMapper builds the listener's mapper from principal_from
// and the parsed principal_mapping_rules (default: DEFAULT, the DN
// itself; see configs.ListenerTLS.PrincipalRules).
func NewPrincipalMapper(cfg *configs.ListenerTLS) (*PrincipalMapper, error) {
	m := &PrincipalMapper{from: cfg.PrincipalFrom}
	switch cfg.PrincipalFrom {
	case configs.PrincipalFromDN, configs.PrincipalFromCN, configs.PrincipalFromSANDNS,
		configs.PrincipalFromSANURI, configs.PrincipalFromSANEmail:
	default:
		return nil, fmt.Errorf("principal_from %q: want subject.CN, san.dns, san.uri or san.email", cfg.PrincipalFrom)
	}
	// The rules Validate parsed (parsed here for a section it has not
	// checked).
	rules, err := cfg.PrincipalRules()
	if err != nil {
		return nil, err
	}
	m.rules = rules
	return m, nil
}

// Principal returns the principal for a verified client certificate.
func (m *PrincipalMapper) Principal(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", fmt.Errorf("no client certificate: %w", ErrNoPrincipal)
	}
	first := func(what string, vals []string) (string, error) {
		if len(vals) == 0 || vals[0] == "" {
			return "", fmt.Errorf("no %s in the client certificate: %w", what, ErrNoPrincipal)
		}
		return vals[0], nil
	}
	switch m.from {
	case configs.PrincipalFromCN:
		return first("subject CN", []string{cert.Subject.CommonName})
	case configs.PrincipalFromSANDNS:
		return first("DNS SAN", cert.DNSNames)
	case configs.PrincipalFromSANEmail:
		return first("email SAN", cert.EmailAddresses)
	case configs.PrincipalFromSANURI:
		var uris []string
		for _, u := range cert.URIs {
			uris = append(uris, u.String())
		}
		return first("URI SAN", uris)
	}
	dn, err := SubjectDN(cert.RawSubject)
	if err != nil {
		return "", fmt.Errorf("client certificate subject: %w", err)
	}
	return m.mapDN(dn)
}

// mapDN applies the rules in order, as Kafka's SslPrincipalMapper: the
// first rule whose pattern matches the whole DN decides.
func (m *PrincipalMapper) mapDN(dn string) (string, error) {
	for _, r := range m.rules {
		if r.Default {
			if dn == "" {
				// A certificate with an empty subject names nobody.
				return "", fmt.Errorf("the client certificate has an empty subject: %w", ErrNoPrincipal)
			}
			return dn, nil
		}
		if !r.Pattern.MatchString(dn) {
			continue
		}
		out := r.Pattern.ReplaceAllString(dn, r.Template)
		switch r.Case {
		case 'L':
			out = strings.ToLower(out)
		case 'U':
			out = strings.ToUpper(out)
		}
		if out == "" {
			return "", fmt.Errorf("mapping rule for %q gives an empty principal: %w", dn, ErrNoPrincipal)
		}
		return out, nil
	}
	return "", fmt.Errorf("no principal mapping rule matches %q: %w", dn, ErrNoPrincipal)
}

type rawATV struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rawRDNSET's name ends in SET so encoding/asn1 reads it as a SET OF.
type rawRDNSET []rawATV

// rdnKeywords are the attribute names Java's X500Principal.getName()
// (RFC 2253 form) prints, which is what Kafka's mapping rules are written
// against; any other attribute is printed as OID=#hex of its DER value.
var rdnKeywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// SubjectDN formats a DER-encoded Name (x509.Certificate.RawSubject) in
// RFC 2253 form as Java does: the last RDN first, multi-valued RDNs joined
// with '+', special characters escaped with '\'.
func SubjectDN(raw []byte) (string, error) {
	var seq []rawRDNSET
	rest, err := asn1.Unmarshal(raw, &seq)
	if err != nil {
		return "", fmt.Errorf("parse subject: %w", err)
	}
	if len(rest) != 0 {
		return "", errors.New("parse subject: trailing data")
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i != len(seq)-1 {
			b.WriteByte(',')
		}
		for j, atv := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			oid := atv.Type.String()
			if kw, ok := rdnKeywords[oid]; ok {
				if s, ok := attrString(atv.Value); ok {
					b.WriteString(kw + "=" + escapeDNValue(s))
					continue
				}
			}
			b.WriteString(oid + "=#" + hex.EncodeToString(atv.Value.FullBytes))
		}
	}
	return b.String(), nil
}

// attrString decodes the string types a DN value uses.
func attrString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagIA5String, asn1.TagT61String:
		return string(v.Bytes), true
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		u := make([]uint16, len(v.Bytes)/2)
		for i := range u {
			u[i] = uint16(v.Bytes[2*i])<<8 | uint16(v.Bytes[2*i+1])
		}
		return string(utf16.Decode(u)), true
	}
	return "", false
}

// escapeDNValue escapes per RFC 2253 section 2.4.
func escapeDNValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.IndexByte(`,+"\<>;`, c) >= 0,
			i == 0 && (c == ' ' || c == '#'),
			i == len(s)-1 && c == ' ':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
