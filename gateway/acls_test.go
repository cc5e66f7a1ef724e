package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// aclWorld is a gateway with a SASL PLAIN listener (users admin, alice,
// bob), policy.acls enforce, super user admin, an audit file, and either
// backend; restart opens a new gateway on the same data directory.
type aclWorld struct {
	t        *testing.T
	yaml     string
	audit    string
	upstream *kfake.Cluster
	g        *Gateway
}

func newACLWorld(t *testing.T, backend, acls string) *aclWorld {
	t.Helper()
	dir := t.TempDir()
	users := auth.NewUsers()
	for _, u := range []string{"admin", "alice", "bob"} {
		if err := users.Set(u, u+"-pw", 4096); err != nil {
			t.Fatal(err)
		}
	}
	usersFile := filepath.Join(dir, "users.yaml")
	if err := users.Save(usersFile); err != nil {
		t.Fatal(err)
	}
	w := &aclWorld{t: t, audit: filepath.Join(dir, "audit.jsonl")}
	listener := `{ listen: "127.0.0.1:0", sasl: { mechanisms: [PLAIN], users_file: ` + usersFile + ` } }`
	var backendYAML string
	if backend == "upstream" || backend == "single-port" {
		brokers, ports := 1, "broker_port_base: 0"
		if backend == "single-port" {
			brokers, ports = 3, "brokers: single-port"
		}
		c, err := kfake.NewCluster(kfake.NumBrokers(brokers))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		w.upstream = c
		listener = `{ listen: "127.0.0.1:0", ` + ports + `, sasl: { mechanisms: [PLAIN], users_file: ` + usersFile + ` } }`
		backendYAML = "upstream: { bootstrap: [" + strings.Join(c.ListenAddrs(), ",") + "] }\nbroker: { data_dir: " + filepath.Join(dir, "state") + " }\n"
	} else {
		backendYAML = "broker: { data_dir: " + filepath.Join(dir, "data") + " }\n"
	}
	w.yaml = "listeners: [" + listener + "]\n" + backendYAML + `admin: { listen: "off" }
audit: { level: summary, sink: { file: ` + w.audit + ` } }
policy:
  acls: ` + acls + `
  super_users: ["User:admin"]
`
	w.start()
	return w
}

func (w *aclWorld) start() {
	w.t.Helper()
	cfg, err := configs.Parse([]byte(w.yaml), "test.yaml")
	if err != nil {
		w.t.Fatal(err)
	}
	g, err := New(cfg, quiet())
	if err != nil {
		w.t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	w.g = g
	w.t.Cleanup(func() { w.stop() })
}

func (w *aclWorld) stop() {
	if w.g == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.g.Close(ctx); err != nil {
		w.t.Errorf("close: %v", err)
	}
	w.g = nil
}

func (w *aclWorld) restart() {
	w.t.Helper()
	w.stop()
	w.start()
}

func (w *aclWorld) addr() string { return w.g.Server.Addr(0).String() }

func (w *aclWorld) client(user string, opts ...kgo.Opt) *kgo.Client {
	w.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(w.addr()),
		kgo.SASL(plain.Auth{User: user, Pass: user + "-pw"}.AsMechanism()),
		kgo.RecordDeliveryTimeout(10 * time.Second), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(cl.Close)
	return cl
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// describeAll returns every ACL the gateway describes, as sorted strings.
func describeAll(t *testing.T, ctx context.Context, adm *kadm.Client) []string {
	t.Helper()
	res, err := adm.DescribeACLs(ctx, anyACL())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("describe: %v", r.Err)
		}
		for _, d := range r.Described {
			out = append(out, d.Type.String()+":"+d.Pattern.String()+":"+d.Name+":"+d.Principal+":"+d.Host+":"+d.Operation.String()+":"+d.Permission.String())
		}
	}
	return sortStrings(out)
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// anyACL is a filter of every ACL.
func anyACL() *kadm.ACLBuilder {
	return kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
}

// describeErr is the error of a DescribeAcls of every ACL.
func describeErr(ctx context.Context, adm *kadm.Client) error {
	res, err := adm.DescribeACLs(ctx, anyACL())
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// createACLs creates b as admin and fails on any error.
func createACLs(t *testing.T, ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create %v: %v", r, r.Err)
		}
	}
}

