package console

import (
	"context"
	"flag"
	"fmt"
	"strings"
)

// subcommand is one subcommand of a command that has them (topic,
// group, quota, user): its name and what it runs with the parsed
// common and command flags and the positional arguments.
type subcommand[F any] struct {
	name string
	run  func(context.Context, *common, *F, []string, IO) error
}

// runSubcommand is what those commands share: help, picking the
// subcommand, the common flags and the command's own (flags registers
// them for sub; check, if not nil, validates them after parsing), then
// the run and its exit code.
func runSubcommand[F any](ctx context.Context, cmd, usage string, args []string, std IO, subs []subcommand[F],
	flags func(fs *flag.FlagSet, sub string) (f *F, check func() error)) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(std.Err, strings.TrimSpace(usage))
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	sub, args := args[0], args[1:]
	var run func(context.Context, *common, *F, []string, IO) error
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
		if s.name == sub {
			run = s.run
		}
	}
	if run == nil {
		return finish(std.Err, cmd, usagef("unknown subcommand %q (%s)", sub, strings.Join(names, ", ")))
	}
	name := cmd + " " + sub
	var c common
	fs := newFlagSet(name, usage, std.Err)
	c.register(fs)
	f, check := flags(fs, sub)
	pos, err := parseArgs(fs, args)
	if err == nil {
		err = c.check(std)
	}
	if err == nil && check != nil {
		err = check()
	}
	if err == nil {
		err = run(ctx, &c, f, pos, std)
	}
	return finish(std.Err, name, err)
}
