package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/gateway"
)

// check-config exit codes.
const (
	checkOK          = 0 // valid (with --diff: a reload applies every change, or there is none)
	checkInvalid     = 1 // a file does not load, validate or provision
	checkUsage       = 2
	checkNeedRestart = 3 // --diff: valid, but some change takes effect only at a restart
)

const checkConfigUsage = `usage: tollgate check-config FILE [--print]
       tollgate check-config --diff RUNNING.yaml NEW.yaml

Validates FILE and provisions it as serve would (TLS files, users files,
the policy), without opening sockets. --print writes the effective
configuration (defaults filled in). --diff compares the configuration
running (RUNNING.yaml) with NEW.yaml field by field and says, for each
changed field, "applied on reload" or "needs a restart".

Exit: 0 valid (--diff: every change is applied on reload, or there is
none); 1 invalid; 2 usage; 3 (--diff) valid, but some change needs a
restart.
`

func checkConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	print := fs.Bool("print", false, "print the effective configuration (defaults filled in)")
	diff := fs.Bool("diff", false, "compare RUNNING.yaml with NEW.yaml: what a reload applies, what needs a restart")
	fs.Usage = func() {
		fmt.Fprint(stderr, checkConfigUsage)
		fs.PrintDefaults()
	}
	files, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return checkOK
	}
	if err != nil {
		return checkUsage
	}
	want := 1
	if *diff {
		want = 2
	}
	if len(files) != want || *diff && *print {
		fs.Usage()
		return checkUsage
	}
	if *diff {
		return checkDiff(files[0], files[1], stdout, stderr)
	}
	cfg, err := effectiveConfig(files[0], nil)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return checkInvalid
	}
	if *print {
		out, err := cfg.YAML()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return checkInvalid
		}
		stdout.Write(out)
		return checkOK
	}
	if !provisions(cfg, stdout, stderr) {
		return checkInvalid
	}
	fmt.Fprintf(stdout, "%s: ok\n", files[0])
	return checkOK
}

// provisions runs the same provisioning as serve, up to opening sockets
// and files: TLS configs, principal mappers, SASL servers, the compiled
// policy, the broker options. Warnings go to stdout, an error to stderr.
func provisions(cfg *configs.Config, stdout, stderr io.Writer) bool {
	plan, err := gateway.Provision(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return false
	}
	plan.Close()
	for _, w := range plan.Warnings {
		fmt.Fprintln(stdout, "warning:", w.String())
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stdout, "warning:", w)
	}
	return true
}

// checkDiff validates both files (NEW is provisioned too) and prints each
// field NEW changes, as a reload of the gateway running RUNNING would
// treat it (gateway.Changes).
func checkDiff(runningFile, nextFile string, stdout, stderr io.Writer) int {
	running, err := effectiveConfig(runningFile, nil)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return checkInvalid
	}
	next, err := effectiveConfig(nextFile, nil)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return checkInvalid
	}
	if !provisions(next, stdout, stderr) {
		return checkInvalid
	}
	changes := gateway.Changes(running, next)
	if len(changes) == 0 {
		fmt.Fprintf(stdout, "%s: ok, no change from %s\n", nextFile, runningFile)
		return checkOK
	}
	code := checkOK
	for _, c := range changes {
		how := "applied on reload"
		if !c.Live {
			how, code = "needs a restart", checkNeedRestart
		}
		fmt.Fprintf(stdout, "%s: %s\n", c.Field, how)
	}
	return code
}
