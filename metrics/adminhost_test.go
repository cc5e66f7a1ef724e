package metrics

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAdminHostCheck: the admin server answers requests naming it by an
// address, a loopback name, its listen host or an admin.allowed_hosts
// name, and refuses any other Host with 421 (DNS rebinding), except the
// probes /healthz and /readyz.
func TestAdminHostCheck(t *testing.T) {
	a, err := NewAdmin("127.0.0.1:0", prometheus.NewRegistry(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.AllowHosts([]string{"tollgate.example.com", "Admin.Internal."})
	a.hosts.listen = "gw.example.net" // as if listening on gw.example.net:PORT
	a.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a.Shutdown(ctx)
	})
	base := "http://" + a.Addr().String()
	_, port, _ := net.SplitHostPort(a.Addr().String())
	cases := []struct {
		host, path string
		want       int
	}{
		{"127.0.0.1:" + port, "/metrics", http.StatusOK},
		{"[::1]:" + port, "/metrics", http.StatusOK},
		{"10.1.2.3:" + port, "/metrics", http.StatusOK}, // an address cannot be rebound
		{"localhost:" + port, "/metrics", http.StatusOK},
		{"app.localhost", "/metrics", http.StatusOK},
		{"gw.example.net:" + port, "/metrics", http.StatusOK},
		{"TOLLGATE.example.com:" + port, "/metrics", http.StatusOK},
		{"admin.internal", "/metrics", http.StatusOK},
		{"admin.internal.:" + port, "/", http.StatusOK},
		{"evil.example:" + port, "/metrics", http.StatusMisdirectedRequest},
		{"evil.example", "/", http.StatusMisdirectedRequest},
		{"localhost.evil.example", "/tap", http.StatusMisdirectedRequest},
		{"tollgate.example.com.evil.example", "/metrics", http.StatusMisdirectedRequest},
		{"127.0.0.1.nip.io:" + port, "/metrics", http.StatusMisdirectedRequest},
		{"evil.example", "/healthz", http.StatusOK},
		{"evil.example", "/readyz", http.StatusOK},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(http.MethodGet, base+c.path, nil)
		req.Host = c.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s with Host %q: %s, want %d", c.path, c.host, resp.Status, c.want)
		}
	}
}
