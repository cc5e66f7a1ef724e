package gateway

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestConsoleThroughEgressProxy: with upstream.proxy (and upstream TLS),
// the web console's own Kafka client reaches the upstream through the
// proxy too, never directly.
func TestConsoleThroughEgressProxy(t *testing.T) {
	upTLS, cert := upstreamCA(t)
	p := startTinyproxy(t, "", "")
	c, accepted := startEgressUpstream(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	g := startFrom(t, fmt.Sprintf(`
listeners: [{ listen: "127.0.0.1:0", broker_port_base: 0 }]
upstream:
  bootstrap: [%s]
  proxy: %q
  tls: { ca: %s }
admin: { listen: "127.0.0.1:0" }
`, strings.Join(c.ListenAddrs(), ", "), p.url, upTLS))
	req, _ := http.NewRequest(http.MethodGet, "http://"+g.AdminAddr().String()+"/ui/topics/egress", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var topic struct {
		Name       string
		Partitions []struct{ Leader int32 }
	}
	if err := json.NewDecoder(resp.Body).Decode(&topic); err != nil || resp.StatusCode != http.StatusOK || len(topic.Partitions) != 3 {
		t.Fatalf("console topic page: %s %+v %v", resp.Status, topic, err)
	}
	accepted.assertAllFrom(t, egressProxyOut)
}
