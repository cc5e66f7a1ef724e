package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/gateway"
)

// serveFlags are the flags of `tollgate` (serve): a front for the same
// schema as the file, overriding it.
type serveFlags struct {
	fs                               *flag.FlagSet
	file, upstream, upProxy, listen  *string
	advertise, dataDir, fsync, admin *string
	logLevel, logFormat              *string
	portBase                         *int
}

func newServeFlags(stderr io.Writer) *serveFlags {
	fs := flag.NewFlagSet("tollgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &serveFlags{
		fs:        fs,
		file:      fs.String("config", "", "YAML configuration file (flags override it)"),
		upstream:  fs.String("upstream", "", "comma-separated upstream bootstrap brokers (upstream.bootstrap); empty: the built-in broker"),
		upProxy:   fs.String("upstream-proxy", "", "forward proxy for every upstream connection: socks5://[user:pass@]host:port, http://… or https://… (upstream.proxy)"),
		listen:    fs.String("listen", "", "bind address of the first listener (default "+configs.DefaultListen+")"),
		advertise: fs.String("advertise", "", "host or host:port clients are told to connect to (listeners[0].advertise; a port behind NAT moves every advertised port by the same offset)"),
		portBase:  fs.Int("broker-port-base", -1, "port of upstream node 0; node N is served at base+N (default: listen port + 1; 0: any free port)"),
		dataDir:   fs.String("data-dir", "", "built-in broker data directory (default "+configs.DefaultDataDir+")"),
		fsync:     fs.String("fsync", "", "built-in broker durability: always | interval | never (default "+configs.FsyncAlways+")"),
		admin:     fs.String("admin", "", "admin HTTP address for /metrics /healthz /readyz, or off"),
		logLevel:  fs.String("log-level", "", "debug | info | warn | error"),
		logFormat: fs.String("log-format", "", "text | json"),
	}
	fs.Usage = func() {
		fmt.Fprint(stderr, helpText)
		fmt.Fprintln(stderr, "\nflags (serve):")
		fs.PrintDefaults()
	}
	return f
}

// configSource is where serve's configuration comes from: a file ("" for
// none) and the flags overlaid on it. A reload takes it again.
type configSource struct {
	file    string
	overlay func(*configs.Config) error
}

// load is effectiveConfig of the source.
func (s configSource) load() (*configs.Config, error) { return effectiveConfig(s.file, s.overlay) }

// loadConfig builds the configuration from an optional file and the flags.
// Flags are a front for the same schema and override the file.
func loadConfig(args []string, stderr io.Writer) (*configs.Config, configSource, error) {
	f := newServeFlags(stderr)
	if err := f.fs.Parse(args); err != nil {
		return nil, configSource{}, err
	}
	if f.fs.NArg() > 0 {
		return nil, configSource{}, fmt.Errorf("unexpected argument %q (commands: check-config, topic, produce, consume, group, tap, users, version, help)", f.fs.Arg(0))
	}
	src := configSource{file: *f.file, overlay: f.overlay}
	cfg, err := src.load()
	if err != nil {
		return nil, configSource{}, err
	}
	return cfg, src, nil
}

// effectiveConfig is the one way from a file ("" for none) and an overlay
// (the flags; nil for none) to a validated configuration, which serve and
// check-config both take before gateway.Provision: the file is decoded,
// the overlay applied, and the effective configuration validated once. A
// file value a flag replaces is therefore not checked: what runs is what
// is validated.
func effectiveConfig(file string, overlay func(*configs.Config) error) (*configs.Config, error) {
	cfg := configs.Default()
	if file != "" {
		var err error
		if cfg, err = configs.Read(file); err != nil {
			return nil, err
		}
	}
	if overlay != nil {
		if err := overlay(cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// overlay writes the flags that were given over cfg.
func (f *serveFlags) overlay(cfg *configs.Config) error {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["upstream"] {
		var bs []string
		for _, b := range strings.Split(*f.upstream, ",") {
			if b = strings.TrimSpace(b); b != "" {
				bs = append(bs, b)
			}
		}
		cfg.Upstream = configs.NewUpstream(bs...)
	}
	if set["upstream-proxy"] {
		if cfg.Upstream == nil {
			return fmt.Errorf("--upstream-proxy needs an upstream (--upstream or upstream.bootstrap)")
		}
		cfg.Upstream.Proxy = *f.upProxy
	}
	// flag name -> (the field it overrides, the flag's value)
	strs := map[string][2]*string{
		"data-dir": {&cfg.Broker.DataDir, f.dataDir}, "fsync": {&cfg.Broker.Fsync, f.fsync},
		"admin": {&cfg.Admin.Listen, f.admin}, "log-level": {&cfg.Log.Level, f.logLevel},
		"log-format": {&cfg.Log.Format, f.logFormat},
	}
	// With no listener (listeners: []) the listener flags have nothing to
	// override; Validate reports the empty list.
	if l := cfg.Listeners; len(l) > 0 {
		strs["listen"] = [2]*string{&l[0].Listen, f.listen}
		strs["advertise"] = [2]*string{&l[0].Advertise, f.advertise}
		if set["broker-port-base"] {
			l[0].BrokerPortBase = f.portBase
		}
	}
	for name, p := range strs {
		if set[name] {
			*p[0] = *p[1]
		}
	}
	return nil
}

// serve runs the gateway until ctx is cancelled, then drains. src.file
// is the configuration file ("" when there is none), re-read (with the
// flags overlaid again) on SIGHUP and when it changes, to apply what can
// be applied without dropping connections.
func serve(ctx context.Context, cfg *configs.Config, src configSource, logOut io.Writer) error {
	log := newLogger(cfg.Log.Level, cfg.Log.Format, logOut)
	slog.SetDefault(log)
	g, err := gateway.New(cfg, log)
	if err != nil {
		return err
	}
	if err := g.Start(ctx); err != nil {
		g.Close(context.Background())
		return err
	}
	if src.file != "" {
		go reloadLoop(ctx, src, g, log)
	}
	<-ctx.Done()
	log.Info("shutting down", "drain_timeout", cfg.Limits.DrainTimeout.D())
	if err := g.Close(context.Background()); err != nil {
		log.Warn("shutdown incomplete", "err", err)
	}
	return nil
}

// reloadLoop re-reads the configuration file on SIGHUP and when its
// modification time or size changes (checked every reloadPoll), and
// applies it (gateway.ReloadFrom: the policy, connection limits, audit
// level, filter and file size, upstream TLS, and a re-read of every
// certificate and users file; other changed fields are logged and counted
// as needing a restart). An invalid file is refused with its errors
// logged and counted; the configuration in force stays.
func reloadLoop(ctx context.Context, src configSource, g *gateway.Gateway, log *slog.Logger) {
	file := src.file
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	last := fileStamp(file)
	t := time.NewTicker(reloadPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			log.Info("SIGHUP: reloading configuration", "file", file)
		case <-t.C:
			st := fileStamp(file)
			if st == last {
				continue
			}
			last = st
			log.Info("configuration file changed: reloading", "file", file)
		}
		// ReloadFrom counts the result and logs what it applied and what
		// needs a restart.
		if err := g.ReloadFrom(src.load); err != nil {
			log.Error("configuration reload refused; the configuration in force stays", "err", err)
		}
		last = fileStamp(file) // what SIGHUP read is not read again at the next poll
	}
}

const reloadPoll = 2 * time.Second

func fileStamp(file string) string {
	st, err := os.Stat(file)
	if err != nil {
		return ""
	}
	return fmt.Sprint(st.ModTime().UnixNano(), st.Size())
}
