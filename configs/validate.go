package configs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
)

// AssumedNodeSpan is how many node ids (0 to AssumedNodeSpan-1) Validate
// assumes an upstream cluster may use when it checks that listeners'
// broker port ranges do not overlap. Node ids are only known once
// metadata arrives; larger ids still work, but their ports are not
// checked here (a clash then fails the bind for that one broker, and the
// proxy logs it). The built-in broker uses no broker ports at all.
const AssumedNodeSpan = 100

// Validate checks every field and the relations between them (port
// overlaps, preauth <= max frame) and returns all problems joined with
// errors.Join, or nil; for a decoded config the decoder's problems come
// first. For a parsed config each error names the file, line and column
// of the value, as long as the value is still the one read from the file
// (a value a flag replaced is named by its field only). Validate checks
// the effective configuration: run it once, after every overlay.
//
// What Validate has to parse to check, it keeps, and the plan
// (gateway.Provision) takes it from there instead of parsing again: the
// TLS sections' key pairs, CA pools, version and suites
// (ListenerTLS.Material, UpstreamTLS.Material), the principal mapping
// rules (ListenerTLS.PrincipalRules) and the policy's regexes, address
// patterns and API sets (Policy.Regex, Address, APIKeys) and
// upstream.proxy (Upstream.ProxyURL). TLS files are
// opened and parsed here, so a missing or unreadable file is reported
// here, with its path. On success, broker.defaults are rewritten in
// canonical form.
func (c *Config) Validate() error {
	v := &validator{c: c}
	if c.meta != nil {
		v.source, v.marks = c.meta.source, c.meta.marks
	}
	errs := v.check()
	if c.meta != nil {
		errs = append(slices.Clone(c.meta.decodeErrs), errs...)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	c.normalizeTopicDefaults()
	return nil
}

// check runs every section's checks and returns the problems found.
func (v *validator) check() []error {
	v.listeners()
	v.upstream()
	v.broker()
	v.admin()
	v.limits()
	v.log()
	v.audit()
	v.policy()
	v.virtualClusters() // vcluster.go
	v.ports()
	v.advertisedPorts()
	return v.errs.list(v.source)
}

type validator struct {
	c      *Config
	source string
	marks  map[string]mark
	errs   errorList
	// pp collects what the policy checks compile, while they run.
	pp *policyParsed
	// seen are the files v.file found acceptable (TLSMaterial.Files).
	seen map[string]os.FileInfo
}

// pos finds the position of path, or of its nearest recorded parent. A
// leaf whose value val no longer matches what was read is not pointed at:
// the value came from somewhere else (a flag).
func (v *validator) pos(path string, val any) (line, col int) {
	if v.marks == nil {
		return 0, 0
	}
	for p := path; ; p = parentPath(p) {
		if m, ok := v.marks[p]; ok {
			if p == path && m.leaf && val != nil && m.fp != fingerprint(val) {
				return 0, 0
			}
			return m.line, m.col
		}
		if p == "" {
			return 0, 0
		}
	}
}

// errf reports a problem with the field at path whose value is val (nil
// when the problem is not about one value).
func (v *validator) errf(path string, val any, format string, args ...any) {
	line, col := v.pos(path, val)
	v.errs.add(&FieldError{Source: v.source, Line: line, Column: col, Field: path, Msg: fmt.Sprintf(format, args...)})
}

// where returns " (line N)" for a path, for messages that mention a
// second place.
func (v *validator) where(path string) string {
	if line, _ := v.pos(path, nil); line > 0 {
		return fmt.Sprintf(" (line %d)", line)
	}
	return ""
}

var listenerNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (v *validator) listeners() {
	if len(v.c.Listeners) == 0 {
		v.errf("listeners", nil, "at least one listener is required (leave the key out for the default %s)", DefaultListen)
		return
	}
	names := map[string]int{}
	for i := range v.c.Listeners {
		l := &v.c.Listeners[i]
		p := fmt.Sprintf("listeners[%d]", i)
		switch j, dup := names[l.Name]; {
		case l.Name == "" && i == 0:
			v.errf(p+".name", l.Name, "a name is required (a parsed file names the first listener %q)", DefaultListenerName)
		case l.Name == "":
			v.errf(p+".name", l.Name, "a name is required (only the first listener defaults to %q)", DefaultListenerName)
		case !listenerNameRE.MatchString(l.Name):
			v.errf(p+".name", l.Name, "%q is not a valid name: use up to 64 letters, digits, '.', '_' or '-'", l.Name)
		case dup:
			v.errf(p+".name", l.Name, "duplicate listener name %q: listeners[%d]%s has it too", l.Name, j, v.where(fmt.Sprintf("listeners[%d].name", j)))
		default:
			names[l.Name] = i
		}
		v.listen(p+".listen", l.Listen, true)
		if l.Advertise != "" {
			v.advertise(p+".advertise", l.Advertise)
		}
		switch l.Brokers {
		case BrokersPortPerBroker:
			if l.SNI != nil {
				v.errf(p+".sni", nil, "sni is set but brokers is %q: set brokers: %s", l.Brokers, BrokersSNI)
			}
		case BrokersSNI:
			v.listenerSNI(p, l)
		case BrokersSinglePort:
			v.listenerSinglePort(p, l)
		default:
			v.errf(p+".brokers", l.Brokers, "%q is not a broker addressing mode: want %q, %q or %q", l.Brokers, BrokersPortPerBroker, BrokersSNI, BrokersSinglePort)
		}
		if l.FetchAhead != nil && l.Brokers != BrokersSinglePort {
			v.errf(p+".fetch_ahead", *l.FetchAhead, "fetch_ahead is set but brokers is %q: only brokers: %s fetches ahead (a port per broker forwards each consumer's own Fetches)", l.Brokers, BrokersSinglePort)
		}
		if b := l.BrokerPortBase; b != nil {
			if *b < 0 || *b > 65535 {
				v.errf(p+".broker_port_base", b, "%d is out of range 0-65535 (0 lets the kernel choose each broker's port)", *b)
			}
		} else if port, err := l.ListenPort(); err == nil && port == 65535 {
			v.errf(p+".listen", l.Listen, "broker ports default to the listen port + 1, which is 65536: set broker_port_base")
		}
		if l.TLS != nil {
			v.listenerTLS(p+".tls", l.TLS)
		}
		if l.SASL != nil {
			v.listenerSASL(p+".sasl", l.SASL)
		}
	}
}

// listen checks a bind address; port 0 (kernel-chosen) is allowed.
func (v *validator) listen(path, addr string, zeroOK bool) {
	host, _, err := splitHostPort(addr, zeroOK)
	if err != nil {
		v.errf(path, addr, "%q is not a host:port bind address: %s", addr, err)
		return
	}
	if host != "" && !validHost(host) {
		v.errf(path, addr, "%q has an invalid host %q", addr, host)
	}
}

func (v *validator) advertise(path, addr string) {
	host, _, err := splitAdvertise(addr)
	switch {
	case err != nil:
		v.errf(path, addr, "%q is not a host or host:port: %s", addr, err)
	case host == "":
		v.errf(path, addr, "%q has no host", addr)
	case isWildcard(host):
		v.errf(path, addr, "%q cannot be advertised: clients cannot connect to a wildcard address; give a name or address of this machine", addr)
	case !validHost(host):
		v.errf(path, addr, "%q has an invalid host %q", addr, host)
	}
}

var hostLabelRE = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$`)

// validHost accepts an IP address (IPv6 with an optional zone) or a DNS
// name; underscores are allowed because container names use them.
func validHost(h string) bool {
	ipPart, _, _ := strings.Cut(h, "%")
	if net.ParseIP(ipPart) != nil {
		return true
	}
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if !hostLabelRE.MatchString(label) {
			return false
		}
	}
	return true
}

func (v *validator) upstream() {
	u := v.c.Upstream
	if u == nil {
		return
	}
	for i, b := range u.Bootstrap {
		p := fmt.Sprintf("upstream.bootstrap[%d]", i)
		host, _, err := splitHostPort(b, false)
		switch {
		case err != nil:
			v.errf(p, b, "%q is not a host:port broker address: %s", b, err)
		case host == "":
			v.errf(p, b, "%q has no host", b)
		case !validHost(host):
			v.errf(p, b, "%q has an invalid host %q", b, host)
		}
	}
	if u.TLS != nil {
		v.upstreamTLS(u.TLS)
	}
	if u.SASL != nil {
		v.upstreamSASL(u.SASL)
	}
	v.positive("upstream.dial_timeout", u.DialTimeout)
	v.positive("upstream.metadata_refresh", u.MetadataRefresh)
	v.upstreamProxy(u)
}

// upstreamTLS checks the upstream TLS section and, when it has no
// problem, keeps what it parsed (UpstreamTLS.Material).
func (v *validator) upstreamTLS(t *UpstreamTLS) {
	const p = "upstream.tls"
	t.parsed = nil
	before := v.errs.count()
	m := &TLSMaterial{}
	switch {
	case t.Cert != "" && t.Key == "":
		v.errf(p+".key", nil, "cert is set but key is not: a client certificate needs both")
	case t.Key != "" && t.Cert == "":
		v.errf(p+".cert", nil, "key is set but cert is not: a client certificate needs both")
	case t.Cert != "":
		certOK := v.file(p+".cert", t.Cert)
		keyOK := v.file(p+".key", t.Key)
		if certOK && keyOK {
			if c, err := tls.LoadX509KeyPair(t.Cert, t.Key); err != nil {
				v.errf(p+".cert", t.Cert, "load key pair %s and %s: %s", t.Cert, t.Key, err)
			} else {
				m.Certificates = []tls.Certificate{c}
			}
		}
	}
	if t.CA != "" && v.file(p+".ca", t.CA) {
		m.CAs = v.caPool(p+".ca", t.CA)
		if t.InsecureSkipVerify {
			v.errf(p+".insecure_skip_verify", t.InsecureSkipVerify, "insecure_skip_verify would ignore ca %s: set one or the other", t.CA)
		}
	}
	if v.errs.count() == before {
		m.Files = v.files(t.Cert, t.Key, t.CA)
		t.parsed = &upstreamTLSParsed{from: *t, material: m}
	}
}

// maxPEMBytes bounds a TLS file: PEM bundles are kilobytes, and reading
// a mistaken path (a device, a log) must not hang or fill memory.
const maxPEMBytes = 1 << 20

// file checks that path names a regular file of PEM size. Devices and
// FIFOs are refused before anything reads them (/dev/zero never ends).
func (v *validator) file(field, path string) bool {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		v.errf(field, path, "%s", err)
		return false
	case fi.IsDir():
		v.errf(field, path, "%s is a directory, want a PEM file", path)
		return false
	case !fi.Mode().IsRegular():
		v.errf(field, path, "%s is not a regular file, want a PEM file", path)
		return false
	case fi.Size() > maxPEMBytes:
		v.errf(field, path, "%s is %d bytes, too large for a PEM file", path, fi.Size())
		return false
	}
	if v.seen == nil {
		v.seen = map[string]os.FileInfo{}
	}
	v.seen[path] = fi
	return true
}

func (v *validator) positive(path string, d Duration) {
	if d <= 0 {
		v.errf(path, d, "%s: want a duration above zero, such as 30s", d)
	}
}

func (v *validator) broker() {
	b := &v.c.Broker
	if strings.TrimSpace(b.DataDir) == "" {
		v.errf("broker.data_dir", b.DataDir, "must not be empty (default %s)", DefaultDataDir)
	}
	switch b.Fsync {
	case FsyncAlways, FsyncInterval, FsyncNever:
	default:
		v.errf("broker.fsync", b.Fsync, "%q: want always, interval or never", b.Fsync)
	}
	v.positive("broker.fsync_interval", b.FsyncInterval)
	v.positive("broker.cleaner_backoff", b.CleanerBackoff)
	if b.NodeID < 0 || b.NodeID > math.MaxInt32 {
		v.errf("broker.node_id", b.NodeID, "the node id must be 0 or more and fit an int32 (Kafka node ids are non-negative)")
	}
	if b.CleanerDedupeBuffer < 1<<20 {
		v.errf("broker.cleaner_dedupe_buffer", b.CleanerDedupeBuffer, "%s is below 1MiB (default %s)", b.CleanerDedupeBuffer, DefaultCleanerDedupe)
	}
	for _, k := range sortedKeys(b.Defaults) {
		if _, err := CanonicalTopicConfig(k, b.Defaults[k]); err != nil {
			v.errf("broker.defaults."+k, b.Defaults[k], "%s", err)
		}
	}
}

func (v *validator) admin() {
	a := v.c.Admin.Listen
	switch a {
	case AdminOff:
	case "":
		v.errf("admin.listen", a, "empty: give host:port, or %q to disable the admin server", AdminOff)
	default:
		v.listen("admin.listen", a, true)
	}
	v.adminSecurity()
}

func (v *validator) limits() {
	l := &v.c.Limits
	maxOK := l.MaxFrameBytes > 0 && l.MaxFrameBytes <= math.MaxInt32
	if !maxOK {
		v.errf("limits.max_frame_bytes", l.MaxFrameBytes, "%s is out of range 1-%d (a Kafka frame size is an int32)", l.MaxFrameBytes, math.MaxInt32)
	}
	switch {
	case l.MaxPreauthFrameBytes <= 0:
		v.errf("limits.max_preauth_frame_bytes", l.MaxPreauthFrameBytes, "%s: want a size above zero", l.MaxPreauthFrameBytes)
	case maxOK && l.MaxPreauthFrameBytes > l.MaxFrameBytes:
		v.errf("limits.max_preauth_frame_bytes", l.MaxPreauthFrameBytes, "%s is larger than max_frame_bytes %s", l.MaxPreauthFrameBytes, l.MaxFrameBytes)
	}
	// Both are bounded by max_frame_bytes in the gateway: max_request_bytes
	// is capped at it, the in-flight budget raised to it.
	if l.MaxRequestBytes <= 0 {
		v.errf("limits.max_request_bytes", l.MaxRequestBytes, "%s: want a size above zero", l.MaxRequestBytes)
	}
	if l.MaxRequestBytesInFlight <= 0 {
		v.errf("limits.max_request_bytes_in_flight", l.MaxRequestBytesInFlight, "%s: want a size above zero", l.MaxRequestBytesInFlight)
	}
	if l.MaxConnections < 1 {
		v.errf("limits.max_connections", l.MaxConnections, "%d: want at least 1", l.MaxConnections)
	}
	if l.MaxConnectionsPerAddress < 0 {
		v.errf("limits.max_connections_per_address", l.MaxConnectionsPerAddress, "%d: want 0 (no per-address cap) or more", l.MaxConnectionsPerAddress)
	}
	if l.MaxInFlight < 1 {
		v.errf("limits.max_in_flight", l.MaxInFlight, "%d: want at least 1", l.MaxInFlight)
	}
	if l.SocketSendBufferBytes > 1<<30 {
		v.errf("limits.socket_send_buffer_bytes", l.SocketSendBufferBytes, "%d: want at most 1GiB, or 0 (the kernel's autotuning)", l.SocketSendBufferBytes)
	}
	if cc := l.TCPCongestionControl; cc != "" && !validCongestionName(cc) {
		v.errf("limits.tcp_congestion_control", cc, "%q: want the name of a TCP congestion control algorithm (1 to 15 of a-z, 0-9, _ and -, e.g. cubic or bbr), or empty for the host's", cc)
	}
	if l.SocketUnsentBytes > 1<<30 {
		v.errf("limits.socket_unsent_bytes", l.SocketUnsentBytes, "%d: want at most 1GiB, or 0 (the kernel's default: no limit)", l.SocketUnsentBytes)
	}
	v.positive("limits.idle_timeout", l.IdleTimeout)
	v.positive("limits.frame_timeout", l.FrameTimeout)
	v.positive("limits.drain_timeout", l.DrainTimeout)
	if l.ConnectionRatePerAddress < 0 {
		v.errf("limits.connection_rate_per_address", l.ConnectionRatePerAddress, "%d: want 0 (no cap) or more", l.ConnectionRatePerAddress)
	}
	if l.AuthFailuresPerAddress < 0 {
		v.errf("limits.auth_failures_per_address", l.AuthFailuresPerAddress, "%d: want 0 (no lockout) or more", l.AuthFailuresPerAddress)
	}
	v.positive("limits.auth_lockout", l.AuthLockout)
	v.positive("limits.auth_timeout", l.AuthTimeout)
}

func (v *validator) log() {
	switch v.c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.errf("log.level", v.c.Log.Level, "%q: want debug, info, warn or error", v.c.Log.Level)
	}
	switch v.c.Log.Format {
	case "json", "text":
	default:
		v.errf("log.format", v.c.Log.Format, "%q: want json or text", v.c.Log.Format)
	}
}

// portUse is a port range one bind address will use.
type portUse struct {
	path   string // field to blame
	host   string
	lo, hi int
	desc   string
}

// ports checks that no two binds can collide: bootstrap ports, broker port
// ranges (node 0 to AssumedNodeSpan-1 with an upstream; the built-in
// broker is served at the bootstrap port itself and opens no other, and
// neither do sni and single-port listeners) and the
// admin port, on hosts that overlap (the same address, or a wildcard and
// anything). Every port of a broker range counts, the admin port's too: a
// broker port the admin server holds is a broker that cannot be served.
func (v *validator) ports() {
	span := AssumedNodeSpan
	var uses []portUse
	for i := range v.c.Listeners {
		l := &v.c.Listeners[i]
		p := fmt.Sprintf("listeners[%d]", i)
		host, port, err := splitHostPort(l.Listen, true)
		if err != nil {
			continue
		}
		if port != 0 {
			uses = append(uses, portUse{path: p + ".listen", host: host, lo: port, hi: port,
				desc: fmt.Sprintf("%s bootstrap port %s", p, net.JoinHostPort(host, fmt.Sprint(port)))})
		}
		base := l.BrokerPortBaseOrDefault()
		if base <= 0 || base > 65535 || !v.c.UpstreamMode() || l.Brokers == BrokersSNI || l.Brokers == BrokersSinglePort {
			continue
		}
		hi := min(base+span-1, 65535)
		desc := fmt.Sprintf("%s broker port %d", p, base)
		if hi > base {
			desc = fmt.Sprintf("%s broker ports %d-%d (node ids 0-%d)", p, base, hi, hi-base)
		}
		uses = append(uses, portUse{path: p + ".broker_port_base", host: host, lo: base, hi: hi, desc: desc + " on " + hostName(host)})
	}
	if a := v.c.Admin.Listen; v.c.Admin.Enabled() {
		if host, port, err := splitHostPort(a, true); err == nil && port != 0 {
			uses = append(uses, portUse{path: "admin.listen", host: host, lo: port, hi: port, desc: "the admin port " + a})
		}
	}
	for j := range uses {
		for i := range j {
			a, b := uses[i], uses[j]
			if !hostsOverlap(a.host, b.host) {
				continue
			}
			if a.lo <= b.hi && b.lo <= a.hi {
				hint := ""
				if isWildcard(a.host) != isWildcard(b.host) {
					hint = "; a bind on all interfaces takes the port on every address"
				}
				v.errf(b.path, nil, "%s collides with %s%s%s", b.desc, a.desc, v.where(a.path), hint)
			}
		}
	}
}

// advertisedPorts refuses what a port in advertise cannot honour (see
// Listener.AdvertisedPort): on a port-per-broker listener in front of an
// upstream, a kernel-chosen listen or broker port (the offset would change
// at every start) and a shifted broker range outside 1-65535; and, on any
// listener, advertised ports that collide with another listener's on the
// same advertised host (clients of one would reach the other). Only pairs
// in which a listener advertises a port are compared: without one the
// advertised ports are the bound ones, which ports checks.
func (v *validator) advertisedPorts() {
	type advUse struct {
		listener int
		path     string
		host     string
		lo, hi   int
		explicit bool
		desc     string
	}
	var uses []advUse
	for i := range v.c.Listeners {
		l := &v.c.Listeners[i]
		p := fmt.Sprintf("listeners[%d]", i)
		if l.Advertise != "" {
			if _, _, err := splitAdvertise(l.Advertise); err != nil {
				continue // advertise reports it
			}
		}
		lp, err := l.ListenPort()
		if err != nil {
			continue
		}
		ap := l.advertisePort()
		host := normHost(l.AdvertisedHost())
		if boot := l.AdvertisedPort(lp); boot != 0 {
			uses = append(uses, advUse{listener: i, path: p + ".advertise", host: host, lo: boot, hi: boot, explicit: ap != 0,
				desc: fmt.Sprintf("%s advertised bootstrap %s", p, net.JoinHostPort(l.AdvertisedHost(), fmt.Sprint(boot)))})
		}
		if !v.c.UpstreamMode() || l.Brokers != BrokersPortPerBroker {
			continue // one port serves every node
		}
		base := l.BrokerPortBaseOrDefault()
		switch {
		case base < 0 || base > 65535:
			continue // broker_port_base reports it
		case ap != 0 && lp == 0:
			v.errf(p+".advertise", l.Advertise, "%q has a port, but the listen port is 0 (kernel-chosen): broker ports are advertised shifted by advertise port - listen port, which needs a fixed listen port (and broker_port_base)", l.Advertise)
			continue
		case ap != 0 && base == 0:
			v.errf(p+".advertise", l.Advertise, "%q has a port, but broker_port_base is 0 (kernel-chosen broker ports): broker ports are advertised shifted by advertise port - listen port, which needs fixed broker ports", l.Advertise)
			continue
		case base == 0:
			continue
		}
		lo := base
		if ap != 0 {
			lo = base + ap - lp
		}
		hi := lo + AssumedNodeSpan - 1
		if ap != 0 && (lo < 1 || lo > 65535) {
			v.errf(p+".advertise", l.Advertise, "%q advertises node 0 at port %d (broker_port_base %d shifted by %d), out of range 1-65535", l.Advertise, lo, base, ap-lp)
			continue
		}
		hi = min(hi, 65535)
		uses = append(uses, advUse{listener: i, path: p + ".advertise", host: host, lo: lo, hi: hi, explicit: ap != 0,
			desc: fmt.Sprintf("%s advertised broker ports %d-%d (node ids 0-%d) on %s", p, lo, hi, hi-lo, l.AdvertisedHost())})
	}
	for j := range uses {
		for i := range j {
			a, b := uses[i], uses[j]
			if !a.explicit && !b.explicit || a.host != b.host || a.listener == b.listener {
				continue
			}
			if a.lo <= b.hi && b.lo <= a.hi {
				v.errf(b.path, nil, "%s collides with %s%s: clients of one listener would be sent to the other", b.desc, a.desc, v.where(a.path))
			}
		}
	}
}

func hostName(h string) string {
	if h == "" {
		return "all interfaces"
	}
	return h
}

// hostsOverlap reports whether binds on the two hosts can conflict. Names
// are not resolved (that happens at bind time); "localhost" is taken as
// 127.0.0.1.
func hostsOverlap(a, b string) bool {
	if isWildcard(a) || isWildcard(b) {
		return true
	}
	na, nb := normHost(a), normHost(b)
	return na == nb
}

func normHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "localhost" {
		return "127.0.0.1"
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}

// validCongestionName reports whether s can name a TCP congestion control
// algorithm: at most 15 bytes, as the kernel's (TCP_CA_NAME_MAX is 16 with
// the NUL; it cuts longer names short), and, tollgate's own rule, made of
// lower-case letters, digits, _ and - as every algorithm Linux ships is.
func validCongestionName(s string) bool {
	if len(s) == 0 || len(s) > 15 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
