package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpstreamProxyFlag: --upstream-proxy sets upstream.proxy, needs an
// upstream, and is validated like the file's field (without printing the
// password).
func TestUpstreamProxyFlag(t *testing.T) {
	cfg, _, err := loadConfig([]string{"--upstream", "k1:9092,k2:9092", "--upstream-proxy", "socks5://u:pw@proxy.corp:1080"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Upstream.Proxy != "socks5://u:pw@proxy.corp:1080" || len(cfg.Upstream.Bootstrap) != 2 {
		t.Errorf("upstream = %+v", cfg.Upstream)
	}
	if _, _, err := loadConfig([]string{"--upstream-proxy", "http://proxy:3128"}, io.Discard); err == nil || !strings.Contains(err.Error(), "needs an upstream") {
		t.Errorf("--upstream-proxy without an upstream: %v", err)
	}
	_, _, err = loadConfig([]string{"--upstream", "k:9092", "--upstream-proxy", "gopher://u:hunter2@proxy:70"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `scheme "gopher"`) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad proxy URL: %v", err)
	}
}

// TestFlagsOverlaidBeforeValidation: the effective configuration (file,
// then flags) is what is validated, once. A file value a flag replaces is
// not an error; a bad flag value is, named by its field (no line: the
// value is not the file's); problems the decoder found in the file are
// still reported with their line, next to the rest.
func TestFlagsOverlaidBeforeValidation(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.yaml", "broker:\n  fsync: sometimes\n  data_dir: "+filepath.Join(dir, "data")+"\n")

	if _, _, err := loadConfig([]string{"--config", bad}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "bad.yaml:2:10: broker.fsync") {
		t.Errorf("file alone: want the file's line for broker.fsync, got %v", err)
	}
	cfg, src, err := loadConfig([]string{"--config", bad, "--fsync", "never"}, io.Discard)
	if err != nil {
		t.Fatalf("a flag replacing the bad file value: %v", err)
	}
	if cfg.Broker.Fsync != "never" {
		t.Errorf("fsync = %q, want the flag's never", cfg.Broker.Fsync)
	}
	// A reload (Gateway.ReloadFrom(src.load)) takes the same path: the
	// file with the flags overlaid again, so it is accepted too.
	if again, err := src.load(); err != nil {
		t.Errorf("reload of the same source: %v", err)
	} else if again.Broker.Fsync != "never" {
		t.Errorf("reload of the same source: fsync %q, want never", again.Broker.Fsync)
	}

	good := write("good.yaml", "broker:\n  fsync: always\n")
	_, _, err = loadConfig([]string{"--config", good, "--fsync", "sometimes"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `broker.fsync: "sometimes"`) || strings.Contains(err.Error(), "good.yaml:2") {
		t.Errorf("bad flag value: want broker.fsync named without the file's line, got %v", err)
	}

	typo := write("typo.yaml", "brokr: {}\nlog:\n  level: loud\n")
	_, _, err = loadConfig([]string{"--config", typo, "--log-format", "xml"}, io.Discard)
	for _, want := range []string{"typo.yaml:1:1", "typo.yaml:3:10: log.level", "log.format"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("decode and validation problems together: want %q in %v", want, err)
		}
	}

	// An empty listener list has nothing for --listen to override; the
	// list is reported, not a crash.
	none := write("none.yaml", "listeners: []\n")
	if _, _, err := loadConfig([]string{"--config", none, "--listen", "127.0.0.1:0"}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "at least one listener") {
		t.Errorf("listeners: [] with --listen: %v", err)
	}
}