// fetchCode fetches partition 0 of topic and returns its error code.
func fetchCode(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) int16 {
	t.Helper()
	id := topicIDs[topic]
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = 11, 10, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id // kgo sends the version it likes: by name before v13, by id after
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch %s: %v", topic, err)
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			return p.ErrorCode
		}
	}
	return resp.ErrorCode
}

// topicIDs are the ids of the test topics, from the super user's
// metadata (which also teaches the gateway the names, KIP-516).
var topicIDs = map[string][16]byte{}

func learnIDs(t *testing.T, ctx context.Context, adm *kadm.Client) {
	t.Helper()
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, td := range md.Topics {
		topicIDs[td.Topic] = td.ID
	}
}

// TestACLsRoundTripAndEnforce: on both backends (and a single-port
// listener over a 3-broker kfake), kadm's CreateACLs,
// DescribeACLs and DeleteACLs round-trip through the gateway and survive
// a restart; the ACLs govern produce and fetch (literal, prefixed, deny
// wins, a super user passes) even though neither backend has an
// authorizer.
func TestACLsRoundTripAndEnforce(t *testing.T) {
	for _, backend := range []string{"builtin", "upstream", "single-port"} {
		t.Run(backend, func(t *testing.T) {
			w := newACLWorld(t, backend, "enforce")
			ctx := ctxFor(t)
			admin := w.client("admin")
			adm := kadm.NewClient(admin)
			for _, topic := range []string{"orders", "fin-a", "fin-secret", "other"} {
				if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
					t.Fatalf("admin creates %s: %v", topic, err)
				}
			}
			if got := describeAll(t, ctx, adm); len(got) != 0 {
				t.Fatalf("a new store describes %v", got)
			}
			createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite))
			createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("fin-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))
			createACLs(t, ctx, adm, kadm.NewACLs().Deny("User:alice").Topics("fin-secret").Operations(kadm.OpRead))
			want := []string{
				"TOPIC:LITERAL:fin-secret:User:alice:*:READ:DENY",
				"TOPIC:LITERAL:orders:User:alice:*:WRITE:ALLOW",
				"TOPIC:PREFIXED:fin-:User:alice:*:READ:ALLOW",
			}
			if got := describeAll(t, ctx, adm); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("described\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}

			learnIDs(t, ctx, adm)
			alice := w.client("alice")
			if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("ok")}).FirstErr(); err != nil {
				t.Fatalf("alice produces to orders (literal WRITE): %v", err)
			}
			if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "fin-a", Value: []byte("no")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
				t.Fatalf("alice produces to fin-a (READ only): %v, want TOPIC_AUTHORIZATION_FAILED", err)
			}
			if code := fetchCode(t, ctx, alice, "fin-a"); code != 0 {
				t.Fatalf("alice fetches fin-a (prefixed READ): %v", kerr.ErrorForCode(code))
			}
			if code := fetchCode(t, ctx, alice, "fin-secret"); code != kerr.TopicAuthorizationFailed.Code {
				t.Fatalf("alice fetches fin-secret (deny wins): %v", kerr.ErrorForCode(code))
			}
			if code := fetchCode(t, ctx, alice, "orders"); code != kerr.TopicAuthorizationFailed.Code {
				t.Fatalf("alice fetches orders (WRITE only): %v", kerr.ErrorForCode(code))
			}
			if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "fin-secret", Value: []byte("su")}).FirstErr(); err != nil {
				t.Fatalf("the super user produces anywhere: %v", err)
			}
			// Metadata lists only what alice may describe.
			md, err := kadm.NewClient(alice).Metadata(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if names := sortStrings(md.Topics.Names()); strings.Join(names, ",") != "fin-a,fin-secret,orders" {
				t.Errorf("alice's metadata lists %v, want fin-a, fin-secret, orders", names)
			}
			// alice may not manage ACLs.
			if err := describeErr(ctx, kadm.NewClient(alice)); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
				t.Errorf("alice describes ACLs: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
			}

			w.restart()
			adm = kadm.NewClient(w.client("admin"))
			if got := describeAll(t, ctx, adm); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("after a restart: described\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			learnIDs(t, ctx, adm)
			alice = w.client("alice")
			if code := fetchCode(t, ctx, alice, "fin-secret"); code != kerr.TopicAuthorizationFailed.Code {
				t.Fatalf("after a restart, alice fetches fin-secret: %v", kerr.ErrorForCode(code))
			}
			del, err := adm.DeleteACLs(ctx, kadm.NewACLs().Deny("User:alice").DenyHosts().Topics("fin-secret").Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch))
			if err != nil {
				t.Fatal(err)
			}
			if len(del) != 1 || del[0].Err != nil || len(del[0].Deleted) != 1 || del[0].Deleted[0].Name != "fin-secret" {
				t.Fatalf("delete returned %+v, want the one DENY", del)
			}
			if code := fetchCode(t, ctx, alice, "fin-secret"); code != 0 {
				t.Fatalf("the deny is gone at once: alice fetches fin-secret: %v", kerr.ErrorForCode(code))
			}
			w.restart()
			adm = kadm.NewClient(w.client("admin"))
			if got := describeAll(t, ctx, adm); len(got) != 2 {
				t.Fatalf("after delete and restart: %v", got)
			}
			if w.upstream != nil {
				if _, err := os.Stat(filepath.Join(filepath.Dir(w.audit), "state", "acls.json")); err != nil {
					t.Errorf("the gateway's state file: %v", err)
				}
			}
		})
	}
}

