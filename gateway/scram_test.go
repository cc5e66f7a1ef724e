package gateway

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tollgate-kafka/tollgate/auth"
)

// scramBackends are a built-in broker, a kfake upstream (without SASL) and
// a 3-broker kfake behind a single-port listener, each behind a listener
// that terminates SASL with a users file holding
// one user, admin. seen reports whether the upstream got a SCRAM request.
func scramBackends(t *testing.T) map[string]func(t *testing.T) (yaml, usersFile string, seen func() bool) {
	users := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "users.yaml")
		u := auth.NewUsers()
		if err := u.Set("admin", "admin-secret", auth.MinIterations); err != nil {
			t.Fatal(err)
		}
		if err := u.Save(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	listener := func(extra, users string) string {
		return `listeners: [{ listen: "127.0.0.1:0"` + extra + `, sasl: { mechanisms: [SCRAM-SHA-512, SCRAM-SHA-256, PLAIN], users_file: ` + users + ` } }]`
	}
	return map[string]func(t *testing.T) (string, string, func() bool){
		"builtin": func(t *testing.T) (string, string, func() bool) {
			u := users(t)
			return listener("", u) + `
broker: { data_dir: ` + t.TempDir() + ` }
admin: { listen: "off" }
`, u, func() bool { return false }
		},
		"upstream": func(t *testing.T) (string, string, func() bool) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "up"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			var seen atomic.Bool
			for _, k := range []kmsg.Key{kmsg.DescribeUserSCRAMCredentials, kmsg.AlterUserSCRAMCredentials} {
				c.ControlKey(int16(k), func(kmsg.Request) (kmsg.Response, error, bool) {
					c.KeepControl()
					seen.Store(true)
					return nil, nil, false
				})
			}
			u := users(t)
			return listener(", broker_port_base: 0", u) + `
upstream: { bootstrap: [` + c.ListenAddrs()[0] + `] }
admin: { listen: "off" }
`, u, seen.Load
		},
		"single-port": func(t *testing.T) (string, string, func() bool) {
			c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "up"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			var seen atomic.Bool
			for _, k := range []kmsg.Key{kmsg.DescribeUserSCRAMCredentials, kmsg.AlterUserSCRAMCredentials} {
				c.ControlKey(int16(k), func(kmsg.Request) (kmsg.Response, error, bool) {
					c.KeepControl()
					seen.Store(true)
					return nil, nil, false
				})
			}
			u := users(t)
			return listener(", brokers: single-port", u) + `
upstream: { bootstrap: [` + strings.Join(c.ListenAddrs(), ",") + `] }
admin: { listen: "off" }
`, u, seen.Load
		},
	}
}

// login reports whether user/pass can log in with SCRAM-SHA-512 and send
// a request.
func login(t *testing.T, g *Gateway, user, pass string) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.Server.Addr(0).String()),
		kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

