package proxy

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/wire"
)

// stageQuota charges the request to the client quotas set through
// AlterClientQuotas (Options.Quotas; policy/quota_limit.go) and applies
// their throttle exactly as a rate rule's (KIP-219: throttle_time_ms in
// the answer, then the connection is muted; counted under the rule name
// "quota:<key>"). A controller mutation over a strict quota (KIP-599) is
// refused topic by topic with THROTTLING_QUOTA_EXCEEDED: answered here
// when every topic is, else the others are forwarded and the refused
// ones merged into the answer. With no
// quota set it costs one atomic load.
func (s *session) stageQuota(r *request) (bool, error) {
	q := s.srv.opts.Quotas
	if !q.Active() || !r.h.Known {
		return false, nil
	}
	h := r.h
	subj := s.subjectFor(h)
	body := r.j.req
	if body == nil && q.NeedsBody(h.Key) {
		if err := s.readWholeOnce(r); err != nil {
			return false, err
		}
		var err error
		if body, err = decodeRequest(h, r.j.whole); err != nil {
			return false, err
		}
		r.j.req = body
	}
	v := q.Check(subj, h.Key, h.Version, 4+r.size, body, time.Now())
	if h.Key == apis.Fetch {
		// A consumer_byte_rate throttle charged after the last Fetch: this
		// answer carries it (throttle.go), unless policy took it already.
		if d, rule := s.takeFetchThrottle(); d > v.Throttle {
			v.Throttle, v.Rule = d, rule
		}
	}
	if v.Throttle > 0 {
		s.mute(v.Throttle)
		s.hooks.Throttled(v.Rule, v.Throttle)
		if s.srv.noisy.Allow("quota_throttle", s.remote) {
			s.log.Info("client quota exceeded; throttling the connection", "quota", v.Rule, "throttle", v.Throttle)
		}
		if v.Throttle > r.j.throttle {
			r.j.throttle, r.j.rule, r.obs.rule = v.Throttle, v.Rule, v.Rule
		}
	}
	if v.Forward != nil && r.j.forward == nil && r.j.merge == nil {
		// Some topics refused (KIP-599, topic by topic): forward the
		// others and add the refused ones' errors to the answer, as a
		// policy Partial verdict does. (Policy never splits these keys; if
		// it had, the request would go on whole.)
		f := kmsg.NewRequestFormatter() // a null client id
		if !h.ClientIDNull {
			f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(string(h.ClientID)))
		}
		r.j.forward = f.AppendRequest(nil, v.Forward, h.Correlation)
		r.j.merge = v.Merge
	}
	if v.Response == nil {
		return false, nil
	}
	r.obs.req, r.obs.rule = body, v.Rule
	return true, s.answerLocal(h, wire.Bytes(v.Response.AppendTo(nil)), v.Throttle, r.obs)
}
