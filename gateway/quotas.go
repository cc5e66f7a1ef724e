package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/lograte"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/proxy"
	"github.com/tollgate-kafka/tollgate/webui"
)

// Client quotas (KIP-546): with policy.quotas: enforce (the default with
// the built-in broker) the gateway answers DescribeClientQuotas and
// AlterClientQuotas from its state file (policy.quotas_file, by default
// in the data directory) and enforces them (policy/quota_limit.go, the
// proxy's quota stage). With off or upstream the keys go to the backend.

// openQuotas opens the quota store enforce mode uses (nil otherwise).
func openQuotas(cfg *configs.Config, log *slog.Logger) (*policy.Quotas, error) {
	if cfg.QuotaMode() != configs.QuotasEnforce {
		return nil, nil
	}
	q, err := policy.OpenQuotas(cfg.QuotasFile())
	if err != nil {
		return nil, fmt.Errorf("client quotas: %w", err)
	}
	log.Info("client quotas", "mode", configs.QuotasEnforce, "file", q.Path(), "entities", q.Len())
	return q, nil
}

// quotaAnswerer answers the quota keys from the store.
type quotaAnswerer struct {
	q        *policy.Quotas
	log      *lograte.Logger
	refused  *answerRefusals
	mayAlter func(who proxy.Asker, credentials bool) bool // answer_guard.go
}

// newQuotaAnswerer returns the answerer for q (nil when q is nil).
func newQuotaAnswerer(q *policy.Quotas, log *lograte.Logger, refused *answerRefusals, mayAlter func(proxy.Asker, bool) bool) proxy.Answerer {
	if q == nil {
		return nil
	}
	return &quotaAnswerer{q: q, log: log, refused: refused, mayAlter: mayAlter}
}

func (a *quotaAnswerer) Answers(_ string, key int16) bool {
	return key == apis.DescribeClientQuotas || key == apis.AlterClientQuotas
}

func (a *quotaAnswerer) Answer(_ context.Context, who proxy.Asker, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.DescribeClientQuotasRequest:
		resp := a.q.Describe(r)
		a.refused.add(apis.DescribeClientQuotas, resp.ErrorCode)
		return resp, nil
	case *kmsg.AlterClientQuotasRequest:
		if a.mayAlter != nil && !a.mayAlter(who, false) {
			resp := refuseQuotaAlter(r)
			for _, e := range resp.Entries {
				a.refused.add(apis.AlterClientQuotas, e.ErrorCode)
			}
			return resp, nil
		}
		resp, err := a.q.Alter(r)
		if err != nil {
			a.log.Warn("quota_store", who.Addr.String(), "client quotas not stored", "file", a.q.Path(), "err", err)
		}
		for _, e := range resp.Entries {
			a.refused.add(apis.AlterClientQuotas, e.ErrorCode)
		}
		if !r.ValidateOnly {
			var ok, refused int
			for _, e := range resp.Entries {
				if e.ErrorCode == 0 {
					ok++
				} else {
					refused++
				}
			}
			a.log.Info("quota_alter", who.Addr.String(), "client quotas altered through the Kafka API", "listener", who.Listener,
				"principal", who.Principal, "client_id", who.ClientID, "entities_changed", ok, "entities_refused", refused, "entities", a.q.Len())
		}
		return resp, nil
	}
	return nil, fmt.Errorf("quota answerer: unexpected %T", req)
}

// Versions offers the quota keys in ApiVersions whatever the backend
// offers (proxy.VersionsAnswerer).
func (a *quotaAnswerer) Versions(string) map[int16][2]int16 {
	return answeredVersions(apis.DescribeClientQuotas, apis.AlterClientQuotas)
}

// answeredVersions is every version kmsg knows of keys, from 0.
func answeredVersions(keys ...int16) map[int16][2]int16 {
	out := map[int16][2]int16{}
	for _, k := range keys {
		out[k] = [2]int16{0, kmsg.RequestForKey(k).MaxVersion()}
	}
	return out
}

// policyPage is the console's policy page: the rules, and the client
// quotas the gateway keeps.
func (g *Gateway) policyPage() webui.PolicyState {
	st := g.policy.snapshot()
	st.QuotaMode = g.cfg.QuotaMode()
	if g.quotas == nil {
		return st
	}
	for _, e := range g.quotas.List() {
		keys := make([]string, 0, len(e.Values))
		for k := range e.Values {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var vals []string
		for _, k := range keys {
			vals = append(vals, k+"="+strconv.FormatFloat(e.Values[k], 'f', -1, 64))
		}
		st.Quotas = append(st.Quotas, webui.QuotaInfo{User: e.Entity.User.String(), ClientID: e.Entity.ClientID.String(), Values: strings.Join(vals, " ")})
	}
	return st
}

// answerRefusals counts what the gateway's quota and SCRAM answerers
// refused (tollgate_answer_refusals_total{api,error}: one per refused
// entity or user), the metric for bad alterations and describes.
type answerRefusals struct{ c *prometheus.CounterVec }

func newAnswerRefusals(reg prometheus.Registerer) *answerRefusals {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tollgate", Name: "answer_refusals_total",
		Help: "Entries the gateway refused in the quota and SCRAM requests it answers itself, by API and Kafka error."}, []string{"api", "error"})
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			c = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	return &answerRefusals{c: c}
}

// add counts one refusal with Kafka error code code (0: nothing).
func (a *answerRefusals) add(key int16, code int16) {
	if a == nil || code == 0 {
		return
	}
	name := fmt.Sprintf("code_%d", code)
	if e := kerr.ErrorForCode(code); e != nil {
		var ke *kerr.Error
		if errors.As(e, &ke) {
			name = ke.Message
		}
	}
	a.c.WithLabelValues(apis.Of(key).Name, name).Inc()
}
