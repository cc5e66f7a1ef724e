package webui

import "net/http"

func (c *Console) policy(w http.ResponseWriter, r *http.Request) {
	var st PolicyState
	if c.opts.Policy != nil {
		st = c.opts.Policy()
	}
	if st.Rules == nil {
		st.Rules = []RuleInfo{}
	}
	snap := counters(c.opts.Metrics)
	for i := range st.Rules {
		st.Rules[i].Denied = snap.denials[st.Rules[i].Name]
		st.Rules[i].Throttled = snap.throttles[st.Rules[i].Name]
	}
	c.render(w, r, "policy", "Policy", st, nil)
}
