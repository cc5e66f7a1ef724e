package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunShareSmoke runs the share benchmark with tiny sizes against a
// freshly built tollgate: both consumers (kgo, through tollgate's listener
// to its built-in broker) read every record exactly as many times as
// produced, in every round, and every figure is measured.
func TestRunShareSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tollgate and runs a broker")
	}
	bin := filepath.Join(t.TempDir(), "tollgate")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/tollgate").CombinedOutput(); err != nil {
		t.Fatalf("build tollgate: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunShare(ctx, ShareConfig{Tollgate: bin, Dir: t.TempDir(), Bytes: 4 << 20, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if len(rep.Runs) != 4 {
		t.Fatalf("%d runs, want 4", len(rep.Runs))
	}
	for _, r := range rep.Runs {
		if r.MBps <= 0 || r.CPUPerGB < 0 || r.ClientCPUPerGB < 0 {
			t.Errorf("round %d %s: %.1f MB/s, %.3f broker and %.3f client CPU s/GB", r.Round, r.Variant, r.MBps, r.CPUPerGB, r.ClientCPUPerGB)
		}
		if r.Fetches <= 0 || r.FetchTime <= 0 || r.InFetch <= 0 {
			t.Errorf("round %d %s: %d fetches of median %v, in flight %.2f of the read: the fetch hook saw none", r.Round, r.Variant, r.Fetches, r.FetchTime, r.InFetch)
		}
	}
	if cc, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control"); err == nil && !strings.Contains(out.String(), "TCP: congestion control "+strings.TrimSpace(string(cc))) {
		t.Errorf("the report does not name the machine's congestion control (%s):\n%s", cc, out.String())
	}
	if rep.ThroughputRatio <= 0 || !strings.Contains(out.String(), "share / classic") {
		t.Errorf("no ratio in the report:\n%s", out.String())
	}
}
