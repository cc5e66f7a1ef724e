package webui_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsoleScopedToVirtualCluster: the web console scoped to one
// virtual cluster (issue 21) by its principal. The console's sessions
// carry admin.ui.principal, and a virtual cluster matching that
// principal takes them in, as it would any client's: the topic pages
// list only the cluster's topics, unprefixed, and another tenant's
// topic is not found; the group pages likewise.
func TestConsoleScopedToVirtualCluster(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "team-a.orders", "team-b.secret", "outside"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	direct, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	adm := kadm.NewClient(direct)
	for group, topic := range map[string]string{"team-a.a-group": "team-a.orders", "team-b.b-group": "team-b.secret"} {
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0})
		if _, err := adm.CommitOffsets(ctx, group, offs); err != nil {
			t.Fatal(err)
		}
	}
	g := startGateway(t, `
listeners: [{ listen: "127.0.0.1:0", broker_port_base: 0 }]
upstream: { bootstrap: [`+c.ListenAddrs()[0]+`] }
admin: { listen: "127.0.0.1:0", ui: { principal: "User:team-a-console" } }
virtual_clusters:
  - { name: team-a, match: { principal: "User:team-a-console" }, prefix: "team-a." }
`)
	base := "http://" + g.AdminAddr().String()
	page := func(path string) string {
		resp := get(t, base+path, "")
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d", path, resp.StatusCode)
		}
		return string(body)
	}
	// The group pages first, in both orders: a group page read before
	// any topic page asks OffsetFetch v10 for topic ids no tenant
	// session has read a Metadata answer for (which once answered 502
	// "missing topic name and zero topic ID", from kadm's lag path).
	pages := []struct{ path, want string }{
		{"/ui/groups/a-group", "a-group"},
		{"/ui/groups", "a-group"},
		{"/ui/topics", "orders"},
		{"/ui/topics/orders", "orders"},
		{"/ui/groups/a-group", "a-group"},
	}
	for _, pg := range pages {
		path, want := pg.path, pg.want
		body := page(path)
		if !strings.Contains(body, want) {
			t.Errorf("%s lacks %q:\n%.1500s", path, want, body)
		}
		for _, leak := range []string{"team-a.", "team-b.", "secret", "b-group", "outside"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s shows %q:\n%.1500s", path, leak, body)
			}
		}
	}
	if body := page("/ui/topics/secret"); strings.Contains(body, `id="partitions"`) {
		t.Errorf("another tenant's topic has a page:\n%.1500s", body)
	}
}
