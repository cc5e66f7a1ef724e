package gateway

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/acl"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// Who may change the gateway's stores through the Kafka API
// (AlterClientQuotas, AlterUserScramCredentials). With policy.acls:
// enforce the policy stage has already asked the ACL store (ALTER_CONFIGS
// and ALTER on CLUSTER, acl/ops.go) before the answer stage runs. With
// ACLs off, a Kafka broker without an authorizer lets anyone alter; the
// gateway does the same unless policy.super_users names someone, in
// which case only they may: an operator who named super users has said
// who administers the gateway. A credential change never comes from an
// unauthenticated client.

// alterRefusal is the message of an alter the guard refuses.
const alterRefusal = "only policy.super_users may alter this through the gateway while policy.acls is not enforce"

// mayAlter reports whether who may alter the stores under the plan in
// force (read at every request: super users follow a reload).
func (g *Gateway) mayAlter(who proxy.Asker, credentials bool) bool {
	cfg := g.plan.Load().Config
	if credentials && who.Principal == "" {
		return false
	}
	if cfg.ACLMode() == configs.ACLsEnforce || len(cfg.Policy.SuperUsers) == 0 {
		return true
	}
	return slices.Contains(cfg.Policy.SuperUsers, acl.Principal(who.Principal))
}

// refuseSCRAMAlter answers every user of r CLUSTER_AUTHORIZATION_FAILED.
func refuseSCRAMAlter(r *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User, res.ErrorCode, res.ErrorMessage = user, kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr(alterRefusal)
		resp.Results = append(resp.Results, res)
	}
	for _, d := range r.Deletions {
		add(d.Name)
	}
	for _, u := range r.Upsertions {
		add(u.Name)
	}
	return resp
}

// refuseQuotaAlter answers every entry of r CLUSTER_AUTHORIZATION_FAILED.
func refuseQuotaAlter(r *kmsg.AlterClientQuotasRequest) *kmsg.AlterClientQuotasResponse {
	resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range r.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode, re.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr(alterRefusal)
		for _, c := range e.Entity {
			rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rc.Type, rc.Name = c.Type, c.Name
			re.Entity = append(re.Entity, rc)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}
