package bench

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
)

// TestSinglePortSuiteConfig: the single-port variant's file is a valid
// brokers: single-port listener; its baseline is port-per-broker.
func TestSinglePortSuiteConfig(t *testing.T) {
	vs, err := suiteVariants(SuiteSinglePort)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"port-per-broker": configs.BrokersPortPerBroker, "single-port": configs.BrokersSinglePort}
	for _, v := range vs {
		cfg, err := configs.Parse([]byte(v.configYAML([]string{"127.0.0.1:1", "127.0.0.1:2"}, "")), v.name+".yaml")
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if got := cfg.Listeners[0].Brokers; got != want[v.name] {
			t.Errorf("%s: brokers %q, want %q", v.name, got, want[v.name])
		}
	}
}

// TestSinglePortSuiteSmoke: both variants move records through kfake
// with child processes, and the ratio is reported.
func TestSinglePortSuiteSmoke(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU and RSS come from /proc")
	}
	opts := suiteSmokeOptions(t)
	opts.Command = testCommand
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := RunSuite(ctx, SuiteSinglePort, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkSuiteRuns(t, rep, true)
	if want := len(rep.Workloads); len(rep.Ratios) != want {
		t.Errorf("%d ratios, want %d", len(rep.Ratios), want)
	}
	// The single-port gateway's consume answers move their record sets
	// through pipes (kgo's sets are far over pipeMin); port-per-broker
	// has none.
	for _, v := range rep.Variants {
		switch s := v.Stats; {
		case s == nil || !s.Metrics:
			t.Errorf("%s: no counters (%+v)", v.Name, s)
		case v.Name == "single-port" && s.PipedSets <= 0:
			t.Errorf("single-port: no record set piped (%+v)", s)
		case v.Name != "single-port" && s.PipedSets+s.UnpipedParts != 0:
			t.Errorf("%s: single-port pipe counters moved (%+v)", v.Name, s)
		}
	}
}
