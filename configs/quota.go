package configs

import "path/filepath"

// policy.quotas values: where client quotas (KIP-546 DescribeClientQuotas
// and AlterClientQuotas) live.
const (
	// QuotasOff: the gateway neither answers nor enforces them; the keys
	// go to the backend like any other (the upstream's own quotas, or the
	// built-in broker's answer).
	QuotasOff = "off"
	// QuotasEnforce: the gateway answers them from its state file and
	// enforces them with its KIP-219 throttle. Nothing is throttled until
	// a quota is set.
	QuotasEnforce = "enforce"
	// QuotasUpstream: forwarded to the upstream, which stores and
	// enforces them (upstream mode only).
	QuotasUpstream = "upstream"
)

// DefaultQuotasFileName is the state file's name in the built-in
// broker's data directory.
const DefaultQuotasFileName = "tollgate-quotas.json"

// QuotaMode is policy.quotas with its default filled in: enforce with the
// built-in broker (Kafka always has quotas; none are set until an
// AlterClientQuotas), upstream with an upstream (transparent, as before).
func (c *Config) QuotaMode() string {
	switch {
	case c.Policy.Quotas != "":
		return c.Policy.Quotas
	case c.UpstreamMode():
		return QuotasUpstream
	}
	return QuotasEnforce
}

// QuotasFile is the state file enforce mode keeps quotas in ("" when
// quotas are not the gateway's).
func (c *Config) QuotasFile() string {
	switch {
	case c.QuotaMode() != QuotasEnforce:
		return ""
	case c.Policy.QuotasFile != "":
		return c.Policy.QuotasFile
	case !c.UpstreamMode():
		return filepath.Join(c.Broker.DataDir, DefaultQuotasFileName)
	}
	return ""
}

func (v *validator) quotas() {
	p := &v.c.Policy
	switch p.Quotas {
	case "", QuotasOff, QuotasEnforce:
	case QuotasUpstream:
		if !v.c.UpstreamMode() {
			v.errf("policy.quotas", p.Quotas, "upstream needs an upstream: with the built-in broker use enforce or off")
		}
	default:
		v.errf("policy.quotas", p.Quotas, "%q: want off, enforce or upstream", p.Quotas)
	}
	if v.c.QuotaMode() == QuotasEnforce && v.c.UpstreamMode() && p.QuotasFile == "" {
		v.errf("policy.quotas", p.Quotas, "enforce with an upstream needs policy.quotas_file, the file the gateway keeps the quotas in")
	}
	if p.QuotasFile != "" && v.c.QuotaMode() != QuotasEnforce {
		v.errf("policy.quotas_file", p.QuotasFile, "only used with policy.quotas: enforce")
	}
}
