// Package console is tollgate's Kafka command-line tools: topic, produce,
// consume and group, built on franz-go's kgo and kadm. They work against
// any Kafka: the built-in broker, a tollgate gateway, or a cluster
// directly. cmd/tollgate only wires them in; everything else is here.
//
// Every command writes its results to stdout and, on failure, one line
// naming what failed to stderr, and returns one of the exit codes below,
// which scripts can rely on.
package console

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/tollgate-kafka/tollgate/auth"
	"github.com/tollgate-kafka/tollgate/configs"
)

// Exit codes.
const (
	ExitOK          = 0 // everything asked for was done
	ExitFailed      = 1 // the cluster refused or failed a request (unknown topic, denied, partial failure)
	ExitUsage       = 2 // bad flags, arguments or offset syntax; nothing was sent
	ExitUnreachable = 3 // no broker could be reached
)

// DefaultBrokers is where the commands connect without -b: the built-in
// broker's default listener.
const DefaultBrokers = "127.0.0.1:9092"

// Output formats for --format.
const (
	formatText = "text"
	formatJSON = "json"
	formatYAML = "yaml"
)

// usageError is a mistake in the command line: nothing was sent.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// errUnreachable marks a failure to reach any broker.
var errUnreachable = errors.New("cannot reach any broker")

// exitCode classifies an error for the process exit status.
func exitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue), errors.Is(err, flag.ErrHelp):
		return ExitUsage
	case errors.Is(err, errUnreachable):
		return ExitUnreachable
	}
	return ExitFailed
}

// finish prints err as one line prefixed with the command name and
// returns the exit code.
func finish(stderr io.Writer, cmd string, err error) int {
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	fmt.Fprintf(stderr, "tollgate %s: %s\n", cmd, msg)
	return exitCode(err)
}

// common holds the connection and output flags every command takes.
type common struct {
	brokers string
	format  string
	timeout time.Duration
	tls     bool
	tlsCfg  configs.UpstreamTLS
	sasl    configs.UpstreamSASL
	reasons *produceReasons // produce: read the broker's reasons off the connections
	profile string          // --profile
	fs      *flag.FlagSet   // to tell given flags from defaults (resolve)
}

// register adds the common flags to fs. Their names follow the upstream
// configuration's tls and sasl sections (tls.ca -> --tls-ca, ...).
func (c *common) register(fs *flag.FlagSet) {
	c.fs = fs
	fs.StringVar(&c.brokers, "brokers", "", "comma-separated seed brokers (default: $"+envBrokers+", the profile's brokers, or "+DefaultBrokers+")")
	fs.StringVar(&c.brokers, "b", "", "shorthand for --brokers")
	fs.StringVar(&c.profile, "profile", "", "console profile: brokers, tls and sasl (default: $"+envProfile+", or ~/.config/tollgate/console.yaml if it exists)")
	fs.StringVar(&c.format, "format", formatText, "output: text | json | yaml")
	fs.DurationVar(&c.timeout, "timeout", 15*time.Second, "bound for the whole command (a consumer without -n or -e runs until interrupted)")
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS (implied by any --tls-* flag)")
	fs.StringVar(&c.tlsCfg.CA, "tls-ca", "", "CA bundle to verify the brokers with (default: system roots)")
	fs.StringVar(&c.tlsCfg.Cert, "tls-cert", "", "client certificate (mTLS)")
	fs.StringVar(&c.tlsCfg.Key, "tls-key", "", "client certificate key (mTLS)")
	fs.StringVar(&c.tlsCfg.ServerName, "tls-server-name", "", "name to verify in broker certificates")
	fs.BoolVar(&c.tlsCfg.InsecureSkipVerify, "tls-insecure-skip-verify", false, "do not verify broker certificates (testing only)")
	fs.StringVar(&c.sasl.Mechanism, "sasl-mechanism", "", "PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER")
	fs.StringVar(&c.sasl.Username, "sasl-username", "", "SASL user (PLAIN, SCRAM)")
	fs.StringVar(&c.sasl.PasswordFile, "sasl-password-file", "", "file holding the SASL password")
	fs.StringVar(&c.sasl.TokenFile, "sasl-token-file", "", "file holding the OAUTHBEARER token")
}

