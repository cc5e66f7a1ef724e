package console_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/console"
)

// TestReadmeQuickStart runs the README's Quick start as written: every
// `tollgate` console command and every kcat command of its sh blocks, in
// order, against the built-in broker (127.0.0.1:9092 replaced by the
// test's address, -b added to the tollgate commands). Serving (`tollgate
// --upstream ...`, `go run`) and `make` lines are not run. kcat's -G line
// never exits on its own: it is stopped once it has printed the topic's
// records.
func TestReadmeQuickStart(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := quickStartLines(t, string(raw))
	if len(lines) < 5 {
		t.Fatalf("found %d commands in the Quick start: %q", len(lines), lines)
	}
	b := builtin(t, "")
	cmds := map[string]func(context.Context, []string, console.IO) int{
		"topic": console.Topic, "produce": console.Produce, "consume": console.Consume,
		"group": console.Group, "cluster": console.Cluster, "metadata": console.Cluster,
	}
	_, haveKcat := exec.LookPath("kcat")
	records := 0 // in topic quickstart
	for _, line := range lines {
		stdin := ""
		if v, rest, ok := strings.Cut(line, " | "); ok {
			echo := shellWords(t, v)
			if len(echo) != 2 || echo[0] != "echo" {
				t.Fatalf("Quick start pipes something other than echo: %q", line)
			}
			stdin, line = echo[1]+"\n", rest
		}
		args := shellWords(t, strings.ReplaceAll(line, "127.0.0.1:9092", b.addr))
		switch {
		case args[0] == "tollgate" && strings.HasPrefix(args[1], "-"):
			continue // serving
		case args[0] == "tollgate":
			cmd, ok := cmds[args[1]]
			if !ok {
				t.Fatalf("Quick start runs tollgate %s, which is not a console command", args[1])
			}
			r := run(t, cmd, b.addr, stdin, args[2:]...).ok(t, line)
			if args[1] == "produce" {
				records += strings.Count(stdin, "\n")
			}
			checkQuickStartOutput(t, line, args, r.out)
		case args[0] == "kcat":
			if haveKcat != nil {
				t.Logf("kcat not installed: skipped %q", line)
				continue
			}
			if strings.Contains(line, " -P") {
				records += strings.Count(stdin, "\n")
			}
			runKcat(t, args[1:], stdin, records)
		default:
			continue // go run, make
		}
	}
}

// quickStartLines are the command lines of the sh blocks of the README's
// Quick start section, comments removed.
func quickStartLines(t *testing.T, readme string) []string {
	_, sec, ok := strings.Cut(readme, "\n## Quick start\n")
	if !ok {
		t.Fatal("README has no Quick start section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var out []string
	in := false
	for _, l := range strings.Split(sec, "\n") {
		switch {
		case strings.HasPrefix(l, "```sh"):
			in = true
		case strings.HasPrefix(l, "```"):
			in = false
		case in:
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

// shellWords splits a command line as sh would for the plain words and
// "double" or 'single' quoted strings the README uses.
func shellWords(t *testing.T, s string) []string {
	var words []string
	var cur strings.Builder
	quote, inWord := byte(0), false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0 && ch == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(ch)
		case ch == '"' || ch == '\'':
			quote, inWord = ch, true
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// checkQuickStartOutput checks what the Quick start's comments promise.
func checkQuickStartOutput(t *testing.T, line string, args []string, out string) {
	t.Helper()
	want := map[string]string{
		"consume": "hello\n",
		"group":   "my-group",
		"cluster": "quickstart",
	}[args[1]]
	if args[1] == "produce" && strings.Contains(line, " -v") {
		want = "line 1: quickstart["
	}
	if !strings.Contains(out, want) {
		t.Errorf("%s printed %q, want it to contain %q", line, out, want)
	}
}

// runKcat runs one kcat line; a -G (group) consumer is stopped once it has
// read the topic's records.
func runKcat(t *testing.T, args []string, stdin string, records int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = strings.NewReader(stdin)
	group := false
	for _, a := range args {
		group = group || a == "-G"
	}
	if !group {
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kcat %q: %v\n%s", args, err, out)
		}
		return
	}
	// kcat's stdout is block-buffered into a pipe; its stderr says how
	// far it got: "% Reached end of topic quickstart [2] at offset 1".
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ends := map[int]int{}
	var said []string
	for sc := bufio.NewScanner(stderr); sc.Scan(); {
		said = append(said, sc.Text())
		var p, off int
		if _, err := fmt.Sscanf(sc.Text(), "%% Reached end of topic quickstart [%d] at offset %d", &p, &off); err == nil {
			ends[p] = off
			sum := 0
			for _, o := range ends {
				sum += o
			}
			if sum == records {
				return
			}
		}
	}
	t.Fatalf("kcat %q ended before it read %d records:\n%s", args, records, strings.Join(said, "\n"))
}
