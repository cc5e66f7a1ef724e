package auth

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/tollgate-kafka/tollgate/configs"
)

// ClientTLS builds the TLS config a Kafka client side uses: the gateway
// towards its upstream, and the console commands towards any cluster.
func ClientTLS(c *configs.UpstreamTLS) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // operator's explicit choice, for testing
	}
	if m := c.Material(); m != nil {
		// What Validate read and parsed: not again.
		tc.RootCAs, tc.Certificates = m.CAs, m.Certificates
		return tc, nil
	}
	if c.CA != "" {
		pem, err := os.ReadFile(c.CA)
		if err != nil {
			return nil, fmt.Errorf("tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca: no PEM certificates in %s", c.CA)
		}
		tc.RootCAs = pool
	}
	if c.Cert != "" || c.Key != "" {
		cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("tls.cert/key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
