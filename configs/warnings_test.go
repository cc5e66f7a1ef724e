package configs

import (
	"strings"
	"testing"
)

func TestDefaultsRefuseNoClient(t *testing.T) {
	c := Default()
	if c.Limits.MaxConnectionsPerAddress != 0 || c.Limits.ConnectionRatePerAddress != 0 {
		t.Fatalf("per-address limits on by default: cap %d rate %d", c.Limits.MaxConnectionsPerAddress, c.Limits.ConnectionRatePerAddress)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Fatalf("the default configuration warns: %q", w)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// The default admin port must not be a broker port of the default
// listener, for any node id Validate assumes.
func TestDefaultAdminOutsideBrokerRange(t *testing.T) {
	c := Default()
	c.Upstream = NewUpstream("kafka-1:9092")
	if err := c.Validate(); err != nil {
		t.Fatalf("default configuration with an upstream: %v", err)
	}
}

func TestWarnings(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string // substrings, one warning each
	}{
		{"cap below one client", "limits: {max_connections_per_address: 3}\n", []string{"limits.max_connections_per_address: 3 is below what one ordinary client opens (6"}},
		{"cap counts bootstrap brokers", "upstream: {bootstrap: [a:9092, b:9092, c:9092]}\nlimits: {max_connections_per_address: 10}\n", []string{"(16: up to 5 connections per broker"}},
		{"cap large enough", "limits: {max_connections_per_address: 200}\n", nil},
		{"rate below one client", "limits: {connection_rate_per_address: 2}\n", []string{"limits.connection_rate_per_address: 2/s"}},
		{"both", "limits: {max_connections_per_address: 1, connection_rate_per_address: 1}\n", []string{"max_connections_per_address", "connection_rate_per_address"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), "w.yaml")
			if err != nil {
				t.Fatal(err)
			}
			w := c.Warnings()
			if len(w) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", w, len(tc.want))
			}
			for i := range w {
				if !strings.Contains(w[i], tc.want[i]) {
					t.Errorf("warning %q does not contain %q", w[i], tc.want[i])
				}
			}
		})
	}
}
