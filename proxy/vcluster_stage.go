package proxy

import (
	"crypto/rand"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/wire"
)

// The "vcluster" stage (after "entry", before "answer" and "route"):
// for a session in a virtual cluster, every request's names are made
// upstream names here, once, so that the gateway's own answers (answer),
// single-port routing (route, which splits by the upstream's leaders and
// coordinators, and so must see upstream names) and the backend all see
// the cluster's real names; policy, quota and audit, before it, see the
// tenant's names. The answer's rewrite runs on the write side, first
// (before policy's merge, which adds the tenant-named parts it denied,
// and the address rewrite): vcAnswer.

// stageVCluster rewrites the request of a session in a virtual cluster,
// or refuses a key it has no row for (vcluster_table.go).
func (s *session) stageVCluster(r *request) (bool, error) {
	vc := s.vc
	if vc == nil {
		return false, nil
	}
	h := r.h
	if hk, ok := s.hooks.(VClusterHooks); ok {
		hk.VClusterRequest(vc.Name, h.Key)
	}
	e := vcTable[h.Key]
	if e == nil || !h.Known {
		return s.vcRefuse(r, &vcRefusal{apis.Of(h.Key).DenyCode, "unsupported_api"})
	}
	if e.req == nil {
		return false, nil // no names (ApiVersions, DescribeCluster, ...)
	}
	n := s.vcNames()
	switch h.Key {
	case apis.Produce:
		if r.j.forward == nil {
			ok, err := s.vcProduceFast(r, n)
			if ok || err != nil {
				return false, err
			}
		}
	case apis.Fetch:
		if h.Version >= 13 {
			ok, err := s.vcFetchFast(r, n)
			if ok || err != nil {
				return false, err
			}
		}
	}
	req, err := s.vcDecode(r)
	if err != nil {
		return false, err
	}
	if m, ok := req.(*kmsg.MetadataRequest); ok {
		for _, t := range m.Topics {
			if t.Topic == nil {
				cp := *n
				cp.asked = append(cp.asked, t.TopicID)
				n = &cp
			}
		}
	}
	n = vcListAll(n, req) // before e.req: the tenant's group names
	if ref := e.req(n, req); ref != nil {
		return s.vcRefuse(r, ref)
	}
	r.j.forward = vcEncode(h, req)
	r.p.vc = n
	return false, nil
}

// vcNames is the session's view of its cluster's names, made once.
func (s *session) vcNames() *vcNames {
	if s.vcn == nil {
		n := &vcNames{prefix: s.vc.Prefix, ids: &s.srv.vcs.ids}
		rand.Read(n.mask[:])
		n.mask[0] |= 1 // never the zero mask: a masked id always differs
		s.vcn = n
	}
	return s.vcn
}

// vcDecode decodes the request as the stages before left it: policy's
// re-encoded one, or the client's.
func (s *session) vcDecode(r *request) (kmsg.Request, error) {
	if f := r.j.forward; f != nil {
		fh, err := wire.ParseRequestHeader(f[4:])
		if err != nil {
			return nil, fmt.Errorf("re-encoded request: %w", err)
		}
		return decodeRequest(fh, f)
	}
	if err := s.readWholeOnce(r); err != nil {
		return nil, err
	}
	return decodeRequest(r.h, r.j.whole)
}

// vcEncode encodes a rewritten request with the client's header.
func vcEncode(h wire.RequestHeader, req kmsg.Request) []byte {
	f := kmsg.NewRequestFormatter() // a null client id
	if !h.ClientIDNull {
		f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(string(h.ClientID)))
	}
	return f.AppendRequest(nil, req, h.Correlation)
}

// vcRefuse answers a request the cluster cannot scope with the error
// its row (or the key's deny code) names, in the request's slot; a
// request that cannot be answered (an unknown key or version, Produce
// acks=0) closes the connection. The answer is built from the request
// as the tenant sent it, decoded again: a row may have prefixed names
// before it refused.
func (s *session) vcRefuse(r *request, ref *vcRefusal) (bool, error) {
	h := r.h
	s.vcRefused(s.vc.Name, ref.reason)
	if !h.Known || !r.expectResponse {
		return false, badRequest(closeUnsupported, "virtual cluster %s: %s v%d cannot be scoped to the cluster (%s) and cannot be answered", s.vc.Name, apiName(h.Key), h.Version, ref.reason)
	}
	req, err := s.vcDecode(r)
	if err != nil {
		return false, err
	}
	msg := fmt.Sprintf("%s is not available in virtual cluster %s (%s).", apiName(h.Key), s.vc.Name, ref.reason)
	resp := policy.ErrorResponse(req, ref.code, msg)
	r.obs.denied, r.obs.rule = true, "virtual_cluster"
	return true, s.answerLocal(h, wire.Bytes(resp.AppendTo(nil)), r.j.throttle, r.obs)
}

// vcAnswer rewrites an answer for the tenant (its row's response
// rewrite), decoded at the version the backend answered.
func vcAnswer(p *pending, body []byte) ([]byte, error) {
	e := vcTable[p.key]
	if e == nil || e.resp == nil {
		return body, nil
	}
	resp := kmsg.ResponseForKey(p.key)
	v := p.version
	if p.fwdVersion != 0 {
		v = p.fwdVersion
	}
	resp.SetVersion(v)
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("virtual cluster: decode %s v%d response: %w", apiName(p.key), v, err)
	}
	e.resp(p.vc, resp)
	return resp.AppendTo(make([]byte, 0, len(body))), nil
}

// policyNames resolves topic ids for policy (Produce and Fetch v13+):
// for a session in a virtual cluster, to the tenant's names (an id that
// is not the tenant's is unknown), so rules judge the names the tenant
// uses; otherwise the server's view.
func (s *session) policyNames() policy.TopicNames {
	if s.vc != nil {
		return s.vcNames()
	}
	return &s.srv.names
}

// TopicName is policy.TopicNames in the tenant's names.
func (n *vcNames) TopicName(id [16]byte) (string, bool) {
	name, ok := n.ids.name(id)
	if !ok || !n.down(&name) {
		return "", false
	}
	return name, true
}
