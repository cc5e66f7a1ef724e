package console_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/console"
)

// TestKcatInterop: what `tollgate produce` writes (keys, headers) kcat
// (librdkafka) reads back, and what kcat writes `tollgate consume -f json`
// reads back, through a gateway in front of kfake.
func TestKcatInterop(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed (make deps installs it)")
	}
	b := throughGateway(t, "")
	kcat := func(stdin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "kcat", append([]string{"-b", b.addr}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run(t, console.Topic, b.addr, "", "create", "interop", "-p", "1").ok(t, "create")
	run(t, console.Produce, b.addr, "k1=v1\nk2=v2\n", "interop", "-k", "=", "-H", "origin=tollgate").ok(t, "produce")
	got := kcat("", "-C", "-t", "interop", "-o", "beginning", "-e", "-q", "-f", `%k:%s:%h\n`)
	if got != "k1:v1:origin=tollgate\nk2:v2:origin=tollgate\n" {
		t.Fatalf("kcat read %q", got)
	}

	kcat("a:from-kcat\n", "-P", "-t", "interop", "-K", ":", "-H", "origin=kcat")
	out := run(t, console.Consume, b.addr, "", "interop", "-o", "-1", "-e", "-f", "json").ok(t, "consume").out
	var rec struct {
		Key, Value *string
		Offset     int64
		Headers    []struct{ Key, Value string }
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if *rec.Key != "a" || *rec.Value != "from-kcat" || rec.Offset != 2 || len(rec.Headers) != 1 || rec.Headers[0].Value != "kcat" {
		t.Fatalf("tollgate consume read %+v", rec)
	}
}