// TestACLsOffAndUpstream: acls off answers the ACL keys SECURITY_DISABLED
// on both backends (a broker without an authorizer); acls upstream
// forwards them to the upstream.
func TestACLsOffAndUpstream(t *testing.T) {
	for _, backend := range []string{"builtin", "upstream"} {
		t.Run("off/"+backend, func(t *testing.T) {
			w := newACLWorld(t, backend, "off")
			ctx := ctxFor(t)
			adm := kadm.NewClient(w.client("alice"))
			if err := describeErr(ctx, adm); !errors.Is(err, kerr.SecurityDisabled) {
				t.Fatalf("describe with acls off: %v, want SECURITY_DISABLED", err)
			}
			res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:bob").Topics("t").Operations(kadm.OpRead))
			if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.SecurityDisabled) {
				t.Fatalf("create with acls off: %v %v, want SECURITY_DISABLED", res, err)
			}
			// Nothing is enforced.
			if _, err := kadm.NewClient(w.client("bob")).CreateTopic(ctx, 1, 1, nil, "free"); err != nil {
				t.Fatalf("create a topic with acls off: %v", err)
			}
			if err := w.client("bob").ProduceSync(ctx, &kgo.Record{Topic: "free", Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatalf("produce with acls off: %v", err)
			}
		})
	}
	t.Run("upstream", func(t *testing.T) {
		w := newACLWorld(t, "upstream", "upstream")
		var mu sync.Mutex
		seen := 0
		w.upstream.ControlKey(int16(kmsg.DescribeACLs), func(kmsg.Request) (kmsg.Response, error, bool) {
			mu.Lock()
			seen++
			mu.Unlock()
			w.upstream.KeepControl()
			return nil, nil, false
		})
		ctx := ctxFor(t)
		adm := kadm.NewClient(w.client("alice"))
		if err := describeErr(ctx, adm); err != nil {
			t.Fatalf("describe through to kfake: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if seen == 0 {
			t.Fatal("with acls upstream, DescribeAcls did not reach the upstream")
		}
	})
}

// TestACLsKcatRefusedAndAudited: kcat (librdkafka) through the gateway,
// authenticated with SASL PLAIN, after an ACL created with CreateAcls
// gives it DESCRIBE but not WRITE or READ: its produce and its fetch are
// refused with TOPIC_AUTHORIZATION_FAILED, and the audit trail records
// the denied Produce under rule acl.
func TestACLsKcatRefusedAndAudited(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed")
	}
	w := newACLWorld(t, "builtin", "enforce")
	ctx := ctxFor(t)
	adm := kadm.NewClient(w.client("admin"))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "guarded"); err != nil {
		t.Fatal(err)
	}
	if err := w.client("admin").ProduceSync(ctx, &kgo.Record{Topic: "guarded", Value: []byte("secret")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:bob").Topics("guarded").Operations(kadm.OpDescribe))
	sec := []string{"-b", w.addr(), "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username=bob", "-X", "sasl.password=bob-pw", "-X", "message.timeout.ms=10000"}
	prod := exec.CommandContext(ctx, "kcat", append(sec, "-t", "guarded", "-P")...)
	prod.Stdin = strings.NewReader("from librdkafka\n")
	out, err := prod.CombinedOutput()
	if err == nil && !strings.Contains(strings.ToLower(string(out)), "authorization failed") {
		t.Fatalf("kcat produced to a topic bob may not write:\n%s", out)
	}
	if !strings.Contains(strings.ToLower(string(out)), "topic authorization failed") {
		t.Fatalf("kcat produce: %v, want Topic authorization failed:\n%s", err, out)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, _ = exec.CommandContext(cctx, "kcat", append(sec, "-t", "guarded", "-C", "-o", "beginning", "-e", "-c", "1")...).CombinedOutput()
	if strings.Contains(string(out), "secret") || !strings.Contains(strings.ToLower(string(out)), "topic authorization failed") {
		t.Fatalf("kcat consume, want Topic authorization failed and no record:\n%s", out)
	}
	rec := waitAudit(t, w.audit, func(r map[string]any) bool {
		return r["api"] == "Produce" && r["principal"] == "bob"
	})
	if rec["decision"] != "denied" || rec["rule"] != "acl" {
		t.Fatalf("audit record of bob's produce: %v, want decision denied, rule acl", rec)
	}
	if n := denials(t, w.g, "acl"); n < 1 {
		t.Errorf("tollgate_policy_denials_total{rule=\"acl\"} = %v, want at least 1", n)
	}
}

// denials reads tollgate_policy_denials_total for rule.
func denials(t *testing.T, g *Gateway, rule string) float64 {
	t.Helper()
	mfs, err := g.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tollgate_policy_denials_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rule" && l.GetValue() == rule {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// waitAudit polls the audit file for a record match accepts.
func waitAudit(t *testing.T, path string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var r map[string]any
				if json.Unmarshal(sc.Bytes(), &r) == nil && match(r) {
					f.Close()
					return r
				}
			}
			f.Close()
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(path)
			t.Fatalf("no matching audit record in %s:\n%s", path, data)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestACLsAutoCreateNeedsCreate: the built-in broker auto-creates topics
// on Metadata, but only for a principal with CREATE on the topic or the
// cluster, as Kafka does; DESCRIBE alone does not create one.
func TestACLsAutoCreateNeedsCreate(t *testing.T) {
	w := newACLWorld(t, "builtin", "enforce")
	ctx := ctxFor(t)
	adm := kadm.NewClient(w.client("admin"))
	createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("auto-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpDescribe))
	metadata := func(user, topic string) int16 {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, w.client(user))
		if err != nil || len(resp.Topics) != 1 {
			t.Fatalf("metadata: %v %+v", err, resp)
		}
		return resp.Topics[0].ErrorCode
	}
	exists := func(topic string) bool {
		t.Helper()
		td, err := kadm.NewClient(w.client("admin")).ListTopics(ctx, topic) // a new client: kgo caches metadata answers
		if err != nil {
			t.Fatal(err)
		}
		return td.Has(topic) && td[topic].Err == nil
	}
	if code := metadata("alice", "auto-one"); code != kerr.UnknownTopicOrPartition.Code || exists("auto-one") {
		t.Fatalf("alice without CREATE: metadata %v, topic created %v", kerr.ErrorForCode(code), exists("auto-one"))
	}
	createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("auto-one").Operations(kadm.OpCreate))
	if code := metadata("alice", "auto-one"); code != 0 || !exists("auto-one") {
		t.Fatalf("alice with CREATE on the topic: metadata %v, topic created %v", kerr.ErrorForCode(code), exists("auto-one"))
	}
	if code := metadata("alice", "elsewhere"); code != kerr.TopicAuthorizationFailed.Code || exists("elsewhere") {
		t.Fatalf("alice on a topic she may not describe: %v", kerr.ErrorForCode(code))
	}
}

// TestACLsListGroupsFiltered: ListGroups lists only the groups the
// principal may describe (all of them with DESCRIBE on the cluster), as
// Kafka does; the super user sees every group.
func TestACLsListGroupsFiltered(t *testing.T) {
	for _, backend := range []string{"builtin", "upstream"} {
		t.Run(backend, func(t *testing.T) {
			w := newACLWorld(t, backend, "enforce")
			ctx := ctxFor(t)
			adm := kadm.NewClient(w.client("admin"))
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
				t.Fatal(err)
			}
			for _, g := range []string{"g-alice", "g-other"} {
				offs := kadm.Offsets{}
				offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 0, LeaderEpoch: -1})
				if _, err := adm.CommitOffsets(ctx, g, offs); err != nil {
					t.Fatalf("commit for %s: %v", g, err)
				}
			}
			list := func(user string) string {
				t.Helper()
				gs, err := kadm.NewClient(w.client(user)).ListGroups(ctx)
				if err != nil {
					t.Fatalf("list groups as %s: %v", user, err)
				}
				return strings.Join(gs.Groups(), ",")
			}
			if got := list("admin"); got != "g-alice,g-other" {
				t.Fatalf("the super user lists %q", got)
			}
			if got := list("alice"); got != "" {
				t.Fatalf("alice without ACLs lists %q", got)
			}
			createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Groups("g-alice").Operations(kadm.OpRead))
			if got := list("alice"); got != "g-alice" {
				t.Fatalf("alice with READ (implies DESCRIBE) on g-alice lists %q", got)
			}
			createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpDescribe))
			if got := list("alice"); got != "g-alice,g-other" {
				t.Fatalf("alice with DESCRIBE on the cluster lists %q", got)
			}
		})
	}
}

