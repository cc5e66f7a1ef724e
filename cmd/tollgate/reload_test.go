package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPolicyReloadThroughBinary: the real binary applies a changed policy
// file (and SIGHUP) without dropping the client's connection, and refuses
// an invalid file while the rules in force stay.
func TestPolicyReloadThroughBinary(t *testing.T) {
	bin := tollgateBinary(t)
	cfgFile := filepath.Join(t.TempDir(), "tollgate.yaml")
	write := func(body string) {
		t.Helper()
		// A new file renamed into place, as editors and config managers do.
		tmp := cfgFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgFile); err != nil {
			t.Fatal(err)
		}
	}
	allow := "policy:\n  default: allow\n"
	deny := "policy:\n  rules:\n    - name: freeze\n      match: { api: [Produce] }\n      action: deny\n"
	write(allow)
	c, err := startTollgate(t, bin, t.TempDir(), "127.0.0.1:0", "--config", cfgFile, "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stop() })
	createTestTopic(t, c.addr, "reload", 1)
	cl := testClient(t, c.addr, kgo.DefaultProduceTopic("reload"), kgo.RecordRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produce := func() error { return cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr() }
	until := func(what string, ok func(error) bool) {
		t.Helper()
		for {
			err := produce()
			if ok(err) {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for %s: last produce error %v\n%s", what, err, c.output())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if err := produce(); err != nil {
		t.Fatal(err)
	}
	opened := strings.Count(c.output(), "connection opened")
	write(deny)
	until("the deny rule (file change)", func(err error) bool { return errors.Is(err, kerr.TopicAuthorizationFailed) })

	write("policy:\n  rules:\n    - name: broken\n      match: { api: [NoSuchAPI] }\n      action: deny\n")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.output(), "configuration reload refused") {
		if time.Now().After(deadline) {
			t.Fatalf("invalid file not reported:\n%s", c.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("after an invalid file the old rules must stay: %v", err)
	}

	// SIGHUP applies a change at once (the mtime poll would too, later).
	os.WriteFile(cfgFile, []byte(allow), 0o644)
	c.cmd.Process.Signal(syscall.SIGHUP)
	until("the allow policy (SIGHUP)", func(err error) bool { return err == nil })
	// kgo opens a metadata connection after an authorization error; what
	// must not happen is a produce connection being closed by the gateway.
	if strings.Contains(c.output(), "reason=denied") || strings.Contains(c.output(), "reason=malformed") {
		t.Errorf("a connection was closed during reloads:\n%s", c.output())
	}
	t.Logf("connections opened before reloads: %d, after: %d", opened, strings.Count(c.output(), "connection opened"))
}
