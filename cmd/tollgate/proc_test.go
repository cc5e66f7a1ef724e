//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// These helpers run the real tollgate binary as a child process, so the
// tests exercise exactly what an operator runs: flag parsing, the data
// directory lock, recovery on start, and a process death the Go runtime
// cannot intercept (SIGKILL).

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// tollgateBinary builds ./cmd/tollgate once per test run.
func tollgateBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "tollgate-bin-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "tollgate")
		cmd := exec.Command("go", "build", "-o", buildBin, ".")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// child is one running tollgate process.
type child struct {
	cmd  *exec.Cmd
	addr string // the listener's address, from the "listening" log line

	mu   sync.Mutex
	logs strings.Builder

	exited  chan struct{} // closed once Wait returned
	waitErr error
}

// errNoListen means the child exited before it logged its address.
var errNoListen = errors.New("tollgate exited before listening")

// startTollgate starts the binary on dataDir listening on listen
// ("127.0.0.1:0" for a kernel-chosen port) and waits for its address.
func startTollgate(t testing.TB, bin, dataDir, listen string, extra ...string) (*child, error) {
	t.Helper()
	return startTollgateArgs(t, bin, append([]string{"--listen", listen, "--data-dir", dataDir, "--admin", "off"}, extra...)...)
}

// startTollgateArgs is startTollgate with exactly args (a configuration
// file that names the listen address itself, for instance).
func startTollgateArgs(t testing.TB, bin string, args ...string) (*child, error) {
	t.Helper()
	c := &child{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start tollgate: %w", err)
	}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.logs.WriteString(line)
			c.logs.WriteByte('\n')
			c.mu.Unlock()
			if strings.Contains(line, "msg=listening") {
				for _, f := range strings.Fields(line) {
					if a, ok := strings.CutPrefix(f, "addr="); ok {
						select {
						case addrCh <- a:
						default:
						}
					}
				}
			}
		}
		io.Copy(io.Discard, stderr)
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	select {
	case c.addr = <-addrCh:
		return c, nil
	case <-c.exited:
		return c, fmt.Errorf("%w (%v): %s", errNoListen, c.waitErr, c.output())
	case <-time.After(20 * time.Second):
		c.kill()
		return c, fmt.Errorf("tollgate did not log its address within 20s: %s", c.output())
	}
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logs.String()
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

// stop asks for a clean shutdown (SIGTERM) and waits; it falls back to
// SIGKILL after 20 s.
func (c *child) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		return c.waitErr
	case <-time.After(20 * time.Second):
		c.kill()
		return errors.New("tollgate did not stop within 20s of SIGTERM")
	}
}

// restartOn starts tollgate again on the address a previous run chose, so
// clients keep their seed broker. The kernel chose the port; SO_REUSEADDR
// (Go's listener default) lets us bind it again at once. Another process
// could take the port in between, so a few attempts are made.
func restartOn(t testing.TB, bin, dataDir, addr string, extra ...string) *child {
	t.Helper()
	var last error
	for range 20 {
		c, err := startTollgate(t, bin, dataDir, addr, extra...)
		if err == nil {
			return c
		}
		last = err
		if !errors.Is(err, errNoListen) || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("restart tollgate on %s: %v", addr, last)
	return nil
}

func testClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTestTopic(t testing.TB, addr, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(testClient(t, addr))
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, resp.Err)
	}
}

// readAll reads every partition of topic from offset 0 up to its high
// watermark with a fresh client and returns the records per partition.
func readAll(t testing.TB, addr, topic string, partitions int32) [][]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(testClient(t, addr))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	out := make([][]*kgo.Record, partitions)
	want := map[int32]int64{}
	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		o, ok := ends.Lookup(topic, p)
		if !ok || o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", topic, p, o.Err)
		}
		want[p] = o.Offset
		offs[p] = kgo.NewOffset().At(0)
	}
	cl := testClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchMaxWait(100*time.Millisecond))
	done := func() bool {
		for p := int32(0); p < partitions; p++ {
			if int64(len(out[p])) < want[p] {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			got := make([]int, partitions)
			for p := range out {
				got[p] = len(out[p])
			}
			t.Fatalf("reading %s back: timed out (want end offsets %v, got %v records)", topic, want, got)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { out[r.Partition] = append(out[r.Partition], r) })
	}
	return out
}