// TestACLsReloadAndBrokenFile: super_users follow a reload and the store
// (with what was created before) stays in force; a broken ACL file stops
// provisioning (check-config) with an error naming it.
func TestACLsReloadAndBrokenFile(t *testing.T) {
	w := newACLWorld(t, "builtin", "enforce")
	ctx := ctxFor(t)
	adm := kadm.NewClient(w.client("admin"))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:bob").Topics("t").Operations(kadm.OpWrite))
	if err := w.client("alice").ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice before the reload: %v", err)
	}
	next := strings.Replace(w.yaml, `super_users: ["User:admin"]`, `super_users: ["User:admin", "User:alice"]`, 1)
	if err := w.g.ReloadFrom(func() (*configs.Config, error) { return configs.Parse([]byte(next), "test.yaml") }); err != nil {
		t.Fatal(err)
	}
	if err := w.client("alice").ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("alice as a super user after the reload: %v", err)
	}
	if err := w.client("bob").ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("bob's ACL after the reload: %v", err)
	}
	if got := describeAll(t, ctx, adm); len(got) != 1 {
		t.Fatalf("after the reload the store holds %v", got)
	}

	dir := t.TempDir()
	bad := filepath.Join(dir, "acls.json")
	os.WriteFile(bad, []byte(`{"version":1,"acls":[{"resource_type":"TOPIC","resource_name":"x","pattern_type":"MATCH","principal":"User:a","host":"*","operation":"READ","permission":"ALLOW"}]}`), 0o600)
	cfg, err := configs.Parse([]byte("broker: { data_dir: "+dir+" }\npolicy: { acls: enforce, acls_file: "+bad+" }\n"), "bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := Provision(cfg, quiet()); err == nil || !strings.Contains(err.Error(), "policy.acls_file") || !strings.Contains(err.Error(), bad) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("provisioning with a broken ACL file: %v", err)
	}
}

