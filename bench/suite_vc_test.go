package bench

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
)

// TestVCSuiteConfig: the vcluster variant's file puts the bench listener
// in a virtual cluster with the suite's prefix; the plain one has none.
func TestVCSuiteConfig(t *testing.T) {
	vs, err := suiteVariants(SuiteVC)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		cfg, err := configs.Parse([]byte(v.configYAML([]string{"127.0.0.1:1", "127.0.0.1:2"}, "")), v.name+".yaml")
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		n := len(cfg.VirtualClusters)
		switch {
		case v.vcPrefix == "" && n != 0:
			t.Errorf("%s: %d virtual clusters", v.name, n)
		case v.vcPrefix != "" && (n != 1 || cfg.VirtualClusters[0].Prefix != vcPrefix || cfg.VirtualClusters[0].Match.Listener != "bench"):
			t.Errorf("%s: virtual clusters %+v", v.name, cfg.VirtualClusters)
		}
	}
}

// TestVCSuiteSmoke: both variants move records through kfake with
// child processes, the virtual cluster is in force (the probe), and
// the throughput and CPU/MB ratios are reported with their targets.
func TestVCSuiteSmoke(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU and RSS come from /proc")
	}
	opts := suiteSmokeOptions(t)
	opts.Command = testCommand
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := RunSuite(ctx, SuiteVC, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkSuiteRuns(t, rep, true)
	for _, v := range rep.Variants {
		if !v.ProbeOK {
			t.Errorf("%s: probe %q", v.Name, v.Probe)
		}
	}
	if want := len(rep.Workloads); len(rep.Ratios) != want {
		t.Errorf("%d ratios, want %d", len(rep.Ratios), want)
	}
	if want := 2 * len(rep.Workloads); len(rep.Targets) != want {
		t.Errorf("%d targets, want %d: %+v", len(rep.Targets), want, rep.Targets)
	}
}
