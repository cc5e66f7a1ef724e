package configs

import (
	"fmt"
	"net"
	"strings"
)

// AdminAuth protects the admin server: a bearer token, or basic
// credentials, or both (either is accepted). Secrets live in files, read
// when the admin server starts.
type AdminAuth struct {
	TokenFile    string `yaml:"token_file,omitempty"`
	Username     string `yaml:"username,omitempty"`
	PasswordFile string `yaml:"password_file,omitempty"`
}

// AdminTLS is the admin server's certificate.
type AdminTLS struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// AdminUI configures the web console under /ui/.
type AdminUI struct {
	// Enabled serves the console (default true; it is read-only).
	Enabled bool `yaml:"enabled"`
	// Actions enables the console's data-changing actions (create a
	// topic, reset a group's offsets). Default false.
	Actions bool `yaml:"actions"`
}

func (v *validator) adminSecurity() {
	a := v.c.Admin
	if au := a.Auth; au != nil {
		if au.TokenFile == "" && au.Username == "" {
			v.errf("admin.auth", "", "give token_file, or username and password_file")
		}
		if au.TokenFile != "" {
			v.file("admin.auth.token_file", au.TokenFile)
		}
		if (au.Username == "") != (au.PasswordFile == "") {
			v.errf("admin.auth", au.Username, "username and password_file go together")
		} else if au.PasswordFile != "" {
			v.file("admin.auth.password_file", au.PasswordFile)
		}
	}
	for _, h := range a.AllowedHosts {
		if h == "" || strings.ContainsAny(h, ":/ \t@") {
			v.errf("admin.allowed_hosts", h, "want a host name without scheme, port or path (e.g. tollgate.example.com)")
		}
	}
	if t := a.TLS; t != nil {
		if t.Cert == "" || t.Key == "" {
			v.errf("admin.tls", "", "both cert and key are required")
		} else {
			v.file("admin.tls.cert", t.Cert)
			v.file("admin.tls.key", t.Key)
		}
	}
}

// Warnings are legal settings an operator probably did not mean; `tollgate
// check-config` prints them and the gateway logs them at start.
func (c *Config) Warnings() []string {
	var out []string
	a := c.Admin
	if a.Enabled() && a.Auth == nil && a.TLS == nil && !loopbackListen(a.Listen) {
		out = append(out, fmt.Sprintf("admin.listen %s is not a loopback address and the admin server has neither auth nor tls: "+
			"anyone who reaches it sees the traffic (/tap, /ui/) and the metrics", a.Listen))
	}
	return append(out, c.limitsWarnings()...)
}

// loopbackListen reports whether a listen address binds loopback only.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
