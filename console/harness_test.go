package console_test

import (
	"bytes"
	"context"
	"flag"
	"github.com/tollgate-kafka/tollgate/console"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/gateway"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// backend is a Kafka the commands are run against.
type backend struct {
	name  string
	addr  string
	kfake *kfake.Cluster // nil for the built-in broker
}

// startGateway assembles a tollgate from YAML and closes it at the end of
// the test.
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

// builtin starts tollgate with its built-in broker; extra is appended to
// the YAML (a policy section, say).
func builtin(t *testing.T, extra string) backend {
	g := startGateway(t, `
listeners: [{ listen: "127.0.0.1:0" }]
broker: { data_dir: `+t.TempDir()+`, fsync: never }
admin: { listen: "off" }
`+extra)
	return backend{name: "builtin", addr: g.Server.Addr(0).String()}
}

// throughGateway starts a 3-broker kfake cluster on 127.0.0.2 and a
// tollgate gateway in front of it.
func throughGateway(t *testing.T, extra string) backend {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		return net.Listen(network, "127.0.0.2:0")
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	g := startGateway(t, `
listeners: [{ listen: "127.0.0.1:0", broker_port_base: 0 }]
upstream: { bootstrap: [`+strings.Join(c.ListenAddrs(), ",")+`] }
admin: { listen: "off" }
`+extra)
	return backend{name: "gateway", addr: g.Server.Addr(0).String(), kfake: c}
}

func backends(t *testing.T) []func(*testing.T) backend {
	return []func(*testing.T) backend{
		func(t *testing.T) backend { return builtin(t, "") },
		func(t *testing.T) backend { return throughGateway(t, "") },
	}
}

// result is one command's outcome.
type result struct {
	out, err string
	code     int
}

// run runs a console command with -b addr and stdin.
func run(t *testing.T, cmd func(context.Context, []string, console.IO) int, addr, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	if addr != "" {
		args = append(args, "-b", addr)
	}
	code := cmd(ctx, args, console.IO{In: strings.NewReader(stdin), Out: &out, Err: &errb})
	return result{out.String(), errb.String(), code}
}

// ok fails the test unless r succeeded.
func (r result) ok(t *testing.T, what string) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", what, r.code, r.out, r.err)
	}
	return r
}

// oneLineError asserts a failure with the exit code and a one-line
// message containing want.
func (r result) oneLineError(t *testing.T, what string, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Errorf("%s: exit %d, want %d (stderr %q)", what, r.code, code, r.err)
	}
	if lines := strings.Count(r.err, "\n"); lines != 1 || !strings.Contains(r.err, want) {
		t.Errorf("%s: stderr %q: want one line containing %q", what, r.err, want)
	}
}

// golden compares got with testdata/name (rewritten with -update), after
// replacing what changes between runs (addresses, ids, member ids).
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = normalize(got)
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

var (
	reAddr     = regexp.MustCompile(`127\.0\.0\.[12]:\d+`)
	reTopicID  = regexp.MustCompile(`(ID: |"id": ")[A-Za-z0-9_-]{22}([\s"])`) // Kafka's form: URL-safe, unpadded
	reMemberID = regexp.MustCompile(`tollgate-console-[0-9a-f-]{36}|kgo-[0-9a-f-]{36}`)
)

func normalize(s string) string {
	s = reAddr.ReplaceAllString(s, "ADDR")
	s = reMemberID.ReplaceAllString(s, "MEMBER")
	return reTopicID.ReplaceAllString(s, "${1}TOPIC-ID${2}")
}
