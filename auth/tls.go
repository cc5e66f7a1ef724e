package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/tollgate-kafka/tollgate/configs"
)

// maxPEMBytes bounds a certificate, key or CA file.
const maxPEMBytes = 1 << 20

// ServerTLS builds a listener's TLS configuration. TLS 1.2 is the default
// minimum and TLS 1.3 is preferred whenever the client offers it (Go
// always picks the highest common version). The certificate, key and
// client CA are re-read when any of their files changes (checked at most
// once a second, at a handshake); a broken replacement keeps the previous
// files in service and logs a warning. With a client CA, every client must
// present a certificate it signed (tls.RequireAndVerifyClientCert).
func ServerTLS(cfg *configs.ListenerTLS) (*tls.Config, error) {
	return serverTLS(cfg, slog.Default())
}

func serverTLS(cfg *configs.ListenerTLS, log *slog.Logger) (*tls.Config, error) {
	// Validate parsed the files and settings already (configs.TLSMaterial);
	// a section it has not checked is parsed here.
	parsed := cfg.Material()
	minVer, suites, err := versionAndSuites(cfg, parsed)
	if err != nil {
		return nil, err
	}
	if cfg.Cert == "" || cfg.Key == "" {
		return nil, errors.New("listener tls: cert and key are required")
	}
	build := func(m *configs.TLSMaterial) *tls.Config {
		c := &tls.Config{MinVersion: minVer, CipherSuites: suites, Certificates: m.Certificates}
		if m.CAs != nil {
			c.ClientCAs = m.CAs
			c.ClientAuth = tls.RequireAndVerifyClientCert
		}
		return c
	}
	load := func() (*tls.Config, error) {
		m, err := readListenerFiles(cfg)
		if err != nil {
			return nil, err
		}
		return build(m), nil
	}
	var first func() (*tls.Config, error)
	var seen map[string]os.FileInfo
	if parsed != nil {
		first = func() (*tls.Config, error) { return build(parsed), nil }
		seen = parsed.Files
	}
	paths := []string{cfg.Cert, cfg.Key}
	for _, extra := range cfg.Certificates {
		paths = append(paths, extra.Cert, extra.Key)
	}
	if cfg.ClientCA != "" {
		paths = append(paths, cfg.ClientCA)
	}
	w, err := newWatchedFrom("listener tls "+cfg.Cert, log, first, seen, load, paths...)
	if err != nil {
		return nil, err
	}
	// The outer config is what the listener holds; each handshake gets the
	// configuration built from the files' current version. A handshake
	// started before a reload finishes with the old one.
	return &tls.Config{
		MinVersion:   minVer,
		CipherSuites: suites,
		ClientAuth:   w.get().ClientAuth,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return w.get(), nil
		},
	}, nil
}

// versionAndSuites are the section's min_version and ciphers: parsed by
// Validate (m), or parsed here when m is nil.
func versionAndSuites(cfg *configs.ListenerTLS, m *configs.TLSMaterial) (uint16, []uint16, error) {
	if m != nil {
		return m.MinVersion, m.CipherSuites, nil
	}
	minVer, err := configs.TLSVersion(cfg.MinVersion)
	if err != nil {
		return 0, nil, fmt.Errorf("listener tls min_version: %w", err)
	}
	suites, err := configs.CipherSuiteIDs(cfg.Ciphers)
	if err != nil {
		return 0, nil, fmt.Errorf("listener tls ciphers: %w", err)
	}
	return minVer, suites, nil
}

// readListenerFiles reads and parses a listener's key pairs and client
// CA: at a reload (a file changed), or for a section Validate has not
// checked.
func readListenerFiles(cfg *configs.ListenerTLS) (*configs.TLSMaterial, error) {
	m := &configs.TLSMaterial{}
	pair, err := loadPair(cfg.Cert, cfg.Key)
	if err != nil {
		return nil, err
	}
	m.Certificates = []tls.Certificate{pair}
	for _, extra := range cfg.Certificates {
		p, err := loadPair(extra.Cert, extra.Key)
		if err != nil {
			return nil, err
		}
		// crypto/tls serves the first certificate that matches the
		// client's server name, else the first one (cfg.Cert).
		m.Certificates = append(m.Certificates, p)
	}
	if cfg.ClientCA != "" {
		caPEM, err := readSmallFile(cfg.ClientCA, maxPEMBytes)
		if err != nil {
			return nil, fmt.Errorf("read client_ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("client_ca %s holds no PEM certificate", cfg.ClientCA)
		}
		m.CAs = pool
	}
	return m, nil
}

// loadPair reads one certificate and key.
func loadPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := readSmallFile(certFile, maxPEMBytes)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("read cert: %w", err)
	}
	keyPEM, err := readSmallFile(keyFile, maxPEMBytes)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("read key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load key pair %s and %s: %w", certFile, keyFile, err)
	}
	return pair, nil
}
