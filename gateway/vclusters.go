package gateway

import (
	"fmt"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/policy"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// virtualClusters provisions virtual_clusters: the match as the proxy
// applies it and each cluster's own policy, compiled once.
func virtualClusters(cfg *configs.Config) ([]proxy.VirtualCluster, error) {
	var out []proxy.VirtualCluster
	for i := range cfg.VirtualClusters {
		c := &cfg.VirtualClusters[i]
		vc := proxy.VirtualCluster{Name: c.Name, Prefix: c.Prefix, Listener: c.Match.Listener, SNI: c.Match.SNI, Principal: c.Match.Principal}
		addr, ok, err := c.Match.AddressPrefix()
		if err != nil {
			return nil, fmt.Errorf("virtual cluster %s: %w", c.Name, err)
		}
		vc.Address, vc.HasAddress = addr, ok
		if c.Policy != nil {
			eng, _, err := policy.Compile(*c.Policy)
			if err != nil {
				return nil, fmt.Errorf("virtual cluster %s policy: %w", c.Name, err)
			}
			vc.Policy = eng
		}
		out = append(out, vc)
	}
	return out, nil
}
