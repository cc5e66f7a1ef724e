package gateway

import (
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTunnelThroughHTTPProxy is the README's end-to-end tunnel: clients
// on this side talk to a local tollgate, whose upstream is a remote
// tollgate's one TLS port (brokers: single-port), reached through an
// HTTP CONNECT proxy (Debian's tinyproxy); the remote tollgate routes to
// a 3-broker kfake cluster whose partitions lead on all three brokers.
// The proxy's log shows tunnels to the remote tollgate's port only.
func TestTunnelThroughHTTPProxy(t *testing.T) {
	if _, err := exec.LookPath("tinyproxy"); err != nil {
		t.Skip("tinyproxy not installed (make deps installs it)")
	}
	c, _ := startEgressUpstream(t)
	dir := t.TempDir()
	ca := newFileCA(t)
	certFile, keyFile := ca.write(t, dir, "remote", "kafka.test")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	remote := startFrom(t, fmt.Sprintf(`
listeners:
  - listen: "127.0.0.1:0"
    brokers: single-port
    tls: { cert: %s, key: %s }
upstream: { bootstrap: [%s] }
admin: { listen: "off" }
`, certFile, keyFile, strings.Join(c.ListenAddrs(), ", ")))
	remoteAddr := remote.Server.Addr(0).String()
	p := startTinyproxy(t, "", "")
	local := startFrom(t, fmt.Sprintf(`
listeners: [{ listen: "127.0.0.1:0", broker_port_base: 0 }]
upstream:
  bootstrap: [%s]
  proxy: %q
  tls: { ca: %s, server_name: kafka.test }
admin: { listen: "off" }
`, remoteAddr, p.url, caFile))
	produceConsume(t, local)
	logs := p.logs()
	if !tinyproxyTunnel(logs, remoteAddr) {
		t.Errorf("the proxy's log shows no tunnel to the remote tollgate %s:\n%s", remoteAddr, logs)
	}
	for _, addr := range c.ListenAddrs() {
		if tinyproxyTunnel(logs, addr) {
			t.Errorf("the local tollgate tunnelled to upstream broker %s directly: single-port should hide it", addr)
		}
	}
}
