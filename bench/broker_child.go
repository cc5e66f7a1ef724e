package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
)

// The broker benchmark runs kfake, like tollgate, in a child process of its
// own, so its CPU time and RSS come from /proc apart from the client's.
// The child is this same executable re-executed with kfakeChildEnv set:
// init below sees it and turns the process into a kfake server before
// main (or a test's TestMain) runs. Any binary that links package bench
// (tollgate itself, the bench tests) can therefore serve as the child; no
// extra command or binary is needed.

// kfakeChildEnv carries the child's kfakeChildConfig as JSON.
const kfakeChildEnv = "TOLLGATE_BENCH_KFAKE_CHILD"

// kfakeChildConfig is what a kfake child serves.
type kfakeChildConfig struct {
	DataDir    string `json:"data_dir,omitempty"` // kfake.DataDir: persist to disk
	SyncWrites bool   `json:"sync_writes,omitempty"`
}

func init() {
	if v, ok := os.LookupEnv(kfakeChildEnv); ok {
		os.Exit(ServeKfakeChild(v, os.Stdin, os.Stdout, os.Stderr))
	}
}

// ServeKfakeChild runs a one-broker kfake with the JSON kfakeChildConfig
// in spec, prints "addr=HOST:PORT" on stdout and serves until stdin
// reaches EOF (the parent closed it or died). It returns the exit code.
func ServeKfakeChild(spec string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cfg kfakeChildConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintln(stderr, "kfake child: bad config:", err)
		return 2
	}
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(0)}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	if cfg.SyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(stderr, "kfake child:", err)
		return 1
	}
	defer c.Close()
	fmt.Fprintf(stdout, "addr=%s\n", c.ListenAddrs()[0])
	_, _ = io.Copy(io.Discard, stdin)
	return 0
}

// kfakeCommand is the command that starts a kfake child.
func kfakeCommand(cfg kfakeChildConfig) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for the kfake child: %w", err)
	}
	spec, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kfake child config: %w", err)
	}
	cmd := exec.Command(exe) // init serves kfake before flags are parsed
	cmd.Env = append(os.Environ(), kfakeChildEnv+"="+string(spec))
	return cmd, nil
}

// parseAddrLine extracts HOST:PORT from a line holding "addr=HOST:PORT".
func parseAddrLine(line string) (string, bool) {
	for _, f := range strings.Fields(line) {
		if a, ok := strings.CutPrefix(f, "addr="); ok {
			return a, true
		}
	}
	return "", false
}
