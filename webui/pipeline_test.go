package webui_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/gateway"
)

// lockedBuffer is a log destination several goroutines write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startLoggingGateway is startGateway with the log kept.
func startLoggingGateway(t *testing.T, yaml string) (*gateway.Gateway, *lockedBuffer) {
	t.Helper()
	cfg, err := configs.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	g, err := gateway.New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
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
	return g, logs
}

// sniCert writes a certificate for kafka.test and *.kafka.test.
func sniCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kafka.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"kafka.test", "*.kafka.test"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "sni.crt"), filepath.Join(dir, "sni.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

// consoleBackend is one gateway setup the console must work through:
// its listeners and backend YAML, and a client of the backend itself.
type consoleBackend struct {
	name   string
	config func(t *testing.T, dir string) (yaml string, direct []kgo.Opt)
}

func kfakeUpstream(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// consoleBackends: the built-in broker, and a kfake upstream of three
// brokers behind each kind of client listener (the console's in-process
// listener has its own address map, whatever the client listeners are).
var consoleBackends = []consoleBackend{
	{"built-in", func(t *testing.T, dir string) (string, []kgo.Opt) {
		return `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: ` + dir + `/data, fsync: never }
`, nil // the direct client is the gateway's listener: the broker has no other door
	}},
	{"kfake port-per-broker", func(t *testing.T, dir string) (string, []kgo.Opt) {
		up := kfakeUpstream(t)
		return `
listeners: [{ listen: "127.0.0.1:0", broker_port_base: 0 }]
upstream: { bootstrap: [` + strings.Join(up, ",") + `] }
`, []kgo.Opt{kgo.SeedBrokers(up...)}
	}},
	{"kfake single-port", func(t *testing.T, dir string) (string, []kgo.Opt) {
		up := kfakeUpstream(t)
		return `
listeners: [{ listen: "127.0.0.1:0", brokers: single-port }]
upstream: { bootstrap: [` + strings.Join(up, ",") + `] }
`, []kgo.Opt{kgo.SeedBrokers(up...)}
	}},
	{"kfake sni", func(t *testing.T, dir string) (string, []kgo.Opt) {
		up := kfakeUpstream(t)
		cert, key := sniCert(t, dir)
		return `
listeners:
  - listen: "127.0.0.1:0"
    tls: { cert: ` + cert + `, key: ` + key + ` }
    brokers: sni
    sni: { bootstrap_host: kafka.test, broker_host: "b{node}.kafka.test" }
upstream: { bootstrap: [` + strings.Join(up, ",") + `] }
`, []kgo.Opt{kgo.SeedBrokers(up...)}
	}},
}

// consolePolicy denies the console's principal, on its listener, the
// creation of topics named denied-*; everything else is allowed.
const consolePolicy = `
policy:
  rules:
    - name: console-no-denied
      match: { listener: admin, principal: ops-console, api: [CreateTopics], topic: { prefix: [denied-] } }
      action: deny
`

// TestConsoleActionsThroughPipeline: the console's actions are judged by
// the policy, recorded by the audit trail under listener "admin" and the
// configured principal, counted in metrics and logged, in front of either
// backend (issue 19, item 1). A denied create-topic shows the broker's
// error with its ErrorMessage on the page and creates nothing upstream;
// an allowed one is created and audited too. The browser submits the
// form as an operator would; plain HTTP covers the status and the JSON.
func TestConsoleActionsThroughPipeline(t *testing.T) {
	for _, be := range consoleBackends {
		t.Run(be.name, func(t *testing.T) {
			dir := t.TempDir()
			backend, direct := be.config(t, dir)
			auditFile := filepath.Join(dir, "audit.log")
			g, logs := startLoggingGateway(t, backend+`
admin: { listen: "127.0.0.1:0", ui: { actions: true, principal: "User:ops-console" } }
audit: { level: full, sink: { file: `+auditFile+` } }
`+consolePolicy)
			if direct == nil {
				direct = []kgo.Opt{kgo.SeedBrokers(g.Server.Addr(0).String())}
			}
			base := "http://" + g.AdminAddr().String()
			exists := topicExists(t, direct)

			// Plain HTTP: the denied action is a 403 with the broker's error.
			status, body := postForm(t, base+"/ui/topics", base, url.Values{"name": {"denied-http"}, "partitions": {"1"}})
			if status != http.StatusForbidden || !strings.Contains(body, `class="error"`) ||
				!strings.Contains(body, "TOPIC_AUTHORIZATION_FAILED") || !strings.Contains(body, "Denied by the gateway policy.") {
				t.Errorf("denied create topic: %d, want 403 with the broker's error and message; page:\n%.2000s", status, body)
			}
			if exists("denied-http") {
				t.Error("the denied create topic made the topic in the backend")
			}

			// In the browser: submit the form, read the error on the page.
			b := startBrowser(t)
			page := b.open(t, base+"/ui/topics")
			submit := func(name string) {
				page.eval(t, `(() => { const f = document.querySelector("form.action");
					f.querySelector("[name=name]").value = `+jsString(name)+`; f.querySelector("[name=partitions]").value = "2";
					f.submit(); return true })()`)
			}
			submit("denied-browser")
			page.waitFor(t, `document.querySelector(".error") !== null && location.pathname === "/ui/topics"`)
			if e := page.text(t, ".error"); !strings.Contains(e, "create topic denied-browser") ||
				!strings.Contains(e, "TOPIC_AUTHORIZATION_FAILED") || !strings.Contains(e, "Denied by the gateway policy.") {
				t.Errorf("the page shows %q, want the broker's error and message", e)
			}
			if exists("denied-browser") {
				t.Error("the denied create topic from the browser made the topic in the backend")
			}
			submit("allowed-browser")
			page.waitFor(t, `location.pathname === "/ui/topics/allowed-browser" && document.querySelector("#partitions") !== null`)
			if !exists("allowed-browser") {
				t.Error("the allowed create topic did not make the topic")
			}

			// Audit: both decisions, on listener admin as the console's principal.
			recs := waitAudit(t, auditFile, func(recs []map[string]any) bool {
				return findAudit(recs, "denied-browser") != nil && findAudit(recs, "allowed-browser") != nil && findAudit(recs, "denied-http") != nil
			})
			for topic, want := range map[string]string{"denied-http": "denied", "denied-browser": "denied", "allowed-browser": "forwarded"} {
				rec := findAudit(recs, topic)
				if rec["listener"] != "admin" || rec["principal"] != "ops-console" || rec["decision"] != want || rec["client_id"] != "tollgate-webui" {
					t.Errorf("audit record of CreateTopics %s: %v; want listener admin, principal User:ops-console, decision %s", topic, rec, want)
				}
				if want == "denied" && rec["rule"] != "console-no-denied" {
					t.Errorf("audit record of CreateTopics %s names rule %v", topic, rec["rule"])
				}
			}

			// Metrics: the console's requests counted under its listener.
			if n := counter(t, g, "tollgate_requests_total", map[string]string{"listener": "admin", "api": "CreateTopics", "outcome": "denied"}); n != 2 {
				t.Errorf("denied console CreateTopics counted %v, want 2", n)
			}
			if n := counter(t, g, "tollgate_requests_total", map[string]string{"listener": "admin", "api": "CreateTopics", "outcome": "ok"}); n != 1 {
				t.Errorf("allowed console CreateTopics counted %v, want 1", n)
			}
			if n := counter(t, g, "tollgate_policy_denials_total", map[string]string{"rule": "console-no-denied"}); n != 2 {
				t.Errorf("policy denials of console-no-denied %v, want 2", n)
			}
			if n := counter(t, g, "tollgate_connections_total", map[string]string{"listener": "admin"}); n == 0 {
				t.Error("no console connection counted under listener admin")
			}
			// The log: the denial, as for any client (rate-limited).
			if l := logs.String(); !strings.Contains(l, `msg="request denied"`) || !strings.Contains(l, "listener=admin") || !strings.Contains(l, "rule=console-no-denied") {
				t.Errorf("no denial logged for the console's listener:\n%s", l)
			}
		})
	}
}

// TestConsoleSeekThroughPipeline: a group reset is an OffsetCommit the
// policy judges too; a deny on the console's group writes shows the
// error, commits nothing, and is audited under the console's listener.
func TestConsoleSeekThroughPipeline(t *testing.T) {
	dir := t.TempDir()
	auditFile := filepath.Join(dir, "audit.log")
	g := startGateway(t, `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: `+dir+`/data, fsync: never }
admin: { listen: "127.0.0.1:0", ui: { actions: true } }
audit: { level: full, sink: { file: `+auditFile+` } }
policy:
  rules:
    - { name: console-no-commit, match: { principal: tollgate-console, api: [OffsetCommit], group: frozen }, action: deny }
`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.Server.Addr(0).String()), kgo.DefaultProduceTopic("seekable"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("a"), kgo.StringRecord("b")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	for _, grp := range []string{"frozen", "thawed"} {
		if err := adm.CommitAllOffsets(ctx, grp, kadm.Offsets{"seekable": {0: {Topic: "seekable", Partition: 0, At: 2, LeaderEpoch: -1}}}); err != nil {
			t.Fatal(err)
		}
	}
	base := "http://" + g.AdminAddr().String()
	status, body := postForm(t, base+"/ui/groups/frozen/seek", base, url.Values{"to": {"start"}})
	if status != http.StatusForbidden || !strings.Contains(body, "GROUP_AUTHORIZATION_FAILED") {
		t.Errorf("denied seek: %d, want 403 with GROUP_AUTHORIZATION_FAILED; page:\n%.2000s", status, body)
	}
	if status, body := postForm(t, base+"/ui/groups/thawed/seek", base, url.Values{"to": {"start"}}); status != http.StatusSeeOther {
		t.Errorf("allowed seek: %d:\n%.2000s", status, body)
	}
	offs, err := adm.FetchOffsets(ctx, "frozen")
	if o, _ := offs.Lookup("seekable", 0); err != nil || o.At != 2 {
		t.Errorf("frozen after the denied seek: %+v %v, want still at 2", o, err)
	}
	offs, err = adm.FetchOffsets(ctx, "thawed")
	if o, _ := offs.Lookup("seekable", 0); err != nil || o.At != 0 {
		t.Errorf("thawed after the seek: %+v %v, want 0", o, err)
	}
	recs := waitAudit(t, auditFile, func(recs []map[string]any) bool {
		return len(commits(recs, "frozen")) > 0 && len(commits(recs, "thawed")) > 0
	})
	for grp, want := range map[string]string{"frozen": "denied", "thawed": "forwarded"} {
		for _, rec := range commits(recs, grp) {
			if rec["listener"] != "admin" || rec["principal"] != "tollgate-console" || rec["decision"] != want {
				t.Errorf("OffsetCommit of %s: %v, want listener admin, the default principal, %s", grp, rec, want)
			}
		}
	}
}

// commits are the audit records of OffsetCommits of group.
func commits(recs []map[string]any, group string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["api"] == "OffsetCommit" && r["group"] == group && r["client_id"] == "tollgate-webui" {
			out = append(out, r)
		}
	}
	return out
}

// postForm posts an action as the console's page does (same Origin) and
// returns the status and the page, not following the redirect.
func postForm(t *testing.T, target, origin string, form url.Values) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// topicExists asks the backend itself whether a topic is there (a new
// client each time: kgo answers a Metadata request for every topic from
// its cache for a while).
func topicExists(t *testing.T, opts []kgo.Opt) func(string) bool {
	return func(name string) bool {
		t.Helper()
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tds, err := kadm.NewClient(cl).ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tds.Has(name)
	}
}

// waitAudit reads the audit file until done holds for its records.
func waitAudit(t *testing.T, path string, done func([]map[string]any) bool) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		var recs []map[string]any
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var rec map[string]any
				if json.Unmarshal(sc.Bytes(), &rec) == nil {
					recs = append(recs, rec)
				}
			}
			f.Close()
		}
		if done(recs) {
			return recs
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the audit file never held the records; it has %d", len(recs))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// findAudit is the CreateTopics record naming topic.
func findAudit(recs []map[string]any, topic string) map[string]any {
	for _, r := range recs {
		if r["api"] != "CreateTopics" {
			continue
		}
		ts, _ := r["topics"].([]any)
		for _, x := range ts {
			if m, _ := x.(map[string]any); m["name"] == topic {
				return r
			}
		}
	}
	return nil
}

// counter sums a metric's series whose labels include want.
func counter(t *testing.T, g *gateway.Gateway, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := g.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

// TestOverviewOpenConnections: the overview's JSON names its count of
// open connections connections_open (it was connections_total, which
// reads like the counter tollgate_connections_total), and the count is
// the connections listed.
func TestOverviewOpenConnections(t *testing.T) {
	g := startGateway(t, `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: `+t.TempDir()+`, fsync: never }
admin: { listen: "127.0.0.1:0" }
`)
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.Server.Addr(0).String()), kgo.ClientID("holds-open"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ov map[string]any
	getJSON(t, "http://"+g.AdminAddr().String()+"/ui/", &ov)
	if _, old := ov["connections_total"]; old {
		t.Error("the overview still answers connections_total")
	}
	n, ok := ov["connections_open"].(float64)
	conns, _ := ov["connections"].([]any)
	if !ok || n < 1 || int(n) != len(conns) {
		t.Errorf("connections_open %v with %d connections listed; want the open count", ov["connections_open"], len(conns))
	}
}

// TestLiveFilterRequestsOnly: the live stream filtered by api (or topic,
// or client) sends requests only; connection events, which carry none of
// those, come only with no such filter (issue 19, item 5).
func TestLiveFilterRequestsOnly(t *testing.T) {
	g := startGateway(t, `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: `+t.TempDir()+`, fsync: never }
admin: { listen: "127.0.0.1:0" }
`)
	addr := g.Server.Addr(0).String()
	base := "http://" + g.AdminAddr().String() + "/ui/live/events?"
	for _, c := range []struct {
		query       string
		wantConnect bool
	}{
		{"api=Produce", false},
		{"topic=live-*", false},
		{"client=live-producer", false},
		{"api_not=Metadata", true},
		{"", true},
	} {
		t.Run(c.query, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+c.query, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			rd := bufio.NewReader(resp.Body)
			if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, ": tollgate live") {
				t.Fatalf("stream start %q %v", line, err) // subscribed from here on
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("live-producer"), kgo.DefaultProduceTopic("live-topic"), kgo.AllowAutoTopicCreation())
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
				t.Fatal(err)
			}
			// The client's connect event is logged before any of its
			// requests, so by its Produce the stream has sent it or never will.
			sawConnect := false
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					t.Fatalf("stream ended before the Produce: %v", err)
				}
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok {
					continue
				}
				var rec struct{ Event, API string }
				if err := json.Unmarshal([]byte(data), &rec); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				if rec.Event == "connect" {
					sawConnect = true
				}
				if rec.API == "Produce" {
					break
				}
			}
			if sawConnect != c.wantConnect {
				t.Errorf("connect events sent: %v, want %v", sawConnect, c.wantConnect)
			}
		})
	}
}
