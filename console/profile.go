package console

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Where the commands connect when -b is not given, first match wins:
//
//  1. -b/--brokers;
//  2. $TOLLGATE_BROKERS;
//  3. the profile's brokers: --profile FILE, else $TOLLGATE_PROFILE,
//     else $XDG_CONFIG_HOME/tollgate/console.yaml
//     (~/.config/tollgate/console.yaml) when it exists;
//  4. DefaultBrokers.
//
// The profile also gives TLS and SASL settings, each overridden by its
// flag (and --tls-*/--sasl-* flags apply on top of the profile's).
const (
	envBrokers = "TOLLGATE_BROKERS"
	envProfile = "TOLLGATE_PROFILE"
)

// profile is the console profile file. Relative paths in it are relative
// to the file's directory.
type profile struct {
	Brokers brokerList   `yaml:"brokers"`
	TLS     *profileTLS  `yaml:"tls"`
	SASL    *profileSASL `yaml:"sasl"`
}

// profileTLS is the upstream configuration's tls section; present (even
// empty, `tls: {}`) it turns TLS on.
type profileTLS struct {
	CA                 string `yaml:"ca"`
	Cert               string `yaml:"cert"`
	Key                string `yaml:"key"`
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// profileSASL is the upstream configuration's sasl section.
type profileSASL struct {
	Mechanism    string `yaml:"mechanism"`
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
	TokenFile    string `yaml:"token_file"`
}

// brokerList is "a:9092,b:9092" or a YAML list.
type brokerList string

func (b *brokerList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		*b = brokerList(strings.Join(l, ","))
		return nil
	}
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*b = brokerList(s)
	return nil
}

// profilePath is the profile to read and whether it was asked for (an
// asked-for file must exist; the default one may not).
func profilePath(flagValue string, getenv func(string) string) (string, bool) {
	if flagValue != "" {
		return flagValue, true
	}
	if p := getenv(envProfile); p != "" {
		return p, true
	}
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return "", false
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "tollgate", "console.yaml"), false
}

// readProfile reads the profile at path; a missing file that was not
// asked for is no profile.
func readProfile(path string, asked bool) (*profile, error) {
	if path == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !asked {
		return nil, nil
	}
	if err != nil {
		return nil, usagef("profile: %v", err)
	}
	var p profile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil && !errors.Is(err, io.EOF) {
		return nil, usagef("profile %s: %v", path, err)
	}
	base := filepath.Dir(path)
	rel := func(s *string) {
		if *s != "" && !filepath.IsAbs(*s) {
			*s = filepath.Join(base, *s)
		}
	}
	if p.TLS != nil {
		rel(&p.TLS.CA)
		rel(&p.TLS.Cert)
		rel(&p.TLS.Key)
	}
	if p.SASL != nil {
		rel(&p.SASL.PasswordFile)
		rel(&p.SASL.TokenFile)
	}
	return &p, nil
}

// resolve fills what the command line left out from the environment and
// the profile (the order above).
func (c *common) resolve(getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	path, asked := profilePath(c.profile, getenv)
	p, err := readProfile(path, asked)
	if err != nil {
		return err
	}
	if !set["b"] && !set["brokers"] {
		switch {
		case getenv(envBrokers) != "":
			c.brokers = getenv(envBrokers)
		case p != nil && p.Brokers != "":
			c.brokers = string(p.Brokers)
		default:
			c.brokers = DefaultBrokers
		}
	}
	if p == nil {
		return nil
	}
	str := func(flagName string, dst *string, v string) {
		if !set[flagName] && v != "" {
			*dst = v
		}
	}
	if t := p.TLS; t != nil {
		if !set["tls"] {
			c.tls = true
		}
		str("tls-ca", &c.tlsCfg.CA, t.CA)
		str("tls-cert", &c.tlsCfg.Cert, t.Cert)
		str("tls-key", &c.tlsCfg.Key, t.Key)
		str("tls-server-name", &c.tlsCfg.ServerName, t.ServerName)
		if !set["tls-insecure-skip-verify"] && t.InsecureSkipVerify {
			c.tlsCfg.InsecureSkipVerify = true
		}
	}
	if s := p.SASL; s != nil {
		str("sasl-mechanism", &c.sasl.Mechanism, s.Mechanism)
		str("sasl-username", &c.sasl.Username, s.Username)
		str("sasl-password-file", &c.sasl.PasswordFile, s.PasswordFile)
		str("sasl-token-file", &c.sasl.TokenFile, s.TokenFile)
	}
	return nil
}
