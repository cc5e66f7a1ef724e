//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// kgoSuiteModes are the gateways TestKgoSuite puts in front of franz-go's
// own integration tests: the built-in broker, and a 3-broker kfake behind
// a port-per-broker and a single-port listener.
var kgoSuiteModes = []string{"builtin", "kfake", "kfake-single-port"}

// TestKgoSuite runs franz-go's kgo integration tests (package pkg/kgo of
// the franz-go version in go.mod, pointed at a broker with KGO_SEEDS) through
// the real tollgate binary, once per mode, and fails on any of their
// top-level tests failing. It takes about 75 s a mode after the suite's
// build, so it runs only when asked: TOLLGATE_KGO_SUITE=1 (every mode) or
// a comma-separated list of kgoSuiteModes (`make kgo-suite`).
// KGO_TEST_RECORDS (default 20000) is passed on.
func TestKgoSuite(t *testing.T) {
	sel := os.Getenv("TOLLGATE_KGO_SUITE")
	if sel == "" {
		t.Skip("franz-go's kgo suite runs with TOLLGATE_KGO_SUITE=1 or a list of modes (make kgo-suite)")
	}
	modes := kgoSuiteModes
	if sel != "1" {
		modes = strings.Split(sel, ",")
	}
	bin := faultTollgate(t)
	suite := buildKgoSuite(t)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			dir := t.TempDir()
			var upstream string
			if mode != "builtin" {
				c, err := kfake.NewCluster(kfake.NumBrokers(3))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				upstream = strings.Join(c.ListenAddrs(), ", ")
			}
			gw, seed := startKgoSuiteGateway(t, ctx, bin, dir, mode, upstream)
			defer gw.kill()
			runKgoSuite(t, ctx, suite, seed)
		})
	}
}

// buildKgoSuite compiles franz-go's pkg/kgo tests from the module cache and
// returns the binary and the directory it must run in (a test reads
// config.go there).
func buildKgoSuite(t *testing.T) (suite kgoSuite) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/twmb/franz-go").Output()
	if err != nil {
		t.Fatalf("locate franz-go (go mod download first): %v", err)
	}
	suite.dir = filepath.Join(strings.TrimSpace(string(out)), "pkg", "kgo")
	suite.bin = filepath.Join(t.TempDir(), "kgo.test")
	cmd := exec.Command("go", "test", "-c", "-o", suite.bin, ".")
	cmd.Dir = suite.dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build franz-go's kgo tests in %s: %v\n%s", suite.dir, err, b)
	}
	return suite
}

type kgoSuite struct{ bin, dir string }

// startKgoSuiteGateway starts tollgate for mode on free ports (a
// port-per-broker listener needs the three after its own; faultEnv's
// start and retry) and returns it with the suite's seed.
func startKgoSuiteGateway(t *testing.T, ctx context.Context, bin, dir, mode, upstream string) (*faultProc, string) {
	t.Helper()
	e := &faultEnv{cfg: FaultsConfig{Tollgate: bin}, dir: dir}
	err := e.startGatewayWith(ctx, 4, func(port int) (string, int, error) {
		var y strings.Builder
		switch mode {
		case "builtin":
			fmt.Fprintf(&y, "listeners:\n  - {name: kgo, listen: 127.0.0.1:%d}\nbroker: {data_dir: %q, fsync: never}\n", port, filepath.Join(dir, "data"))
		case "kfake":
			fmt.Fprintf(&y, "listeners:\n  - {name: kgo, listen: 127.0.0.1:%d}\nupstream: {bootstrap: [%s]}\n", port, upstream)
		case "kfake-single-port":
			fmt.Fprintf(&y, "listeners:\n  - {name: kgo, listen: 127.0.0.1:%d, brokers: single-port}\nupstream: {bootstrap: [%s]}\n", port, upstream)
		default:
			return "", 0, fmt.Errorf("unknown mode %q (want one of %s)", mode, strings.Join(kgoSuiteModes, ", "))
		}
		y.WriteString("admin: {listen: \"off\"}\n")
		return y.String(), port, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return e.gw, e.seed
}

// kgoResult matches a top-level test's result line of `go test -v`.
var kgoResult = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\S+)`)

// runKgoSuite runs the suite against seed and fails t for each top-level
// test that failed, with its output.
func runKgoSuite(t *testing.T, ctx context.Context, suite kgoSuite, seed string) {
	t.Helper()
	records := os.Getenv("KGO_TEST_RECORDS")
	if records == "" {
		records = "20000"
	}
	cmd := exec.CommandContext(ctx, suite.bin, "-test.v", "-test.timeout", "30m")
	cmd.Dir = suite.dir
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+seed, "KGO_TEST_RF=1", "KGO_TEST_RECORDS="+records, "KGO_LOG_LEVEL=none")
	start := time.Now()
	out, runErr := cmd.CombinedOutput()
	counts, failed := goTestResults(out)
	t.Logf("franz-go kgo suite against %s: %d passed, %d failed, %d skipped in %v",
		seed, counts["PASS"], counts["FAIL"], counts["SKIP"], time.Since(start).Round(time.Second))
	for _, name := range failed {
		t.Errorf("kgo %s failed:\n%s", name, kgoTestOutput(out, name))
	}
	if counts["PASS"] == 0 {
		t.Errorf("no kgo test passed (%v); the output's end:\n%s", runErr, tail(out, 40))
	} else if runErr != nil && len(failed) == 0 {
		t.Errorf("the kgo suite exited with %v and no failed test:\n%s", runErr, tail(out, 40))
	}
}

// goTestResults counts the top-level results of `go test -v` output
// (PASS, FAIL, SKIP) and names the failed tests.
func goTestResults(out []byte) (counts map[string]int, failed []string) {
	counts = map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if m := kgoResult.FindStringSubmatch(sc.Text()); m != nil {
			counts[m[1]]++
			if m[1] == "FAIL" {
				failed = append(failed, m[2])
			}
		}
	}
	return counts, failed
}

// kgoTestOutput is what `go test -v` printed between name's RUN line and
// its result (its subtests' and log lines included), at most 60 lines.
func kgoTestOutput(out []byte, name string) string {
	lines := strings.Split(string(out), "\n")
	var b []string
	in := false
	for _, l := range lines {
		switch {
		case l == "=== RUN   "+name:
			in = true
		case in && strings.HasPrefix(l, "--- FAIL: "+name+" "):
			return strings.Join(append(b, l), "\n")
		case in && len(b) < 60:
			b = append(b, l)
		}
	}
	return strings.Join(b, "\n")
}

// TestGoTestResults: the suite's verdict counts top-level tests only, and
// a failure is reported with its own output.
func TestGoTestResults(t *testing.T) {
	out := []byte(`=== RUN   TestA
--- PASS: TestA (0.01s)
=== RUN   TestB
=== RUN   TestB/sub
    b_test.go:9: boom
    --- FAIL: TestB/sub (0.00s)
--- FAIL: TestB (0.02s)
=== RUN   TestC
    c_test.go:3: needs SASL seeds
--- SKIP: TestC (0.00s)
FAIL
`)
	counts, failed := goTestResults(out)
	if counts["PASS"] != 1 || counts["FAIL"] != 1 || counts["SKIP"] != 1 || len(failed) != 1 || failed[0] != "TestB" {
		t.Fatalf("counts %v, failed %v; want one of each, TestB failed", counts, failed)
	}
	if got := kgoTestOutput(out, "TestB"); !strings.Contains(got, "boom") || !strings.HasSuffix(got, "--- FAIL: TestB (0.02s)") {
		t.Errorf("TestB's output:\n%s", got)
	}
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
