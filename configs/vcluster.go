package configs

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// VirtualCluster is one tenant's namespace through the gateway
// (README, "Virtual clusters"): the connections its match selects see
// only the topics, group ids and transactional ids that start with
// Prefix upstream, with the prefix removed. Package proxy applies it
// (proxy/vcluster*.go).
type VirtualCluster struct {
	// Name labels the cluster's connections in audit records and
	// metrics: [a-z0-9._-], unique.
	Name string `yaml:"name"`
	// Match selects the connections: every field given must hold; the
	// first virtual cluster that matches a connection wins.
	Match VirtualClusterMatch `yaml:"match"`
	// Prefix is put in front of every topic name, group id and
	// transactional id the tenant names, upstream ("team-a.").
	Prefix string `yaml:"prefix"`
	// Policy, when set, applies to the cluster's connections on top of
	// the top-level policy (both must allow); its names are the
	// tenant's, unprefixed, as the top-level policy's are for these
	// connections.
	Policy *Policy `yaml:"policy,omitempty"`
}

// VirtualClusterMatch selects a virtual cluster's connections.
type VirtualClusterMatch struct {
	// Listener is a listener name. A listener any virtual cluster names
	// refuses connections that match none.
	Listener string `yaml:"listener,omitempty"`
	// SNI is a TLS server name pattern on a "brokers: sni" listener,
	// with one '*' standing for the listener's own names (its
	// bootstrap_host or a broker_host name): "team-a.*" matches
	// team-a.kafka.example.com and team-a.b0.kafka.example.com, and
	// the brokers are advertised to the cluster's clients under the
	// same pattern, so a reconnect stays in the cluster.
	SNI string `yaml:"sni,omitempty"`
	// Principal is the authenticated principal, Type:name (User:alice).
	// It is decided once authentication completes.
	Principal string `yaml:"principal,omitempty"`
	// Address is the client address: an IP or a CIDR.
	Address string `yaml:"address,omitempty"`

	// addr is Address as Validate parsed it.
	addr *netip.Prefix
}

// AddressPrefix returns Address parsed (ok false when Address is empty).
func (m *VirtualClusterMatch) AddressPrefix() (netip.Prefix, bool, error) {
	if m.Address == "" {
		return netip.Prefix{}, false, nil
	}
	if m.addr != nil {
		return *m.addr, true, nil
	}
	p, err := ParseAddressPattern(m.Address)
	return p, err == nil, err
}

// setDefaults gives a virtual cluster's own policy the top-level
// default (allow), so a policy section of only deny rules means what
// it says.
func (p *Policy) setDefaults() { p.Default = PolicyAllow }