// TestACLsGroupConsumerAndTransactions: franz-go's group consumer and
// transactional producer work through the gateway with the ACLs Kafka
// asks for (READ on the group and the topic; WRITE on the topic and the
// transactional id), and a transactional producer without WRITE on its
// id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
func TestACLsGroupConsumerAndTransactions(t *testing.T) {
	for _, backend := range []string{"builtin", "upstream", "single-port"} {
		t.Run(backend, func(t *testing.T) {
			w := newACLWorld(t, backend, "enforce")
			ctx := ctxFor(t)
			adm := kadm.NewClient(w.client("admin"))
			if _, err := adm.CreateTopic(ctx, 2, 1, nil, "events"); err != nil {
				t.Fatal(err)
			}
			createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("events").Operations(kadm.OpWrite, kadm.OpRead))
			createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Groups("readers").Operations(kadm.OpRead))
			createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").TransactionalIDs("tx-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite))

			txn := w.client("alice", kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("events"))
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte{byte('a' + i)}}).FirstErr(); err != nil {
					t.Fatalf("transactional produce: %v", err)
				}
			}
			if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatalf("commit: %v", err)
			}

			other := w.client("alice", kgo.TransactionalID("other-1"), kgo.DefaultProduceTopic("events"))
			err := other.BeginTransaction()
			if err == nil {
				err = other.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
			}
			if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
				t.Fatalf("a transactional id alice may not write: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
			}

			cons := w.client("alice", kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("events"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit())
			got := 0
			for got < 4 {
				fs := cons.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of 4: %v", got, err)
				}
				fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
				got += fs.NumRecords()
			}
			if err := cons.CommitUncommittedOffsets(ctx); err != nil {
				t.Fatalf("commit offsets as group readers: %v", err)
			}
			offs, err := adm.FetchOffsets(ctx, "readers")
			if err != nil {
				t.Fatal(err)
			}
			total := int64(0)
			offs.Each(func(o kadm.OffsetResponse) { total += o.At })
			if total < 4 {
				t.Fatalf("committed offsets sum to %d, want at least 4", total)
			}

			bob := w.client("bob", kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("events"))
			bctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			var bobErr error
			for bobErr == nil && bctx.Err() == nil {
				bob.PollFetches(bctx).EachError(func(_ string, _ int32, err error) { bobErr = err })
			}
			if !errors.Is(bobErr, kerr.GroupAuthorizationFailed) && !errors.Is(bobErr, kerr.TopicAuthorizationFailed) {
				t.Fatalf("bob joins readers: %v, want an authorization failure", bobErr)
			}
		})
	}
}

