package configs

import (
	"bytes"
	"fmt"
	"net"
	"strconv"

	yaml "go.yaml.in/yaml/v3"
)

// YAML returns the effective configuration as YAML, for
// `tollgate check-config --print`: every default written out, and the
// derived values (each listener's advertised host and broker port base)
// resolved as the gateway will use them. Parsing the output gives a
// configuration that behaves the same.
func (c *Config) YAML() ([]byte, error) {
	eff := *c
	eff.Listeners = make([]Listener, len(c.Listeners))
	for i, l := range c.Listeners {
		adv := l.AdvertisedHost()
		if _, p, err := splitAdvertise(l.Advertise); err == nil && p != 0 {
			adv = net.JoinHostPort(adv, strconv.Itoa(p))
		}
		l.Advertise = adv
		base := l.BrokerPortBaseOrDefault()
		l.BrokerPortBase = &base
		eff.Listeners[i] = l
	}
	var buf bytes.Buffer
	buf.WriteString("# effective tollgate configuration: defaults filled in\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&eff); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return buf.Bytes(), nil
}
