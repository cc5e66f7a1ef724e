package console

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

const userUsage = `
usage: tollgate user list|set|delete [flags] [NAME ...]

  tollgate user list                                      # users with SCRAM credentials, mechanisms, iterations
  tollgate user set alice                                 # asks for the password (no echo)
  printf '%s\n' "$PW" | tollgate user set alice --password-stdin --mechanism SCRAM-SHA-256
  tollgate user delete alice                              # every mechanism alice has
  tollgate user delete alice --mechanism SCRAM-SHA-256

SCRAM credentials through the Kafka API (KIP-554: DescribeUserScramCredentials,
AlterUserScramCredentials): the password is salted and hashed here, only the
salted password is sent. Works against any Kafka with SCRAM, and a tollgate
gateway whose SASL listener has a users_file (it writes that file).
Exit codes: 0 done, 1 the cluster refused (unknown user, denied, ...), 2 usage, 3 unreachable.`

// PromptPassword asks for a password on a terminal; cmd/tollgate sets it
// (the same prompt as "tollgate users add"). Nil: --password-stdin is
// required.
var PromptPassword func(name string) (string, error)

const maxUserPasswordBytes = 4096

type userFlags struct {
	mechanism  string
	iterations int
	stdin      bool
}

// User is `tollgate user`.
func User(ctx context.Context, args []string, std IO) int {
	return runSubcommand(ctx, "user", userUsage, args, std, []subcommand[userFlags]{
		{"list", userList}, {"set", userSet}, {"delete", userDelete},
	}, func(fs *flag.FlagSet, sub string) (*userFlags, func() error) {
		var f userFlags
		registerUser(fs, sub, &f)
		return &f, nil
	})
}

func registerUser(fs *flag.FlagSet, sub string, f *userFlags) {
	switch sub {
	case "set":
		fs.StringVar(&f.mechanism, "mechanism", "SCRAM-SHA-512", "SCRAM-SHA-512 | SCRAM-SHA-256 | both")
		fs.IntVar(&f.iterations, "iterations", 8192, "SCRAM iterations (4096-16384)")
		fs.BoolVar(&f.stdin, "password-stdin", false, "read the password from the first line of standard input")
	case "delete":
		fs.StringVar(&f.mechanism, "mechanism", "", "SCRAM-SHA-512 | SCRAM-SHA-256 (default: every mechanism the user has)")
	}
}

func parseMechanisms(s string) ([]kadm.ScramMechanism, error) {
	switch strings.ToUpper(s) {
	case "SCRAM-SHA-512":
		return []kadm.ScramMechanism{kadm.ScramSha512}, nil
	case "SCRAM-SHA-256":
		return []kadm.ScramMechanism{kadm.ScramSha256}, nil
	case "BOTH":
		return []kadm.ScramMechanism{kadm.ScramSha512, kadm.ScramSha256}, nil
	}
	return nil, usagef("--mechanism %q: want SCRAM-SHA-512, SCRAM-SHA-256 or both", s)
}

type userRow struct {
	User        string         `json:"user"`
	Credentials []userCredInfo `json:"credentials"`
}

type userCredInfo struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func userList(ctx context.Context, c *common, _ *userFlags, pos []string, std IO) error {
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	d, err := adm.DescribeUserSCRAMs(ctx, pos...)
	if err != nil {
		return fmt.Errorf("describe SCRAM credentials: %w", err)
	}
	names := make([]string, 0, len(d))
	for n := range d {
		names = append(names, n)
	}
	slices.Sort(names)
	rows := []userRow{}
	var errs []error
	for _, n := range names {
		u := d[n]
		if u.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, u.Err))
			continue
		}
		r := userRow{User: n, Credentials: []userCredInfo{}}
		for _, ci := range u.CredInfos {
			r.Credentials = append(r.Credentials, userCredInfo{Mechanism: ci.Mechanism.String(), Iterations: ci.Iterations})
		}
		rows = append(rows, r)
	}
	if err := c.emit(std.Out, rows, func(w io.Writer) error {
		t := newTable("USER", "MECHANISMS")
		for _, r := range rows {
			var parts []string
			for _, ci := range r.Credentials {
				parts = append(parts, fmt.Sprintf("%s(%d)", ci.Mechanism, ci.Iterations))
			}
			t.row(r.User, strings.Join(parts, " "))
		}
		return t.write(w)
	}); err != nil {
		return err
	}
	return errors.Join(errs...)
}

