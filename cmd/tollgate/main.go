// Command tollgate is a Kafka-protocol gateway with a built-in broker.
//
//	tollgate                                  # built-in broker on 127.0.0.1:9092, data in ./tollgate-data
//	tollgate --upstream kafka-1:9092          # gateway in front of a cluster
//	tollgate --config gateway.yaml            # everything from one file (flags override it)
//	tollgate check-config gateway.yaml        # validate a file without starting
//	tollgate bench                            # the throughput/latency benchmark (see README)
//	tollgate tap                              # live traffic from a running gateway's admin server
//	tollgate users add alice --file users.yaml # SASL credentials for PLAIN/SCRAM
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate-kafka/tollgate/policy"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "check-config":
			return checkConfig(args[1:], stdout, stderr)
		case "bench":
			return benchCmd(args[1:], stdout, stderr)
		case "tap":
			return tapCmd(args[1:], stdout, stderr)
		case "users":
			return usersCmd(args[1:], stdout, stderr)
		case "version", "--version":
			fmt.Fprintln(stdout, "tollgate", version)
			return 0
		}
	}
	cfg, file, err := loadConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, file, stderr); err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	return 0
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func checkConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	print := fs.Bool("print", false, "print the effective configuration (defaults filled in)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tollgate check-config [--print] FILE")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	cfg, err := configsLoad(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *print {
		out, err := cfg.YAML()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		stdout.Write(out)
		return 0
	}
	if _, warnings, err := policy.Compile(cfg.Policy); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	} else {
		for _, w := range warnings {
			fmt.Fprintln(stdout, "warning:", w.String())
		}
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stdout, "warning:", w)
	}
	fmt.Fprintf(stdout, "%s: ok\n", fs.Arg(0))
	return 0
}

func newLogger(level, format string, w io.Writer) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	o := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}
