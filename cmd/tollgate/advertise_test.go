package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigAdvertisePort (issue 19): check-config refuses a port in
// advertise that a port-per-broker listener in front of an upstream
// cannot honour (a kernel-chosen listen port: broker ports are advertised
// shifted by advertise port - listen port), and accepts it with a fixed
// listen port, or on a single-port listener.
func TestCheckConfigAdvertisePort(t *testing.T) {
	dir := t.TempDir()
	check := func(listener string) (int, string) {
		t.Helper()
		f := filepath.Join(dir, "tollgate.yaml")
		src := "listeners:\n  - " + listener + "\nupstream: { bootstrap: [kafka-1:9092] }\n"
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"check-config", f}, &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, out := check("{ listen: 127.0.0.1:0, advertise: gw.example.com:31000 }"); code != 1 ||
		!strings.Contains(out, "listeners[0].advertise") || !strings.Contains(out, "the listen port is 0") {
		t.Errorf("advertise port with a kernel-chosen listen port: exit %d, output %q; want 1 naming listeners[0].advertise", code, out)
	}
	for _, l := range []string{
		"{ listen: 127.0.0.1:9092, advertise: gw.example.com:31000 }",
		"{ listen: 127.0.0.1:0, advertise: gw.example.com:31000, brokers: single-port }",
	} {
		if code, out := check(l); code != 0 {
			t.Errorf("%s: exit %d, output %q; want 0", l, code, out)
		}
	}
}
