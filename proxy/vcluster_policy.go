package proxy

import "github.com/twmb/franz-go/pkg/kmsg"

// stageVCPolicy applies the session's virtual cluster's own policy
// (virtual_clusters[].policy) after the top-level one: both must allow.
// It judges the request as the top-level policy left it (its re-encoded
// request when it withheld parts), with the tenant's names; a partial
// verdict of its own replaces the forwarded request and adds its merge to
// the top-level one's.
func (s *session) stageVCPolicy(r *request) (bool, error) {
	if s.vc == nil || s.vc.Policy == nil {
		return false, nil
	}
	prev := r.j
	j, answered, err := s.judgeFrom(s.vc.Policy, r.h, r.size, &r.obs, prev.whole, prev.forward)
	if err != nil || answered {
		return answered, err
	}
	if prev.req != nil {
		j.req = prev.req // the client's own request, for audit
	}
	if j.forward == nil {
		j.forward, j.fwdVersion = prev.forward, prev.fwdVersion
	} else if j.fwdVersion == 0 {
		j.fwdVersion = prev.fwdVersion
	}
	switch {
	case prev.merge != nil && j.merge != nil:
		a, b := prev.merge, j.merge
		j.merge = func(resp kmsg.Response) { b(resp); a(resp) }
	case j.merge == nil:
		j.merge = prev.merge
	}
	if prev.throttle > j.throttle {
		j.throttle = prev.throttle
	}
	if j.rule == "" {
		j.rule = prev.rule
	}
	r.j = j
	return false, nil
}