func userSet(ctx context.Context, c *common, f *userFlags, pos []string, std IO) error {
	if len(pos) != 1 {
		return usagef("set takes one user name")
	}
	mechs, err := parseMechanisms(f.mechanism)
	if err != nil {
		return err
	}
	if f.iterations < 4096 || f.iterations > 16384 {
		return usagef("--iterations %d: want 4096-16384 (Kafka's SCRAM bounds)", f.iterations)
	}
	pw, err := userPassword(pos[0], f.stdin, std.In)
	if err != nil {
		return err
	}
	var up []kadm.UpsertSCRAM
	for _, m := range mechs {
		up = append(up, kadm.UpsertSCRAM{User: pos[0], Mechanism: m, Iterations: int32(f.iterations), Password: pw})
	}
	return userAlter(ctx, c, nil, up, "set", std)
}

func userDelete(ctx context.Context, c *common, f *userFlags, pos []string, std IO) error {
	if len(pos) != 1 {
		return usagef("delete takes one user name")
	}
	var mechs []kadm.ScramMechanism
	if f.mechanism != "" {
		m, err := parseMechanisms(f.mechanism)
		if err != nil {
			return err
		}
		mechs = m
	} else {
		adm, err := c.admin(ctx)
		if err != nil {
			return err
		}
		d, err := adm.DescribeUserSCRAMs(ctx, pos[0])
		adm.Close()
		if err != nil {
			return fmt.Errorf("describe SCRAM credentials: %w", err)
		}
		if u := d[pos[0]]; u.Err != nil {
			return fmt.Errorf("%s: %w", pos[0], u.Err)
		}
		for _, ci := range d[pos[0]].CredInfos {
			mechs = append(mechs, ci.Mechanism)
		}
	}
	var del []kadm.DeleteSCRAM
	for _, m := range mechs {
		del = append(del, kadm.DeleteSCRAM{User: pos[0], Mechanism: m})
	}
	return userAlter(ctx, c, del, nil, "deleted", std)
}

func userAlter(ctx context.Context, c *common, del []kadm.DeleteSCRAM, up []kadm.UpsertSCRAM, verb string, std IO) error {
	adm, err := c.admin(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	res, err := adm.AlterUserSCRAMs(ctx, del, up)
	if err != nil {
		return fmt.Errorf("alter SCRAM credentials: %w", err)
	}
	var errs []error
	for n, r := range res {
		if r.Err != nil {
			msg := r.Err.Error()
			if r.ErrMessage != "" {
				msg += ": " + r.ErrMessage
			}
			errs = append(errs, fmt.Errorf("%s: %s", n, msg))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	var user string
	var mechs []string
	for _, d := range del {
		user = d.User
		mechs = append(mechs, d.Mechanism.String())
	}
	for _, u := range up {
		user = u.User
		mechs = append(mechs, u.Mechanism.String())
	}
	type out struct {
		User       string   `json:"user"`
		Action     string   `json:"action"`
		Mechanisms []string `json:"mechanisms"`
	}
	o := out{User: user, Action: verb, Mechanisms: mechs}
	return c.emit(std.Out, o, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s %s for user %q\n", verb, strings.Join(mechs, ", "), user)
		return err
	})
}

// userPassword reads the password: the first line of stdin with
// --password-stdin, else PromptPassword.
func userPassword(name string, fromStdin bool, in io.Reader) (string, error) {
	if !fromStdin {
		if PromptPassword == nil {
			return "", usagef("pass the password with --password-stdin")
		}
		return PromptPassword(name)
	}
	if in == nil {
		in = os.Stdin
	}
	br := bufio.NewReader(io.LimitReader(in, maxUserPasswordBytes+1))
	line, err := br.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password: %w", err)
	}
	if len(line) > maxUserPasswordBytes {
		return "", usagef("password longer than %d bytes", maxUserPasswordBytes)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", usagef("empty password")
	}
	return line, nil
}
