package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
)

// ChildFlag is the first argument of a child invocation: a front end that
// sees it passes its arguments to ServeChild instead of running a benchmark.
// The relay and the gateway run in child processes so that their CPU time
// and RSS can be read from /proc apart from the client's and kfake's, which
// share the benchmark process.
const ChildFlag = "--child"

// childInfo is the one JSON line a child prints once it is listening.
type childInfo struct {
	Role      Path              `json:"role"`
	PID       int               `json:"pid"`
	Bootstrap string            `json:"bootstrap,omitempty"` // the gateway's bootstrap port
	Routes    map[string]string `json:"routes,omitempty"`    // relay: upstream -> relay port
	Admin     string            `json:"admin,omitempty"`     // the gateway's admin server (--admin-listen only)
}

// childExit is the JSON line a gateway child started with --config prints
// after it has shut down: what its metrics counted over its whole life.
type childExit struct {
	Stats *ChildStats `json:"stats"`
}

// ServeChild is the child side: args are
//
//	--child relay|tollgate --upstream host:port[,host:port...] [--tcp-congestion NAME] [--cpuprofile FILE] [--log-level LEVEL]
//	--child tollgate --config FILE [--no-metrics] [--cpuprofile FILE] [--admin-listen host:port]
//
// It starts the relay or the gateway in front of the upstream, prints one
// JSON line describing where it listens, and serves until stdin reaches
// EOF (the parent closed it or died). With --config the gateway is wired
// from the file the way `tollgate --config FILE` wires it (metrics, audit
// trail, policy; see startConfigured), the upstream comes from the file,
// and after shutdown a second JSON line reports the metrics' counters.
func ServeChild(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tollgate-bench "+ChildFlag, flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("child", "", "relay | tollgate")
	upstream := fs.String("upstream", "", "comma-separated upstream broker addresses")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of this process here")
	logLevel := fs.String("log-level", "warn", "debug | info | warn | error")
	config := fs.String("config", "", "gateway only: serve this configuration file (upstream, policy, audit)")
	noMetrics := fs.Bool("no-metrics", false, "with --config: detach the metrics hooks (a benchmark-only variant; the product has no such switch)")
	adminListen := fs.String("admin-listen", "", "with --config: serve the admin server (/metrics) here, e.g. 127.0.0.1:0 (default: off)")
	congestion := fs.String("tcp-congestion", "", "without --config: the TCP congestion control of the relay's or the gateway's own sockets (default: the host's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg *configs.Config
	if *config != "" {
		if Path(*role) != Gateway {
			return fmt.Errorf("child: --config is for the %s child, not %q", Gateway, *role)
		}
		if *congestion != "" {
			return errors.New("child: with --config, limits.tcp_congestion_control is the file's")
		}
		var err error
		if cfg, err = childConfig(*config, *upstream); err != nil {
			return err
		}
		if !isFlagSet(fs, "log-level") {
			*logLevel = cfg.Log.Level
		}
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("log level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv})).With("bench_child", *role)
	upstreams := splitList(*upstream)
	if cfg == nil && len(upstreams) == 0 {
		return errors.New("child: --upstream is empty")
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return fmt.Errorf("create cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("start cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var (
		stop    func()
		info    childInfo
		err     error
		gateway *configured
	)
	if cfg != nil {
		gateway, err = startConfigured(cfg, !*noMetrics, *adminListen, log)
		if err == nil {
			info = gateway.info
			stop = func() {} // the gateway is stopped below, to report its counters
		}
	} else {
		stop, info, err = startMiddle(Path(*role), upstreams, *congestion, log)
	}
	if err != nil {
		return err
	}
	defer stop()
	info.PID = os.Getpid()
	line, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("encode child info: %w", err)
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return fmt.Errorf("write child info: %w", err)
	}
	_, err = io.Copy(io.Discard, stdin)
	if gateway != nil {
		line, jerr := json.Marshal(childExit{Stats: gateway.stop()})
		if jerr != nil {
			return fmt.Errorf("encode child stats: %w", jerr)
		}
		if _, werr := fmt.Fprintf(stdout, "%s\n", line); werr != nil {
			return fmt.Errorf("write child stats: %w", werr)
		}
	}
	return err
}

func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// startMiddle starts what sits between the client and kfake on path role,
// in this process. The gateway is assembled by package gateway from a
// configuration, as `tollgate --upstream ...` assembles it (metrics on,
// audit off, no policy rules): what is measured is what ships.
// congestion, if set, is the TCP congestion control of the relay's or the
// gateway's own client and upstream sockets (Options.TCPCongestion).
func startMiddle(role Path, upstreams []string, congestion string, log *slog.Logger) (stop func(), info childInfo, err error) {
	info.Role = role
	switch role {
	case Relay:
		r, routes, err := startRelay(upstreams, congestion, log)
		if err != nil {
			return nil, info, err
		}
		info.Routes = routes
		return r.Close, info, nil
	case Gateway:
		cfg, err := gatewayConfig(upstreams, congestion)
		if err != nil {
			return nil, info, err
		}
		g, err := startConfigured(cfg, true, "", log)
		if err != nil {
			return nil, info, err
		}
		info.Bootstrap = g.info.Bootstrap
		return func() { g.stop() }, info, nil
	}
	return nil, info, fmt.Errorf("child role %q: want %s or %s", role, Relay, Gateway)
}

// child is a running relay or gateway process, seen from the parent.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	info  childInfo
	done  chan error // the result of cmd.Wait
	// exit is the child's last line (--config children only), valid once
	// done has delivered.
	exit childExit
	// signal, if set, is how stop asks the process to exit (a program
	// that is not this one: the TLS suite's haproxy); otherwise stop
	// closes stdin.
	signal os.Signal
}

// spawnChild starts the child for role and waits for its info line.
func spawnChild(command func(args []string) *exec.Cmd, role Path, upstreams []string, congestion, cpuprofile string, stderr io.Writer) (*child, error) {
	args := []string{ChildFlag, string(role), "--upstream", strings.Join(upstreams, ",")}
	if congestion != "" {
		args = append(args, "--tcp-congestion", congestion)
	}
	if cpuprofile != "" {
		args = append(args, "--cpuprofile", cpuprofile)
	}
	return spawnChildArgs(command, role, args, stderr)
}

// spawnChildArgs starts a child with the full argument list args (ChildFlag
// first) and waits for its info line.
func spawnChildArgs(command func(args []string) *exec.Cmd, role Path, args []string, stderr io.Writer) (*child, error) {
	cmd := command(args)
	cmd.Stderr = stderr
	dieWithParent(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%s child stdin: %w", role, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%s child stdout: %w", role, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s child: %w", role, err)
	}
	c := &child{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		// Keep the pipe drained until exit; a gateway child's last line
		// is its counters.
		for sc.Scan() {
			var e childExit
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Stats != nil {
				c.exit = e
			}
		}
		io.Copy(io.Discard, stdout)
		c.done <- cmd.Wait()
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			c.stop()
			return nil, fmt.Errorf("%s child exited before it was ready (its stderr says why)", role)
		}
		if err := json.Unmarshal([]byte(line), &c.info); err != nil {
			c.stop()
			return nil, fmt.Errorf("%s child info %q: %w", role, line, err)
		}
	case <-time.After(30 * time.Second):
		c.stop()
		return nil, fmt.Errorf("%s child not ready after 30s", role)
	}
	if c.info.Role != role || c.info.PID != cmd.Process.Pid {
		c.stop()
		return nil, fmt.Errorf("%s child: unexpected info %+v (pid %d)", role, c.info, cmd.Process.Pid)
	}
	return c, nil
}

func (c *child) usage() (procUsage, error) { return readProc(c.cmd.Process.Pid) }

// stop closes the child's stdin, which asks it to shut down (and flush its
// profile), and kills it if it has not exited within 15 s.
func (c *child) stop() error {
	c.stdin.Close()
	if c.signal != nil {
		c.cmd.Process.Signal(c.signal)
	}
	select {
	case err := <-c.done:
		var ee *exec.ExitError
		if c.signal != nil && errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == c.signal {
				err = nil // stopped as asked
			}
		}
		if err != nil {
			return fmt.Errorf("%s child: %w", c.info.Role, err)
		}
		return nil
	case <-time.After(15 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("%s child did not exit within 15s; killed", c.info.Role)
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// gatewayConfig is the configuration of the gateway path: tollgate's
// defaults with the upstream set, one listener on a kernel-chosen port
// whose broker ports are kernel-chosen too, and the per-address
// connection caps lifted (every benchmark client dials from 127.0.0.1).
// childConfig is the gateway child's configuration, taken as tollgate
// takes its own: the file decoded, the --upstream flag overlaid, the
// result validated once.
func childConfig(file, upstream string) (*configs.Config, error) {
	cfg, err := configs.Read(file)
	if err != nil {
		return nil, fmt.Errorf("child: %w", err)
	}
	if upstream != "" {
		cfg.Upstream = configs.NewUpstream(splitList(upstream)...)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("child: %w", err)
	}
	return cfg, nil
}

func gatewayConfig(upstreams []string, congestion string) (*configs.Config, error) {
	cfg := configs.Default()
	cfg.Limits.TCPCongestionControl = congestion
	base := 0
	cfg.Listeners[0].Name = "bench"
	cfg.Listeners[0].Listen = "127.0.0.1:0"
	cfg.Listeners[0].BrokerPortBase = &base
	cfg.Upstream = configs.NewUpstream(upstreams...)
	cfg.Limits.MaxConnectionsPerAddress = 0
	cfg.Limits.ConnectionRatePerAddress = 0
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway configuration: %w", err)
	}
	return cfg, nil
}