// check resolves the connection settings (flags, environment, profile)
// and checks them.
func (c *common) check(std IO) error {
	if err := c.resolve(std.Getenv); err != nil {
		return err
	}
	switch c.format {
	case formatText, formatJSON, formatYAML:
	default:
		return usagef("--format %q: want text, json or yaml", c.format)
	}
	if len(c.seeds()) == 0 {
		return usagef("--brokers is empty")
	}
	return nil
}

func (c *common) seeds() []string {
	var out []string
	for _, b := range strings.Split(c.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// clientOpts are the kgo options for the connection flags.
func (c *common) clientOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.seeds()...),
		kgo.ClientID("tollgate-console"),
		kgo.DialTimeout(5 * time.Second),
		kgo.RetryTimeout(c.timeout),
	}
	t := c.tlsCfg
	var tc *tls.Config
	var err error
	if c.tls || t != (configs.UpstreamTLS{}) {
		if tc, err = auth.ClientTLS(&t); err != nil {
			return nil, usagef("%v", err)
		}
	}
	switch {
	case c.reasons != nil:
		opts = append(opts, kgo.Dialer(c.reasons.dialer(tc)))
	case tc != nil:
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.sasl.Mechanism != "" {
		m, err := auth.ClientMechanism(&c.sasl)
		if err != nil {
			return nil, usagef("--sasl-mechanism: %v", err)
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// connect builds a client and checks that a broker answers, so an
// unreachable cluster is one clear line rather than retries until the
// timeout.
func (c *common) connect(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := c.clientOpts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, usagef("%v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, min(c.timeout, 10*time.Second))
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("%w at %s: %v", errUnreachable, c.brokers, err)
	}
	return cl, nil
}

func (c *common) admin(ctx context.Context) (*kadm.Client, error) {
	cl, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// emit writes v as JSON or YAML, or calls text for the text format.
func (c *common) emit(w io.Writer, v any, text func(io.Writer) error) error {
	switch c.format {
	case formatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case formatYAML:
		out, err := toYAML(v)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	return text(w)
}

// toYAML marshals v through JSON, so both formats use the same field
// names.
func toYAML(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil, err
	}
	return yaml.Marshal(generic)
}

// parseArgs parses flags wherever they appear among the positional
// arguments (`topic create NAME -p 3` as well as `topic create -p 3
// NAME`); everything after "--" is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	// The flag package prints the whole usage on any error; a mistake
	// gets one line instead (from finish), and only -h gets the usage.
	help := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = help }()
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			help()
			return nil, flag.ErrHelp
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// newFlagSet makes a flag set whose -h prints usage (with examples) to
// stderr.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintln(stderr, strings.TrimSpace(usage))
		fmt.Fprintln(stderr, "\nflags:")
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// keyValue splits "k=v".
func keyValue(s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", usagef("%q: want key=value", s)
	}
	return k, v, nil
}

// withTimeout derives the command's context.
func (c *common) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

// stdinOr lets tests substitute stdin.
func stdinOr(r io.Reader) io.Reader {
	if r != nil {
		return r
	}
	return os.Stdin
}

// emitEach writes descriptions as emit does: one object (a list of more
// than one) in JSON and YAML, and in text each one by write, a blank line
// between them.
func emitEach[T any](c *common, w io.Writer, items []T, write func(io.Writer, T) error) error {
	var v any = items
	if len(items) == 1 {
		v = items[0]
	}
	return c.emit(w, v, func(w io.Writer) error {
		for i, d := range items {
			if i > 0 {
				fmt.Fprintln(w)
			}
			if err := write(w, d); err != nil {
				return err
			}
		}
		return nil
	})
}
