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
	// Principal is who the console is to the gateway: its Kafka requests
	// (pages and actions alike) go through the session pipeline on the
	// in-process listener ConsoleListener, with this principal, so policy,
	// audit, metrics and rate limits treat them as a client's. Default
	// DefaultConsolePrincipal.
	Principal string `yaml:"principal"`
}

// ConsoleListener is the listener name of the web console's in-process
// sessions (policy's `listener`, audit records, metric labels); no
// configured listener may take it while the console is on.
const ConsoleListener = "admin"

// DefaultConsolePrincipal is admin.ui.principal's default.
const DefaultConsolePrincipal = "User:tollgate-console"

// ConsoleOn reports whether the web console runs, and with it the
// in-process listener ConsoleListener.
func (a Admin) ConsoleOn() bool { return a.Enabled() && a.UI.Enabled }

// listenerNames are the listeners a policy rule or an audit filter may
// name: the configured ones and, while the console runs, its in-process
// one.
func (c *Config) listenerNames() map[string]bool {
	names := map[string]bool{}
	for _, l := range c.Listeners {
		names[l.Name] = true
	}
	if c.Admin.ConsoleOn() {
		names[ConsoleListener] = true
	}
	return names
}

// adminUI checks admin.ui: a principal in Kafka's Type:name form, and no
// client listener named like the console's in-process one.
func (v *validator) adminUI() {
	u := v.c.Admin.UI
	if !v.c.Admin.ConsoleOn() {
		return
	}
	if typ, name, ok := strings.Cut(u.Principal, ":"); !ok || typ != "User" || name == "" || strings.TrimSpace(u.Principal) != u.Principal {
		v.errf("admin.ui.principal", u.Principal, "%q is not a user principal: want User:name, as Kafka writes them (default %s)", u.Principal, DefaultConsolePrincipal)
	}
	for i, l := range v.c.Listeners {
		if l.Name == ConsoleListener {
			p := fmt.Sprintf("listeners[%d].name", i)
			v.errf(p, l.Name, "%q is the web console's in-process listener: name this listener otherwise, or set admin.ui.enabled: false", l.Name)
		}
	}
}

func (v *validator) adminSecurity() {
	a := v.c.Admin
	v.adminUI()
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
