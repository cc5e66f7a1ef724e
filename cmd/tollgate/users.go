package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"

	"github.com/tollgate-kafka/tollgate/auth"
)

// usersCmd is `tollgate users`: it maintains the users file that listeners
// with SASL PLAIN or SCRAM read (listeners[].sasl.users_file). The file
// holds salted SCRAM credentials only; a running gateway reloads it when it
// changes, so adding or removing a user needs no restart.
//
//	tollgate users add alice --file users.yaml                 # prompts (no echo) on a terminal
//	printf '%s\n' "$PW" | tollgate users add alice --password-stdin --file users.yaml
//	tollgate users remove alice --file users.yaml
//	tollgate users list --file users.yaml                      # names and mechanisms, never secrets
func usersCmd(args []string, stdout, stderr io.Writer) int {
	return runUsers(args, os.Stdin, stdout, stderr)
}

const usersUsage = `usage:
  tollgate users add NAME [--password-stdin] [--iterations 8192] --file FILE
  tollgate users remove NAME --file FILE
  tollgate users list --file FILE`

// maxPasswordBytes bounds the line read as a password.
const maxPasswordBytes = 4096

func runUsers(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usersUsage)
		return 2
	}
	sub := args[0]
	flags := flag.NewFlagSet("users "+sub, flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() { fmt.Fprintln(stderr, usersUsage); flags.PrintDefaults() }
	file := flags.String("file", "", "the users file (listeners[].sasl.users_file)")
	var fromStdin *bool
	var iterations *int
	if sub == "add" {
		fromStdin = flags.Bool("password-stdin", false, "read the password from the first line of standard input")
		iterations = flags.Int("iterations", auth.DefaultIterations, fmt.Sprintf("SCRAM iterations (%d-%d)", auth.MinIterations, auth.MaxIterations))
	}
	switch sub {
	case "add", "remove", "list":
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usersUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "tollgate users: unknown subcommand %q\n%s\n", sub, usersUsage)
		return 2
	}
	pos, err := parseInterspersed(flags, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	wantArgs := 1
	if sub == "list" {
		wantArgs = 0
	}
	if len(pos) != wantArgs || *file == "" {
		fmt.Fprintln(stderr, usersUsage)
		return 2
	}
	var code int
	switch sub {
	case "add":
		code = usersAdd(pos[0], *file, *iterations, *fromStdin, stdin, stdout, stderr)
	case "remove":
		code = usersRemove(pos[0], *file, stdout, stderr)
	case "list":
		code = usersList(*file, stdout, stderr)
	}
	return code
}

// parseInterspersed lets flags follow the positional arguments, as in
// `users add alice --file f` or `check-config FILE --print`: the flag
// package stops at the first non-flag argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// Parse consumes a "--" and stops: everything after it is an
		// argument, even what looks like a flag.
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func usersAdd(name, file string, iterations int, fromStdin bool, stdin io.Reader, stdout, stderr io.Writer) int {
	users, err := auth.LoadUsers(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		users = auth.NewUsers()
	case err != nil:
		fmt.Fprintln(stderr, "tollgate users:", err)
		return 1
	}
	pw, err := readPassword(name, fromStdin, stdin, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate users:", err)
		return 1
	}
	existed := len(users.Mechanisms(name)) > 0
	if err := users.Set(name, pw, iterations); err != nil {
		fmt.Fprintln(stderr, "tollgate users:", err)
		return 1
	}
	if err := users.Save(file); err != nil {
		fmt.Fprintln(stderr, "tollgate users:", err)
		return 1
	}
	verb := "added"
	if existed {
		verb = "updated"
	}
	fmt.Fprintf(stdout, "%s user %q in %s (%s, %d iterations)\n", verb, name, file, strings.Join(users.Mechanisms(name), ", "), iterations)
	return 0
}

func usersRemove(name, file string, stdout, stderr io.Writer) int {
	users, err := auth.LoadUsers(file)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate users:", err)
		return 1
	}
	if !users.Remove(name) {
		fmt.Fprintf(stderr, "tollgate users: no user %q in %s\n", name, file)
		return 1
	}
	if err := users.Save(file); err != nil {
		fmt.Fprintln(stderr, "tollgate users:", err)
		return 1
	}
	fmt.Fprintf(stdout, "removed user %q from %s\n", name, file)
	return 0
}

func usersList(file string, stdout, stderr io.Writer) int {
	users, err := auth.LoadUsers(file)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate users:", err)
		return 1
	}
	for _, n := range users.Names() {
		var parts []string
		for _, m := range users.Mechanisms(n) {
			c, _ := users.Credential(n, m)
			parts = append(parts, fmt.Sprintf("%s(%d)", m, c.Iterations))
		}
		fmt.Fprintf(stdout, "%s\t%s\n", n, strings.Join(parts, " "))
	}
	return 0
}

// readPassword reads the first line of stdin with --password-stdin.
// Otherwise stdin must be a terminal: the password is asked for twice with
// echo turned off (through stty, so no terminal library is needed).
func readPassword(name string, fromStdin bool, stdin io.Reader, stderr io.Writer) (string, error) {
	if fromStdin {
		return readLine(stdin)
	}
	f, ok := stdin.(*os.File)
	if !ok || !isTerminal(f) {
		return "", errors.New("standard input is not a terminal: pass the password with --password-stdin")
	}
	if err := stty(f, "-echo"); err != nil {
		return "", fmt.Errorf("cannot turn off echo (%v): pass the password with --password-stdin", err)
	}
	defer stty(f, "echo")
	r := bufio.NewReader(f)
	fmt.Fprintf(stderr, "Password for %s: ", name)
	pw, err := readLine(r)
	fmt.Fprintln(stderr)
	if err != nil {
		return "", err
	}
	fmt.Fprint(stderr, "Again: ")
	again, err := readLine(r)
	fmt.Fprintln(stderr)
	if err != nil {
		return "", err
	}
	if pw != again {
		return "", errors.New("the passwords do not match")
	}
	return pw, nil
}

func readLine(r io.Reader) (string, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, maxPasswordBytes+1), 512)
	line, err := br.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password: %w", err)
	}
	if len(line) > maxPasswordBytes {
		return "", fmt.Errorf("password longer than %d bytes", maxPasswordBytes)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", errors.New("empty password")
	}
	return line, nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func stty(tty *os.File, arg string) error {
	cmd := exec.Command("stty", arg)
	cmd.Stdin = tty
	return cmd.Run()
}
