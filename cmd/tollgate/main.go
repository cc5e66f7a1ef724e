// Command tollgate is a Kafka-protocol gateway with a built-in broker.
//
//	tollgate                                  # built-in broker on 127.0.0.1:9092, data in ./tollgate-data
//	tollgate --upstream kafka-1:9092          # gateway in front of a cluster
//	tollgate --config gateway.yaml            # everything from one file (flags override it)
//	tollgate check-config gateway.yaml        # validate a file without starting
//	tollgate-bench                            # the benchmark, its own command (cmd/tollgate-bench)
//	tollgate tap                              # live traffic from a running gateway's admin server
//	tollgate users add alice --file users.yaml # SASL credentials for PLAIN/SCRAM
//	tollgate topic|produce|consume|group|cluster|acl ...  # Kafka console tools (package console)
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

	"github.com/tollgate-kafka/tollgate/console"
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
			return benchMoved(stderr)
		case "tap":
			return tapCmd(args[1:], stdout, stderr)
		case "users":
			return usersCmd(args[1:], stdout, stderr)
		case "topic", "produce", "consume", "group", "cluster", "metadata", "acl", "quota", "user":
			return consoleCmd(args[0], args[1:], stdout, stderr)
		case "version", "--version":
			fmt.Fprintln(stdout, versionString())
			return 0
		case "help", "-h", "-help", "--help":
			// The command list, then serve's flags, on stdout.
			_, _, _ = loadConfig([]string{"-h"}, stdout)
			return 0
		}
	}
	cfg, src, err := loadConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, src, stderr); err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	return 0
}

// consoleCmd runs one of the console tools until it finishes or the
// process is interrupted.
func consoleCmd(name string, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	std := console.IO{Out: stdout, Err: stderr}
	switch name {
	case "topic":
		return console.Topic(ctx, args, std)
	case "produce":
		return console.Produce(ctx, args, std)
	case "consume":
		return console.Consume(ctx, args, std)
	case "cluster", "metadata":
		return console.Cluster(ctx, args, std)
	case "acl":
		return console.ACL(ctx, args, std)
	case "quota":
		return console.Quota(ctx, args, std) // console/quota.go
	case "user":
		// console/user.go; the prompt is users.go's.
		console.PromptPassword = func(name string) (string, error) { return readPassword(name, false, os.Stdin, stderr) }
		return console.User(ctx, args, std)
	}
	return console.Group(ctx, args, std)
}

// helpText is `tollgate --help`: every command.
const helpText = `tollgate: a Kafka-protocol gateway with a built-in broker.

usage: tollgate [flags]                   serve (the built-in broker on 127.0.0.1:9092 without flags)
       tollgate COMMAND [flags] [args]

commands:
  (none)        serve: tollgate --upstream kafka-1:9092 --listen 0.0.0.0:9092 (its flags are below)
  check-config  validate a configuration file: tollgate check-config FILE [--print]; --diff RUNNING NEW
  topic         list, describe, create, delete, alter-config, add-partitions, trim topics
  produce       one record per stdin line: echo hi | tollgate produce orders
  consume       print records: tollgate consume orders -o -10 -e
  group         list, describe (lag), seek, delete consumer groups
  cluster       brokers, controller, topics and partitions, like kcat -L (also: metadata)
  acl           list, create, delete ACLs: tollgate acl create --principal User:alice --operation read --topic orders
  tap           live traffic from a running gateway's admin server
  users         SASL users file: tollgate users add alice --file users.yaml
  quota         client quotas over the Kafka API: tollgate quota set --user alice producer_byte_rate=1048576
  user          SCRAM credentials over the Kafka API: tollgate user set alice
  bench         moved: the benchmarks are the tollgate-bench command (see README)
  version       the module version and VCS revision of this binary
  help          this text

Every command takes -h for its flags and examples. The console commands
(topic, produce, consume, group, cluster, acl, quota,
user) take -b/--brokers (default:
$TOLLGATE_BROKERS, the profile's brokers, or 127.0.0.1:9092), --profile
(default: $TOLLGATE_PROFILE or ~/.config/tollgate/console.yaml), --tls-*,
--sasl-* and --format text|json|yaml, and exit 0 on success, 1 when the
cluster refused, 2 on a usage error, 3 when no broker is reachable.
`

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