var (
	vclusterNameRE = regexp.MustCompile(`^[a-z0-9._-]{1,64}$`)
	// Kafka's legal topic characters (Topic.java: [a-zA-Z0-9._-]); a
	// group or transactional id may hold more, but the prefix is shared.
	vclusterPrefixRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,200}$`)
)

// VirtualClusterListeners returns the listeners some virtual cluster's
// match names: they refuse connections that match no virtual cluster.
func (c *Config) VirtualClusterListeners() map[string]bool {
	m := map[string]bool{}
	for _, vc := range c.VirtualClusters {
		if vc.Match.Listener != "" {
			m[vc.Match.Listener] = true
		}
	}
	return m
}

// virtualClusters checks virtual_clusters.
func (v *validator) virtualClusters() {
	names := map[string]int{}
	listeners := map[string]*Listener{}
	for i := range v.c.Listeners {
		listeners[v.c.Listeners[i].Name] = &v.c.Listeners[i]
	}
	for i := range v.c.VirtualClusters {
		vc := &v.c.VirtualClusters[i]
		p := fmt.Sprintf("virtual_clusters[%d]", i)
		switch j, dup := names[vc.Name]; {
		case !vclusterNameRE.MatchString(vc.Name):
			v.errf(p+".name", vc.Name, "%q is not a valid virtual cluster name: use 1 to 64 of a-z, 0-9, '.', '_' or '-'", vc.Name)
		case dup:
			v.errf(p+".name", vc.Name, "duplicate virtual cluster name %q: virtual_clusters[%d]%s has it too", vc.Name, j, v.where(fmt.Sprintf("virtual_clusters[%d].name", j)))
		default:
			names[vc.Name] = i
		}
		switch {
		case vc.Prefix == "":
			v.errf(p+".prefix", vc.Prefix, "a virtual cluster needs a prefix (e.g. %q): the upstream names of its topics, groups and transactional ids", vc.Name+".")
		case !vclusterPrefixRE.MatchString(vc.Prefix):
			v.errf(p+".prefix", vc.Prefix, "%q: a prefix is 1 to 200 of a-z, A-Z, 0-9, '.', '_' or '-' (Kafka's topic characters)", vc.Prefix)
		}
		for j := range i {
			o := &v.c.VirtualClusters[j]
			if o.Prefix == "" || vc.Prefix == "" {
				continue
			}
			if strings.HasPrefix(vc.Prefix, o.Prefix) || strings.HasPrefix(o.Prefix, vc.Prefix) {
				v.errf(p+".prefix", vc.Prefix, "%q overlaps virtual_clusters[%d]'s prefix %q%s: one tenant would see the other's names", vc.Prefix, j, o.Prefix, v.where(fmt.Sprintf("virtual_clusters[%d].prefix", j)))
			}
		}
		m := &vc.Match
		mp := p + ".match"
		if *m == (VirtualClusterMatch{}) {
			v.errf(mp, nil, "empty match: give listener, sni, principal or address (a virtual cluster matching every connection would hide the plain cluster from all)")
		}
		if m.Listener != "" {
			if _, ok := listeners[m.Listener]; !ok {
				v.errf(mp+".listener", m.Listener, "no listener is named %q", m.Listener)
			}
		}
		if m.SNI != "" {
			v.vclusterSNI(mp, m, listeners)
		}
		if m.Principal != "" {
			if typ, name, ok := strings.Cut(m.Principal, ":"); !ok || typ == "" || name == "" {
				v.errf(mp+".principal", m.Principal, "%q: want a principal Type:name, e.g. User:alice", m.Principal)
			}
		}
		m.addr = nil
		if m.Address != "" {
			if pfx, err := ParseAddressPattern(m.Address); err != nil {
				v.errf(mp+".address", m.Address, "%s", err)
			} else {
				m.addr = &pfx
			}
		}
		if vc.Policy != nil {
			v.vclusterPolicy(p+".policy", vc.Policy)
		}
	}
}

// vclusterSNI checks match.sni: one '*', a DNS name around it, and an
// sni listener to apply it on.
func (v *validator) vclusterSNI(mp string, m *VirtualClusterMatch, listeners map[string]*Listener) {
	path := mp + ".sni"
	if n := strings.Count(m.SNI, "*"); n != 1 {
		v.errf(path, m.SNI, "%q: write '*' exactly once, standing for the listener's bootstrap_host or broker name (e.g. \"team-a.*\")", m.SNI)
		return
	}
	sample := strings.Replace(m.SNI, "*", "kafka.example.com", 1)
	if !validHost(sample) || strings.Contains(sample, "_") {
		v.errf(path, m.SNI, "%q is not a DNS name pattern once '*' is replaced by a name (%q)", m.SNI, sample)
	}
	if l, ok := listeners[m.Listener]; m.Listener != "" && ok && l.Brokers != BrokersSNI {
		v.errf(path, m.SNI, "listener %q is not a brokers: sni listener, so no client sends it a server name", m.Listener)
	}
	any := false
	for _, l := range listeners {
		any = any || l.Brokers == BrokersSNI
	}
	if !any {
		v.errf(path, m.SNI, "no listener is brokers: sni: a server name pattern needs one")
	}
}

// vclusterPolicy checks a virtual cluster's own policy: the top-level
// checks of default and rules (ACLs, quotas and hide_denied_apis are the
// gateway's, set at the top level only).
func (v *validator) vclusterPolicy(path string, p *Policy) {
	switch {
	case p.ACLs != "" || p.ACLsFile != "" || len(p.SuperUsers) > 0 || p.AllowEveryoneIfNoACLFound:
		v.errf(path, nil, "acls, acls_file, super_users and allow_everyone_if_no_acl_found are the gateway's: set them in the top-level policy")
	case p.Quotas != "" || p.QuotasFile != "":
		v.errf(path, nil, "quotas and quotas_file are the gateway's: set them in the top-level policy")
	case len(p.HideDeniedAPIs) > 0:
		v.errf(path+".hide_denied_apis", nil, "hide_denied_apis is per listener: set it in the top-level policy")
	}
	pp := &policyParsed{regex: map[string]*regexp.Regexp{}, addr: map[string]netip.Prefix{}, api: map[string][]int16{}}
	saved := v.pp
	v.pp = pp
	defer func() { v.pp, p.parsed = saved, pp }()
	switch p.Default {
	case PolicyAllow, PolicyDeny:
	default:
		v.errf(path+".default", p.Default, "%q: want allow or deny", p.Default)
	}
	v.policyRules(path, p)
}