// TestACLsOffsetFetchFiltered: an OffsetFetch of every topic of a group
// answers only the topics the principal may describe, as Kafka does.
func TestACLsOffsetFetchFiltered(t *testing.T) {
	for _, backend := range []string{"builtin", "upstream"} {
		t.Run(backend, func(t *testing.T) {
			w := newACLWorld(t, backend, "enforce")
			ctx := ctxFor(t)
			adm := kadm.NewClient(w.client("admin"))
			offs := kadm.Offsets{}
			for _, topic := range []string{"seen", "hidden"} {
				if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
					t.Fatal(err)
				}
				offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
			}
			learnIDs(t, ctx, adm) // the gateway learns the ids (OffsetFetch v10+ answers by id)
			if _, err := adm.CommitOffsets(ctx, "g", offs); err != nil {
				t.Fatal(err)
			}
			createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Groups("g").Topics("seen").Operations(kadm.OpRead))
			got, err := kadm.NewClient(w.client("alice")).FetchOffsets(ctx, "g")
			if err != nil {
				t.Fatal(err)
			}
			var topics []string
			got.Each(func(o kadm.OffsetResponse) { topics = append(topics, o.Topic) })
			if strings.Join(topics, ",") != "seen" {
				t.Fatalf("alice fetches the offsets of group g: topics %v, want seen only", topics)
			}
		})
	}
}

// TestACLsInvalidRequests: what Kafka refuses with INVALID_REQUEST is
// refused per creation and per filter, on the wire, and the valid rest of
// the request is applied.
func TestACLsInvalidRequests(t *testing.T) {
	w := newACLWorld(t, "builtin", "enforce")
	ctx := ctxFor(t)
	admin := w.client("admin")
	creation := func(typ kmsg.ACLResourceType, name string, pat kmsg.ACLResourcePatternType, principal string) kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = typ, name, pat
		c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		return c
	}
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{
		creation(kmsg.ACLResourceTypeAny, "t", kmsg.ACLResourcePatternTypeLiteral, "User:a"),
		creation(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeMatch, "User:a"),
		creation(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral, "a"),
		creation(kmsg.ACLResourceTypeCluster, "other", kmsg.ACLResourcePatternTypeLiteral, "User:a"),
		creation(kmsg.ACLResourceTypeTopic, "", kmsg.ACLResourcePatternTypeLiteral, "User:a"),
		creation(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral, "User:a"),
	}
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		want := kerr.InvalidRequest.Code
		if i == len(resp.Results)-1 {
			want = 0
		}
		if r.ErrorCode != want {
			t.Errorf("creation %d: %v (%v), want %v", i, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, kerr.ErrorForCode(want))
		}
	}
	d := kmsg.NewPtrDescribeACLsRequest()
	d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = 0, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr, err := d.RequestWith(ctx, admin)
	if err != nil || dr.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("describe with an UNKNOWN resource type: %v %v, want INVALID_REQUEST", err, dr)
	}
	if got := describeAll(t, ctx, kadm.NewClient(admin)); len(got) != 1 {
		t.Errorf("the store holds %v, want the one valid ACL", got)
	}
}