func scramAdmin(t *testing.T, g *Gateway) *kadm.Client {
	adm, _ := adminFor(t, g, kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
	return adm
}

// TestSCRAMThroughKafkaAPI: kadm's AlterUserSCRAMs creates a user in the
// users file of the SASL listener; a new client logs in with the new
// password at once, and after a password change the old one is refused;
// DescribeUserSCRAMs lists mechanisms and iterations; all of it survives
// a restart, on both backends, without the upstream seeing the keys.
func TestSCRAMThroughKafkaAPI(t *testing.T) {
	for name, backend := range scramBackends(t) {
		t.Run(name, func(t *testing.T) {
			yaml, usersFile, upstreamSaw := backend(t)
			g, stop := openGateway(t, yaml)
			adm := scramAdmin(t, g)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := login(t, g, "bob", "first"); err == nil {
				t.Fatal("bob logged in before he existed")
			}
			alter := func(del []kadm.DeleteSCRAM, up []kadm.UpsertSCRAM) {
				t.Helper()
				res, err := adm.AlterUserSCRAMs(ctx, del, up)
				if err != nil {
					t.Fatal(err)
				}
				if err := res.Error(); err != nil {
					t.Fatalf("alter: %v", err)
				}
			}
			alter(nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "first"}})
			if err := login(t, g, "bob", "first"); err != nil {
				t.Fatalf("bob's new SCRAM-SHA-512 login: %v", err)
			}
			alter(nil, []kadm.UpsertSCRAM{
				{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "second"},
				{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "c"}})
			if err := login(t, g, "bob", "first"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("bob's old password after the change: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
			if err := login(t, g, "bob", "second"); err != nil {
				t.Fatalf("bob's changed password: %v", err)
			}
			u, err := auth.LoadUsers(usersFile)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(u.Names(), ","); got != "admin,bob,carol" {
				t.Errorf("users file holds %s", got)
			}
			if c, ok := u.Credential("bob", "SCRAM-SHA-512"); !ok || c.Iterations != 4096 {
				t.Errorf("bob's SHA-512 credential: %+v %v", c, ok)
			}
			if raw, _ := os.ReadFile(usersFile); strings.Contains(string(raw), "second") {
				t.Error("the users file holds a password")
			}
			check := func(adm *kadm.Client) {
				t.Helper()
				d, err := adm.DescribeUserSCRAMs(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(d) != 3 {
					t.Fatalf("described %d users, want 3: %+v", len(d), d)
				}
				bob := d["bob"]
				if bob.Err != nil || len(bob.CredInfos) != 1 || bob.CredInfos[0].Mechanism != kadm.ScramSha512 || bob.CredInfos[0].Iterations != 4096 {
					t.Errorf("bob: %+v", bob)
				}
				one, err := adm.DescribeUserSCRAMs(ctx, "nobody")
				if err != nil {
					t.Fatal(err)
				}
				if !errors.Is(one["nobody"].Err, kerr.ResourceNotFound) {
					t.Errorf("describe an unknown user: %v, want RESOURCE_NOT_FOUND", one["nobody"].Err)
				}
			}
			check(adm)
			stop()
			g2, _ := openGateway(t, yaml)
			if err := login(t, g2, "bob", "second"); err != nil {
				t.Fatalf("bob after a restart: %v", err)
			}
			adm2 := scramAdmin(t, g2)
			check(adm2)
			// Deleting bob's only credential removes him.
			res, err := adm2.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}}, nil)
			if err != nil || res.Error() != nil {
				t.Fatalf("delete: %v %v", err, res.Error())
			}
			if err := login(t, g2, "bob", "second"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("bob after deletion: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
			if upstreamSaw() {
				t.Error("the upstream received a SCRAM request the gateway should have answered")
			}
		})
	}
}

// TestSCRAMHostileAlters: Kafka's errors for bad alterations, and the
// users file is left as it was.
func TestSCRAMHostileAlters(t *testing.T) {
	yaml, usersFile, _ := scramBackends(t)["builtin"](t)
	g, _ := openGateway(t, yaml)
	_, kcl := adminFor(t, g, kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before, _ := os.ReadFile(usersFile)
	up := func(user string, mech int8, iterations int32, salt, salted []byte) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, mech, iterations, salt, salted
		return u
	}
	salt, salted := []byte("salt"), make([]byte, 64)
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up("huge", 2, 1<<30, salt, salted),
		up("few", 2, 100, salt, salted),
		up("", 2, 4096, salt, salted),
		up("dup", 2, 4096, salt, salted),
		up("dup", 2, 8192, salt, salted),
		up("mech", 7, 4096, salt, salted),
		up("nosalt", 1, 4096, nil, salted),
		up("bad\nname", 1, 4096, salt, salted),
	}
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "ghost", 2
	req.Deletions = append(req.Deletions, del)
	resp, err := req.RequestWith(ctx, kcl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*kerr.Error{
		"huge": kerr.UnacceptableCredential, "few": kerr.UnacceptableCredential, "": kerr.UnacceptableCredential,
		"dup": kerr.DuplicateResource, "mech": kerr.UnsupportedSaslMechanism, "nosalt": kerr.UnacceptableCredential,
		"bad\nname": kerr.UnacceptableCredential, "ghost": kerr.ResourceNotFound,
	}
	if len(resp.Results) != len(want) {
		t.Errorf("%d results, want %d: %+v", len(resp.Results), len(want), resp.Results)
	}
	for _, r := range resp.Results {
		if w := want[r.User]; r.ErrorCode != w.Code || r.ErrorMessage == nil {
			t.Errorf("user %q: code %d, want %s", r.User, r.ErrorCode, w.Message)
		}
	}
	if after, _ := os.ReadFile(usersFile); string(after) != string(before) {
		t.Error("refused alterations changed the users file")
	}
	// Counted: tollgate_answer_refusals_total{api,error}.
	for _, c := range []struct {
		code string
		want float64
	}{{"UNACCEPTABLE_CREDENTIAL", 5}, {"DUPLICATE_RESOURCE", 1}, {"UNSUPPORTED_SASL_MECHANISM", 1}, {"RESOURCE_NOT_FOUND", 1}} {
		if got := refusals(t, g, "AlterUserSCRAMCredentials", c.code); got != c.want {
			t.Errorf("tollgate_answer_refusals_total{api=AlterUserSCRAMCredentials,error=%s} = %v, want %v", c.code, got, c.want)
		}
	}
	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, n := range []string{"admin", "admin"} {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = n
		dreq.Users = append(dreq.Users, u)
	}
	dresp, err := dreq.RequestWith(ctx, kcl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Results) != 1 || dresp.Results[0].ErrorCode != kerr.DuplicateResource.Code {
		t.Errorf("describe the same user twice: %+v", dresp.Results)
	}
	// A users file broken behind the gateway's back: an error, without
	// the path or the parse error (those go to the log).
	if err := os.WriteFile(usersFile, []byte("users: [not, a, map]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dresp, err = kmsg.NewPtrDescribeUserSCRAMCredentialsRequest().RequestWith(ctx, kcl)
	if err != nil {
		t.Fatal(err)
	}
	if dresp.ErrorCode != kerr.UnknownServerError.Code || dresp.ErrorMessage == nil || strings.Contains(*dresp.ErrorMessage, usersFile) {
		t.Errorf("describe with a broken users file: code %d message %v", dresp.ErrorCode, dresp.ErrorMessage)
	}
}

// refusals reads tollgate_answer_refusals_total{api,error} from g's registry.
func refusals(t *testing.T, g *Gateway, api, code string) float64 {
	t.Helper()
	mfs, err := g.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tollgate_answer_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["api"] == api && labels["error"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
