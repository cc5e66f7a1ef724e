package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/egress"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// edgeOptions adds the network-edge settings of cfg to opts, whose
// listeners are cfg's in order: SNI routing ("brokers: sni") per listener,
// and the dialer through upstream.proxy for every upstream connection.
func edgeOptions(cfg *configs.Config, opts *proxy.Options, log *slog.Logger) error {
	for i := range cfg.Listeners {
		l := &cfg.Listeners[i]
		if l.Brokers == configs.BrokersSNI && l.SNI != nil && i < len(opts.Listeners) {
			opts.Listeners[i].SNI = &proxy.SNIOptions{BootstrapHost: l.SNI.BootstrapHost, BrokerHost: l.SNI.BrokerHost,
				NoSNIBootstrap: l.SNI.BootstrapOnNoSNI()}
		}
		if l.Brokers == configs.BrokersSinglePort && i < len(opts.Listeners) {
			opts.Listeners[i].SinglePort = &proxy.SinglePortOptions{VirtualNode: l.VirtualNodeID(), NoFetchAhead: !l.FetchesAhead()}
		}
	}
	if u := cfg.Upstream; cfg.UpstreamMode() && u.Proxy != "" {
		d, err := egressDialer(u)
		if err != nil {
			return err
		}
		opts.Dial = d.DialContext
		log.Info("upstream through a proxy", "proxy", d.String(), "no_proxy", u.NoProxy)
	}
	return nil
}

// egressDialer builds the dialer through upstream.proxy.
func egressDialer(u *configs.Upstream) (*egress.Dialer, error) {
	pu, err := u.ProxyURL() // parsed by Validate
	if err != nil {
		return nil, fmt.Errorf("upstream.proxy: %w", err)
	}
	cfg := egress.Config{URL: pu, NoProxy: u.NoProxy, Timeout: u.DialTimeout.D()}
	if u.ProxyCA != "" {
		pem, err := os.ReadFile(u.ProxyCA)
		if err != nil {
			return nil, fmt.Errorf("upstream.proxy_ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("upstream.proxy_ca: no PEM certificates in %s", u.ProxyCA)
		}
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	d, err := egress.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("upstream.proxy: %w", err)
	}
	return d, nil
}