// TestGatewayStoresAnswerTogether: with ACLs enforced, the quota store
// and the SCRAM credentials (users file) of the built-in broker's
// gateway answer too: the three stores' answerers are installed side by
// side, none replacing another.
func TestGatewayStoresAnswerTogether(t *testing.T) {
	w := newACLWorld(t, "builtin", "enforce")
	ctx := ctxFor(t)
	adm := kadm.NewClient(w.client("admin"))
	createACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite))
	if got := describeAll(t, ctx, adm); len(got) != 1 {
		t.Fatalf("ACLs described: %v, want the one created", got)
	}
	rate := 1048576.0
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: kadm.StringPtr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}},
	}}); err != nil {
		t.Fatalf("alter quotas: %v", err)
	}
	qs, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kadm.StringPtr("alice")}})
	if err != nil || len(qs) != 1 || len(qs[0].Values) != 1 || qs[0].Values[0].Value != rate {
		t.Fatalf("quotas described: %+v, %v", qs, err)
	}
	users, err := adm.DescribeUserSCRAMs(ctx, "alice")
	if err != nil {
		t.Fatalf("describe SCRAM users: %v", err)
	}
	if u, ok := users["alice"]; !ok || u.Err != nil || len(u.CredInfos) == 0 {
		t.Fatalf("SCRAM user alice: %+v", users)
	}
}

// TestACLsGovernTheConsole: the web console's principal (admin.ui.principal,
// "User:tollgate-console") is what an ACL names: refused until an ACL
// grants it CREATE, allowed after.
func TestACLsGovernTheConsole(t *testing.T) {
	w := newACLWorld(t, "builtin", "enforce")
	ctx := ctxFor(t)
	seed, dial := w.g.Server.ConsoleDialer(proxy.ConsoleOptions{Name: configs.ConsoleListener, Principal: configs.DefaultConsolePrincipal})
	console, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.Dialer(dial), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(console.Close)
	cadm := kadm.NewClient(console)
	if _, err := cadm.CreateTopic(ctx, 1, 1, nil, "from-console"); !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("the console creates a topic with no ACL for it: %v, want an authorization failure", err)
	}
	createACLs(t, ctx, kadm.NewClient(w.client("admin")), kadm.NewACLs().Allow(configs.DefaultConsolePrincipal).Clusters().Operations(kadm.OpCreate))
	if _, err := cadm.CreateTopic(ctx, 1, 1, nil, "from-console"); err != nil {
		t.Fatalf("the console creates a topic with CREATE granted to %s: %v", configs.DefaultConsolePrincipal, err)
	}
}

// TestStoreAltersNeedASuperUser: with policy.acls off and super users
// named, only a super user alters SCRAM credentials or client quotas
// through the gateway; another authenticated user is refused per entry
// with CLUSTER_AUTHORIZATION_FAILED and nothing changes.
func TestStoreAltersNeedASuperUser(t *testing.T) {
	w := newACLWorld(t, "builtin", "off")
	ctx := ctxFor(t)
	alice, admin := kadm.NewClient(w.client("alice")), kadm.NewClient(w.client("admin"))
	del := kadm.DeleteSCRAM{User: "admin", Mechanism: kadm.ScramSha512}
	res, err := alice.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{del}, nil) // kadm returns the user's error as well
	if r := res["admin"]; !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(r.Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice deletes admin's SCRAM credential: %+v, %v, want CLUSTER_AUTHORIZATION_FAILED", r, err)
	}
	if users, err := admin.DescribeUserSCRAMs(ctx, "admin"); err != nil || len(users["admin"].CredInfos) == 0 {
		t.Fatalf("admin's credential after alice's refused delete: %+v, %v", users, err)
	}
	quota := []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user"}}, // the default user: every client
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}},
	}}
	qres, err := alice.AlterClientQuotas(ctx, quota) // kadm returns the entry's error as well
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) && (len(qres) != 1 || !errors.Is(qres[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Fatalf("alice throttles every user: %+v, %v, want CLUSTER_AUTHORIZATION_FAILED", qres, err)
	}
	if qs, err := admin.DescribeClientQuotas(ctx, false, nil); err != nil || len(qs) != 0 {
		t.Fatalf("quotas after alice's refused alter: %+v, %v", qs, err)
	}
	if qres, err := admin.AlterClientQuotas(ctx, quota); err != nil || qres[0].Err != nil {
		t.Fatalf("the super user sets a quota: %+v, %v", qres, err)
	}
	up := kadm.UpsertSCRAM{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-pw"}
	if res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{up}); err != nil || res["carol"].Err != nil {
		t.Fatalf("the super user adds a SCRAM user: %+v, %v", res, err)
	}
}
