package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestHelpListsEveryCommand: `tollgate --help` names every command run
// dispatches.
func TestHelpListsEveryCommand(t *testing.T) {
	for _, arg := range []string{"--help", "help", "-h"} {
		var out, errb bytes.Buffer
		if code := run([]string{arg}, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d", arg, code)
		}
		for _, cmd := range []string{"check-config", "topic", "produce", "consume", "group", "cluster", "tap", "users", "bench", "version", "help"} {
			if !strings.Contains(out.String(), "\n  "+cmd+" ") {
				t.Errorf("%s does not list %s:\n%s", arg, cmd, out.String())
			}
		}
	}
}

func TestVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "d0f49af59477963a05f444a47921a90f7bbf69d6"},
		{Key: "vcs.time", Value: "2026-12-01T23:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	want := "tollgate v1.2.3 revision d0f49af59477963a05f444a47921a90f7bbf69d6 (modified) 2026-12-01T23:00:00Z go1.26.8"
	if got := formatVersion(bi, ""); got != want {
		t.Errorf("formatVersion = %q, want %q", got, want)
	}
	if got := formatVersion(&debug.BuildInfo{GoVersion: "go1.26.8"}, "v9"); got != "tollgate v9 go1.26.8" {
		t.Errorf("with -X main.version: %q", got)
	}
	var out bytes.Buffer
	if run([]string{"version"}, &out, &out) != 0 || !strings.HasPrefix(out.String(), "tollgate ") {
		t.Errorf("tollgate version: %q", out.String())
	}
}

// TestCheckConfigWarnsOpenAdmin: a non-loopback admin address with
// neither auth nor tls is a check-config warning (still exit 0).
func TestCheckConfigWarnsOpenAdmin(t *testing.T) {
	f := filepath.Join(t.TempDir(), "open.yaml")
	os.WriteFile(f, []byte("admin: { listen: 0.0.0.0:9099 }\n"), 0o644)
	var out, errb bytes.Buffer
	if code := run([]string{"check-config", f}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "warning: admin.listen 0.0.0.0:9099 is not a loopback address") {
		t.Errorf("no warning:\n%s", out.String())
	}
}
