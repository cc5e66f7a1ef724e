package webui_test

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/gateway"
)

var screenshots = flag.Bool("screenshots", false, "write the README's screenshots to docs/")

func startGateway(t *testing.T, yaml string) *gateway.Gateway {
	t.Helper()
	cfg, err := configs.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			t.Errorf("close gateway: %v", err)
		}
	})
	return g
}

const testPolicy = `
policy:
  rules:
    - { name: no-create-from-blocked, match: { client_id: blocked, api: [CreateTopics] }, action: deny }
`

// traffic makes what the pages show: a topic with a non-default config
// and records, a group that has read some of them, a denied request, and
// a client that stays connected (returned).
func traffic(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("webui-test"), kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	retention := "3600000"
	if r, err := adm.CreateTopic(ctx, 2, -1, map[string]*string{"retention.ms": &retention}, "orders"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	for i := range 6 {
		v := `{"order":` + string(rune('0'+i)) + `,"item":"widget"}`
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := adm.CommitAllOffsets(ctx, "billing", kadm.Offsets{"orders": {0: {Topic: "orders", Partition: 0, At: 1, LeaderEpoch: -1}}}); err != nil {
		t.Fatal(err)
	}
	blocked, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("blocked"))
	if err != nil {
		t.Fatal(err)
	}
	defer blocked.Close()
	if r, _ := kadm.NewClient(blocked).CreateTopic(ctx, 1, -1, nil, "forbidden"); r.Err == nil {
		t.Fatal("the CreateTopics the policy denies succeeded")
	}
	return cl
}

// TestPagesInBrowser loads every page in headless Chromium and checks
// the rendered DOM, including the live view receiving a request made
// while it is open.
func TestPagesInBrowser(t *testing.T) {
	b := startBrowser(t)
	g := startGateway(t, `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: `+t.TempDir()+`, fsync: never }
admin: { listen: "127.0.0.1:0" }
`+testPolicy)
	addr := g.Server.Addr(0).String()
	cl := traffic(t, addr)
	base := "http://" + g.AdminAddr().String() + "/ui"

	page := b.open(t, base+"/")
	page.waitFor(t, `document.querySelector("#connections") !== null`)
	if conns := page.text(t, "#connections"); !strings.Contains(conns, "webui-test") || !strings.Contains(conns, "kgo") {
		t.Errorf("connections table lacks the client id and software:\n%s", conns)
	}
	if am := page.text(t, "table.addrmap"); !strings.Contains(am, "built-in") || !strings.Contains(am, addr) {
		t.Errorf("address map:\n%s", am)
	}
	if d := page.text(t, "#denials"); d != "1" {
		t.Errorf("denials %q, want 1", d)
	}
	if req := page.text(t, "#requests"); !strings.Contains(req, "Produce") {
		t.Errorf("request rates:\n%s", req)
	}
	shot(t, page, "console-overview.png")

	page.navigate(t, base+"/topics")
	if tt := page.text(t, "#topics"); !strings.Contains(tt, "orders\t2\t1\t6") {
		t.Errorf("topics table:\n%q", tt)
	}
	page.navigate(t, base+"/topics/orders")
	if nd := page.text(t, "#configs tr.nondefault"); !strings.Contains(nd, "retention.ms\t3600000") {
		t.Errorf("non-default config row: %q", nd)
	}
	shot(t, page, "console-topic.png")
	if parts := page.text(t, "#partitions"); !strings.Contains(parts, "HIGH-WATERMARK") || !strings.Contains(parts, "0\t0\t0\t0\t0\t0\t3") {
		t.Errorf("partitions table:\n%q", parts)
	}
	page.navigate(t, base+"/topics/orders/messages?partition=1&from=-2&render=json")
	if msgs := page.text(t, "#messages"); !strings.Contains(msgs, `"item": "widget"`) || strings.Count(msgs, "widget") != 2 {
		t.Errorf("messages (last 2 of partition 1 as JSON):\n%s", msgs)
	}
	page.navigate(t, base+"/topics/orders/messages?render=hex&limit=1")
	if msgs := page.text(t, "#messages"); !strings.Contains(msgs, "7b 22 6f 72") {
		t.Errorf("hex view:\n%s", msgs)
	}

	page.navigate(t, base+"/groups")
	if gs := page.text(t, "#groups"); !strings.Contains(gs, "billing\tclassic\tEmpty\t0\t5") {
		t.Errorf("groups table:\n%q", gs)
	}
	page.navigate(t, base+"/groups/billing")
	if lag := page.text(t, "#lag"); !strings.Contains(lag, "orders\t0\t1\t0\t3\t2") {
		t.Errorf("lag table:\n%q", lag)
	}
	if n := page.eval(t, `document.querySelectorAll("#lag svg.spark").length`); n != "2" {
		t.Errorf("%s sparklines, want one per partition", n)
	}
	shot(t, page, "console-group.png")

	page.navigate(t, base+"/policy")
	if rules := page.text(t, "#rules"); !strings.Contains(rules, "no-create-from-blocked\tdeny") || !strings.Contains(rules, "client_id: {exact: [blocked]}") {
		t.Errorf("rules table:\n%q", rules)
	}
	if hits := page.text(t, "#rules td.hits"); hits != "1" {
		t.Errorf("hits %q, want 1", hits)
	}

	page.navigate(t, base+"/live?api_not=ApiVersions,Metadata")
	page.waitFor(t, `document.getElementById("live-status").textContent === "live"`)
	probe, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("live-probe"), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if err := probe.ProduceSync(context.Background(), kgo.StringRecord("seen live")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	page.waitFor(t, `[...document.querySelectorAll("#live tbody tr")].some(r => r.innerText.includes("live-probe") && r.innerText.includes("Produce v"))`)
	if strings.Contains(page.text(t, "#live tbody"), "Metadata v") {
		t.Error("the api_not filter let Metadata through")
	}
	shot(t, page, "console-live.png")
	_ = cl
}

// shot writes a screenshot to docs/ with -screenshots.
func shot(t *testing.T, tb *tab, name string) {
	if *screenshots {
		tb.screenshot(t, filepath.Join("..", "docs", name))
	}
}

// TestJSON: every page answers JSON for Accept: application/json, through
// a gateway in front of kfake (upstream mode: the console reads the
// upstream directly).
func TestJSON(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		return net.Listen(network, "127.0.0.2:0")
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g := startGateway(t, `
listeners: [{ listen: "127.0.0.1:0", broker_port_base: 0 }]
upstream: { bootstrap: [`+strings.Join(c.ListenAddrs(), ",")+`] }
admin: { listen: "127.0.0.1:0" }
`+testPolicy)
	traffic(t, g.Server.Addr(0).String())
	base := "http://" + g.AdminAddr().String() + "/ui"
	var ov struct {
		Mode      string
		Listeners []struct {
			Brokers []struct {
				Node                 int32
				Upstream, Advertised string
			}
		}
		Connections []struct {
			ClientID string `json:"client_id"`
		}
		Denials float64
	}
	getJSON(t, base+"/", &ov)
	if ov.Mode != "upstream" || len(ov.Listeners) != 1 || len(ov.Listeners[0].Brokers) != 3 || ov.Denials != 1 {
		t.Errorf("overview: %+v", ov)
	}
	for _, br := range ov.Listeners[0].Brokers {
		if !strings.HasPrefix(br.Upstream, "127.0.0.2:") || !strings.HasPrefix(br.Advertised, "127.0.0.1:") {
			t.Errorf("address map row %+v: want upstream 127.0.0.2, advertised 127.0.0.1", br)
		}
	}
	var topic struct {
		Name       string
		Partitions []struct {
			HighWatermark int64 `json:"high_watermark"`
		}
	}
	getJSON(t, base+"/topics/orders", &topic)
	if topic.Name != "orders" || len(topic.Partitions) != 2 || topic.Partitions[0].HighWatermark != 3 {
		t.Errorf("topic: %+v", topic)
	}
	var group struct {
		TotalLag int64              `json:"total_lag"`
		History  map[string][]int64 `json:"lag_history"`
	}
	getJSON(t, base+"/groups/billing", &group)
	if group.TotalLag != 5 || len(group.History["orders/0"]) == 0 {
		t.Errorf("group: %+v", group)
	}
	var msgs struct{ Messages []struct{ Value string } }
	getJSON(t, base+"/topics/orders/messages?partition=0&limit=2", &msgs)
	if len(msgs.Messages) != 2 || !strings.Contains(msgs.Messages[0].Value, "widget") {
		t.Errorf("messages: %+v", msgs)
	}
	for _, p := range []string{"/topics", "/groups", "/policy", "/live"} {
		var v any
		getJSON(t, base+p, &v)
	}
	// Bad input is a 400 with a JSON error, not a broken page.
	resp := get(t, base+"/topics/orders/messages?render=pdf", "application/json")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("render=pdf: %s", resp.Status)
	}
	// Read-only by default.
	post, err := http.Post(base+"/topics", "application/x-www-form-urlencoded", strings.NewReader("name=x&partitions=1"))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusForbidden {
		t.Errorf("create topic on a read-only console: %s", post.Status)
	}
}

func get(t *testing.T, url, accept string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp := get(t, url, "application/json")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s %s: %s", url, resp.Status, resp.Header.Get("Content-Type"), body)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

// TestActionsAndAuth: with admin.auth the console (and /metrics, /tap)
// needs the token or the basic credentials, /healthz does not; with
// admin.ui.actions a topic can be created from the console.
func TestActionsAndAuth(t *testing.T) {
	dir := t.TempDir()
	token, pass := filepath.Join(dir, "token"), filepath.Join(dir, "pass")
	os.WriteFile(token, []byte("s3cret-token\n"), 0o600)
	os.WriteFile(pass, []byte("hunter2\n"), 0o600)
	g := startGateway(t, `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: `+dir+`/data, fsync: never }
admin:
  listen: "127.0.0.1:0"
  auth: { token_file: `+token+`, username: ops, password_file: `+pass+` }
  ui: { enabled: true, actions: true }
`)
	base := "http://" + g.AdminAddr().String()
	for _, p := range []string{"/ui/", "/metrics", "/tap"} {
		if r := get(t, base+p, ""); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without credentials: %s", p, r.Status)
		}
	}
	if r := get(t, base+"/healthz", ""); r.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %s", r.Status)
	}
	do := func(req *http.Request) *http.Response {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/ui/", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	if r := do(req); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %s", r.Status)
	}
	req.Header.Set("Authorization", "Bearer s3cret-token")
	if r := do(req); r.StatusCode != http.StatusOK {
		t.Errorf("token: %s", r.Status)
	}
	form := strings.NewReader("name=made-in-ui&partitions=3")
	req, _ = http.NewRequest(http.MethodPost, base+"/ui/topics", form)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.SetBasicAuth("ops", "hunter2")
	http.DefaultClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	defer func() { http.DefaultClient.CheckRedirect = nil }()
	if r := do(req); r.StatusCode != http.StatusSeeOther {
		t.Errorf("create topic: %s", r.Status)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.Server.Addr(0).String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tds, err := adm.ListTopics(context.Background(), "made-in-ui")
	if err != nil || len(tds["made-in-ui"].Partitions) != 3 {
		t.Errorf("topic made in the console: %v %v", tds, err)
	}

	// Reset a group's offsets from the console.
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "made-in-ui", Value: []byte("a")}, &kgo.Record{Topic: "made-in-ui", Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tp := kadm.Offsets{}
	tp.Add(kadm.Offset{Topic: "made-in-ui", Partition: 0, At: 0, LeaderEpoch: -1})
	ends, _ := adm.ListEndOffsets(ctx, "made-in-ui")
	ends.Each(func(o kadm.ListedOffset) {
		tp.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})
	if err := adm.CommitAllOffsets(ctx, "resettable", tp); err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest(http.MethodPost, base+"/ui/groups/resettable/seek", strings.NewReader("to=start"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer s3cret-token")
	req.Header.Set("Referer", base+"/ui/groups/resettable") // no Origin: the Referer stands in
	if r := do(req); r.StatusCode != http.StatusSeeOther {
		t.Errorf("seek: %s", r.Status)
	}
	fetched, err := adm.FetchOffsets(ctx, "resettable")
	if err != nil || len(fetched["made-in-ui"]) != 3 {
		t.Fatalf("offsets after the reset: %v %v", fetched, err)
	}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.At != 0 {
			t.Errorf("%s[%d] committed %d after the reset to start", o.Topic, o.Partition, o.At)
		}
	})
	req, _ = http.NewRequest(http.MethodPost, base+"/ui/groups/resettable/seek", strings.NewReader("to=start"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer s3cret-token")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", base)
	if r := do(req); r.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site seek: %s", r.Status)
	}
	refusedActions(t, base, do)

	// Every refusal is counted: 4 without or with wrong credentials, 6
	// actions (1 cross-site, 5 without same-origin proof), 8 foreign Hosts.
	req, _ = http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer s3cret-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`tollgate_admin_refused_total{reason="auth"} 4`, `tollgate_admin_refused_total{reason="action"} 6`,
		`tollgate_admin_refused_total{reason="host"} 8`} {
		if !strings.Contains(string(text), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// refusedActions: an action POST with valid credentials but no proof
// that it comes from the console's own page (no Sec-Fetch-Site, as older
// browsers and non-browser agents send) is refused and changes nothing;
// so is any request naming a foreign Host (DNS rebinding).
func refusedActions(t *testing.T, base string, do func(*http.Request) *http.Response) {
	t.Helper()
	cases := []struct {
		name, origin, referer string
	}{
		{"no Origin or Referer", "", ""},
		{"foreign Origin", "http://evil.example", ""},
		{"opaque Origin", "null", base + "/ui/topics"},
		{"foreign Referer", "", "http://evil.example/page"},
		{"https Origin for http", strings.Replace(base, "http://", "https://", 1), ""},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(http.MethodPost, base+"/ui/topics", strings.NewReader("name=csrf-made&partitions=1"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer s3cret-token")
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.referer != "" {
			req.Header.Set("Referer", c.referer)
		}
		if r := do(req); r.StatusCode != http.StatusForbidden {
			t.Errorf("create topic with %s: %s, want 403", c.name, r.Status)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/ui/topics/csrf-made", nil)
	req.Header.Set("Authorization", "Bearer s3cret-token")
	if r := do(req); r.StatusCode != http.StatusNotFound {
		t.Errorf("a refused action created its topic: GET it: %s", r.Status)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	for _, p := range []string{"/ui/", "/metrics", "/tap", "/ui/topics"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, _ := http.NewRequest(method, base+p, strings.NewReader("name=rebound&partitions=1"))
			req.Host = "evil.example:" + port
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", "Bearer s3cret-token")
			req.Header.Set("Origin", "http://evil.example:"+port)
			if r := do(req); r.StatusCode != http.StatusMisdirectedRequest {
				t.Errorf("%s %s with Host evil.example: %s, want 421", method, p, r.Status)
			}
		}
	}
	for _, host := range []string{"localhost:" + port, "[::1]:" + port, "LOCALHOST."} {
		req, _ := http.NewRequest(http.MethodGet, base+"/ui/", nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer s3cret-token")
		if r := do(req); r.StatusCode != http.StatusOK {
			t.Errorf("GET /ui/ with Host %s: %s, want 200", host, r.Status)
		}
	}
}

// TestBadRequests: malformed parameters are a 400 and unknown topics and
// groups a 404, each with a JSON error (and an error line in HTML), and
// an oversized limit is clamped rather than honoured.
func TestBadRequests(t *testing.T) {
	g := startGateway(t, `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: `+t.TempDir()+`, fsync: never }
admin: { listen: "127.0.0.1:0" }
`+testPolicy)
	traffic(t, g.Server.Addr(0).String())
	base := "http://" + g.AdminAddr().String() + "/ui"
	cases := []struct {
		path   string
		status int
		want   string
	}{
		{"/topics/orders/messages?partition=-1", http.StatusBadRequest, "partition"},
		{"/topics/orders/messages?partition=x", http.StatusBadRequest, "partition"},
		{"/topics/orders/messages?limit=0", http.StatusBadRequest, "limit"},
		{"/topics/orders/messages?from=sideways", http.StatusBadRequest, "offset"},
		{"/topics/orders/messages?render=pdf", http.StatusBadRequest, "render"},
		{"/topics/orders/messages?partition=9", http.StatusNotFound, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"/topics/nope", http.StatusNotFound, "UNKNOWN_TOPIC_OR_PARTITION"},
		{"/groups/nobody", http.StatusNotFound, "GROUP_ID_NOT_FOUND"},
		{"/live?api=NotAnAPI", http.StatusBadRequest, "NotAnAPI"},
	}
	for _, c := range cases {
		for _, accept := range []string{"application/json", "text/html"} {
			resp := get(t, base+c.path, accept)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) {
				t.Errorf("%s (%s): %s %.200s; want %d and %q", c.path, accept, resp.Status, body, c.status, c.want)
			}
			if accept == "text/html" && !strings.Contains(string(body), `class="error"`) {
				t.Errorf("%s: the HTML page shows no error line", c.path)
			}
		}
	}
	var m struct {
		Limit    int
		Messages []any
	}
	getJSON(t, base+"/topics/orders/messages?limit=100000", &m)
	if m.Limit != 200 || len(m.Messages) != 3 {
		t.Errorf("limit=100000: limit %d, %d messages; want clamped to 200, the 3 there", m.Limit, len(m.Messages))
	}
}
