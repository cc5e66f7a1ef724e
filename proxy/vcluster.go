package proxy

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/policy"
)

// Virtual clusters (README, "Virtual clusters"; DESIGN.md, "Virtual
// clusters"): a session mapped to one sees only the topics, group ids and
// transactional ids that carry its prefix upstream, with the prefix
// removed. The mapping is decided once per connection (vcDecide), after
// authentication; the "vcluster" stage rewrites every request the
// session sends and leaves the response rewrite to the write side
// (vcluster_table.go holds both, per key).

// VirtualCluster is one virtual cluster, as the gateway applies it.
type VirtualCluster struct {
	// Name labels the cluster's sessions in audit records and metrics.
	Name string
	// Prefix is put in front of every topic name, group id and
	// transactional id upstream.
	Prefix string
	// Match: every condition given must hold. Listener is a listener
	// name; SNI a server name pattern with one '*' standing for the SNI
	// listener's own names; Principal a Type:name principal; Address
	// (when HasAddress) the client's address.
	Listener, SNI, Principal string
	Address                  netip.Prefix
	HasAddress               bool
	// Policy, if set, applies to the cluster's sessions after the
	// top-level policy (vcluster_policy.go).
	Policy *policy.Engine
}

// VClusterHooks is implemented by Hooks that count virtual-cluster
// events (metrics does); other Hooks are not asked. The vcluster label
// is one of the configured names, or "" for a session in none.
type VClusterHooks interface {
	// VClusterRequest counts a request of a session in vcluster.
	VClusterRequest(vcluster string, key int16)
	// VClusterRefused counts a refusal: a connection that matched no
	// virtual cluster on a listener that requires one (reason
	// "no_virtual_cluster"), or a request the cluster cannot rewrite
	// ("unsupported_api", "unscoped_regex", "invalid_name", ...).
	VClusterRefused(vcluster, reason string)
}

// vcluster is a VirtualCluster with what the stage needs at hand.
type vcluster struct {
	VirtualCluster
	idx                  int
	sniBefore, sniAfter  string // SNI around '*', lower-case
	principalType, pName string
}

// vclusters is the server's set, immutable after newVClusters.
type vclusters struct {
	list []*vcluster
	// required are listeners that refuse sessions matching none.
	required map[string]bool
	// ids maps topic ids to upstream names (from every Metadata,
	// CreateTopics and DescribeTopicPartitions answer a tenant session
	// reads), for Fetch and Produce v13+ and Metadata by id.
	ids topicIDView
}

func newVClusters(list []VirtualCluster) (*vclusters, error) {
	if len(list) == 0 {
		return nil, nil
	}
	vs := &vclusters{required: map[string]bool{}}
	vs.ids.m = map[[16]byte]string{}
	for i, c := range list {
		if c.Name == "" || c.Prefix == "" {
			return nil, fmt.Errorf("virtual cluster %d: a name and a prefix are required", i)
		}
		v := &vcluster{VirtualCluster: c, idx: i}
		if c.SNI != "" {
			b, a, ok := strings.Cut(strings.ToLower(strings.TrimSuffix(c.SNI, ".")), "*")
			if !ok || strings.Contains(a, "*") {
				return nil, fmt.Errorf("virtual cluster %s: sni pattern %q needs exactly one '*'", c.Name, c.SNI)
			}
			v.sniBefore, v.sniAfter = b, a
		}
		if c.Principal != "" {
			v.principalType, v.pName, _ = strings.Cut(c.Principal, ":")
		}
		if c.Listener != "" {
			vs.required[c.Listener] = true
		}
		vs.list = append(vs.list, v)
	}
	return vs, nil
}

// sniInner matches a TLS server name against the SNI patterns: the
// first cluster whose pattern holds it, and the part '*' stands for
// (which the listener routes as usual). ok is false for no pattern.
func (vs *vclusters) sniInner(name string) (vc *vcluster, inner string, ok bool) {
	if vs == nil {
		return nil, "", false
	}
	for _, v := range vs.list {
		if v.SNI == "" {
			continue
		}
		if len(name) > len(v.sniBefore)+len(v.sniAfter) && strings.HasPrefix(name, v.sniBefore) && strings.HasSuffix(name, v.sniAfter) {
			return v, name[len(v.sniBefore) : len(name)-len(v.sniAfter)], true
		}
	}
	return nil, "", false
}

// matches reports whether every condition of v holds for s.
func (v *vcluster) matches(s *session) bool {
	if v.Listener != "" && v.Listener != s.l.opts.Name {
		return false
	}
	if v.SNI != "" && s.sniVC != v {
		return false
	}
	if v.Principal != "" {
		p := s.subj.Principal
		if p == "" || (p != v.Principal && !(v.principalType == "User" && p == v.pName)) {
			return false
		}
	}
	if v.HasAddress && !v.Address.Contains(s.subj.Addr) {
		return false
	}
	return true
}

// stageVCMatch decides, at the first request past authentication, which
// virtual cluster the session is in, and refuses it on a listener that
// requires one when it matches none. Before the decision only the keys
// allowed before authentication (ApiVersions, SASL) flow, untouched.
func (s *session) stageVCMatch(r *request) (bool, error) {
	vs := s.srv.vcs
	if vs == nil || s.vcDecided || apis.Of(r.h.Key).PreAuth {
		return false, nil
	}
	s.vcDecided = true
	for _, v := range vs.list {
		if v.matches(s) {
			s.vc = v
			s.vcLabel = v.Name
			return false, nil
		}
	}
	if vs.required[s.l.opts.Name] {
		s.vcRefused("", "no_virtual_cluster")
		return false, badRequest(closeNoVirtualCluster, "listener %s serves virtual clusters only, and this connection (principal %q, address %s) matches none", s.l.opts.Name, s.subj.Principal, s.subj.Addr)
	}
	return false, nil
}

// vcRefused counts and logs (rate-limited) a virtual-cluster refusal.
func (s *session) vcRefused(vc, reason string) {
	if h, ok := s.hooks.(VClusterHooks); ok {
		h.VClusterRefused(vc, reason)
	}
	if s.srv.noisy.Allow("vcluster_"+reason, s.remote) {
		s.log.Info("virtual cluster refusal", "virtual_cluster", vc, "reason", reason)
	}
}

// topicIDView maps topic ids to upstream names.
type topicIDView struct {
	mu sync.RWMutex
	m  map[[16]byte]string
}

// maxTopicIDs bounds the view: past it, it is cleared and learnt again
// from the next answers (a client whose id is forgotten is told
// UNKNOWN_TOPIC_ID and refreshes its metadata).
const maxTopicIDs = 1 << 20

func (t *topicIDView) learn(id [16]byte, name string) {
	if id == ([16]byte{}) || name == "" {
		return
	}
	t.mu.RLock()
	cur, ok := t.m[id]
	t.mu.RUnlock()
	if ok && cur == name {
		return
	}
	t.mu.Lock()
	if len(t.m) >= maxTopicIDs {
		clear(t.m)
	}
	t.m[id] = name
	t.mu.Unlock()
}

func (t *topicIDView) known(id [16]byte) bool {
	_, ok := t.name(id)
	return ok
}

func (t *topicIDView) name(id [16]byte) (string, bool) {
	t.mu.RLock()
	n, ok := t.m[id]
	t.mu.RUnlock()
	return n, ok
}

// owns reports whether id is a topic of the cluster with prefix.
func (t *topicIDView) owns(id [16]byte, prefix string) bool {
	n, ok := t.name(id)
	return ok && len(n) > len(prefix) && strings.HasPrefix(n, prefix)
}
