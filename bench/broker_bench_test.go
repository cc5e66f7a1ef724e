package bench

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunBrokerSmoke runs the broker benchmark with tiny sizes against a
// freshly built tollgate and checks that every figure was measured.
func TestRunBrokerSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tollgate and runs four brokers")
	}
	bin := filepath.Join(t.TempDir(), "tollgate")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/tollgate").CombinedOutput(); err != nil {
		t.Fatalf("build tollgate: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rep, err := RunBroker(ctx, BrokerConfig{
		Tollgate:        bin,
		Dir:             t.TempDir(),
		ProduceBytes:    8 << 20,
		LatencyRate:     2000,
		LatencyDuration: 300 * time.Millisecond,
		MemoryBytes:     16 << 20,
		MemoryStep:      4 << 20,
		ProbeBytes:      8 << 20,
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if rep.DiskMBps <= 0 || len(rep.Results) != 4 || len(rep.MemorySteps) != 2 {
		t.Fatalf("incomplete report: %+v", rep)
	}
	for _, r := range rep.Results {
		if r.ProduceMBps <= 0 || r.RSSBytes <= 0 {
			t.Errorf("%s: produce %.1f MB/s, RSS %d", r.Name, r.ProduceMBps, r.RSSBytes)
		}
		if strings.Contains(r.Name, "never") || strings.Contains(r.Name, "memory") {
			if r.FetchMBps <= 0 || r.LatencyP50 <= 0 || r.LatencyP99 < r.LatencyP50 {
				t.Errorf("%s: fetch %.1f MB/s, latency %v/%v", r.Name, r.FetchMBps, r.LatencyP50, r.LatencyP99)
			}
		}
	}
	if !strings.Contains(out.String(), "durable produce / disk bandwidth") {
		t.Errorf("table lacks the targets:\n%s", out.String())
	}
}
