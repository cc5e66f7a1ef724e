package gateway

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/acl"
	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// ACLs (README, "ACLs"): with policy.acls enforce the plan opens the
// ACL store (policy.acls_file), attaches its authorizer to the compiled
// policy, so the policy stage authorizes every request on either
// backend, and answers the three ACL keys from the store; with off it
// answers them SECURITY_DISABLED; with upstream it leaves them to the
// upstream. The mode and the file need a restart; super_users and
// allow_everyone_if_no_acl_found follow a reload (withACLs).

// provisionACLs provisions the ACL mode of p's configuration. It runs
// after the policy is compiled and the proxy options are set.
func (p *Plan) provisionACLs(log *slog.Logger) error {
	cfg := p.Config
	p.aclMode = cfg.ACLMode()
	switch p.aclMode {
	case configs.ACLsUpstream:
		return nil
	case configs.ACLsOff:
		p.proxy.Answerer = withAnswerer(p.proxy.Answerer, &aclAnswerer{log: log})
		return nil
	}
	store, err := acl.Open(cfg.ACLsPath())
	if err != nil {
		return fmt.Errorf("policy.acls_file: %w", err)
	}
	// Only principals with ALTER on the cluster change ACLs: one line per
	// failed write is not a client's lever.
	store.OnWriteError = func(err error) { log.Error("ACL change not stored", "file", cfg.ACLsPath(), "err", err) }
	p.acls = store
	p.Policy = p.withACLs(p.Policy, cfg)
	p.proxy.Answerer = withAnswerer(p.proxy.Answerer, &aclAnswerer{store: store, log: log})
	return nil
}

// withACLs attaches the plan's ACL store, under cfg's super users, to a
// compiled engine (the first or a reloaded one).
func (p *Plan) withACLs(eng *policy.Engine, cfg *configs.Config) *policy.Engine {
	if p.acls == nil {
		return eng
	}
	return eng.WithAuthorizer(acl.NewAuthorizer(p.acls, cfg.Policy.SuperUsers, cfg.Policy.AllowEveryoneIfNoACLFound))
}

// ACLs is the gateway's ACL store (nil unless policy.acls is enforce).
func (g *Gateway) ACLs() *acl.Store { return g.plan.Load().acls }

// withAnswerer adds a to the answerers already installed (the ACL, quota
// and credential stores each bring one).
func withAnswerer(cur proxy.Answerer, a proxy.Answerer) proxy.Answerer {
	switch c := cur.(type) {
	case nil:
		return proxy.Answerers{a}
	case proxy.Answerers:
		return append(c, a)
	}
	return proxy.Answerers{cur, a}
}

// aclAnswerer answers DescribeAcls, CreateAcls and DeleteAcls: from the
// store, or SECURITY_DISABLED without one (policy.acls off).
type aclAnswerer struct {
	store *acl.Store // nil: off
	log   *slog.Logger
}

func isACLKey(key int16) bool {
	return key == apis.DescribeACLs || key == apis.CreateACLs || key == apis.DeleteACLs
}

func (a *aclAnswerer) Answers(_ string, key int16) bool { return isACLKey(key) }

// Versions offers every version kmsg decodes of the three keys, whatever
// the backend offers.
func (a *aclAnswerer) Versions(string) map[int16][2]int16 {
	out := map[int16][2]int16{}
	for _, k := range []int16{apis.DescribeACLs, apis.CreateACLs, apis.DeleteACLs} {
		out[k] = [2]int16{0, kmsg.RequestForKey(k).MaxVersion()}
	}
	return out
}

func (a *aclAnswerer) Answer(_ context.Context, who proxy.Asker, req kmsg.Request) (kmsg.Response, error) {
	if a.store == nil {
		return acl.Disabled(req)
	}
	resp, err := a.store.Answer(req)
	if err == nil && req.Key() != apis.DescribeACLs && a.log != nil {
		a.log.Info("acls changed", "api", apis.Of(req.Key()).Name, "principal", acl.Principal(who.Principal),
			"addr", who.Addr.String(), "acls", len(a.store.Bindings()))
	}
	return resp, err
}
