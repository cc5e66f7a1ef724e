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
	want := map[string]string{"port-per-broker": configs.BrokersPortPerBroker, "single-port": configs.BrokersSinglePort,
		"no-fetch-ahead": configs.BrokersSinglePort}
	for _, v := range vs {
		cfg, err := configs.Parse([]byte(v.configYAML([]string{"127.0.0.1:1", "127.0.0.1:2"}, "")), v.name+".yaml")
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		l := cfg.Listeners[0]
		if l.Brokers != want[v.name] {
			t.Errorf("%s: brokers %q, want %q", v.name, l.Brokers, want[v.name])
		}
		if l.Brokers == configs.BrokersSinglePort && l.FetchesAhead() != (v.name == "single-port") {
			t.Errorf("%s: fetch_ahead %v", v.name, l.FetchesAhead())
		}
		if cfg.Limits.TCPCongestionControl != "" {
			t.Errorf("%s: tcp_congestion_control %q without --tcp-congestion", v.name, cfg.Limits.TCPCongestionControl)
		}
		v.tcpCongestion = "cubic" // --tcp-congestion cubic
		if cfg, err = configs.Parse([]byte(v.configYAML([]string{"127.0.0.1:1"}, "")), v.name+".yaml"); err != nil || cfg.Limits.TCPCongestionControl != "cubic" {
			t.Errorf("%s with --tcp-congestion cubic: %v, tcp_congestion_control %q", v.name, err, cfg.Limits.TCPCongestionControl)
		}
	}
}

// TestSinglePortSuiteSmoke: every variant moves records through kfake
// with child processes, and the ratios are reported.
func TestSinglePortSuiteSmoke(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU and RSS come from /proc")
	}
	opts := suiteSmokeOptions(t)
	opts.Command = testCommand
	// Two brokers, so a consume Fetch is split and answered from held
	// parts, and 12 MiB over two partitions, several times kgo's 1 MiB
	// partition max, so an answer leaves more to read and the gateway
	// fetches ahead.
	opts.Brokers, opts.ConsumeBytes = 2, 12<<20
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := RunSuite(ctx, SuiteSinglePort, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkSuiteRuns(t, rep, true)
	if want := 2 * len(rep.Workloads); len(rep.Ratios) != want { // single-port and no-fetch-ahead, each versus port-per-broker
		t.Errorf("%d ratios, want %d", len(rep.Ratios), want)
	}
	// The single-port gateways' consume answers move their record sets
	// through pipes (kgo's sets are far over pipeMin), and only the one
	// that fetches ahead fetches ahead; port-per-broker has none of it.
	for _, v := range rep.Variants {
		switch s := v.Stats; {
		case s == nil || !s.Metrics:
			t.Errorf("%s: no counters (%+v)", v.Name, s)
		case v.Name != "port-per-broker" && s.PipedSets <= 0:
			t.Errorf("%s: no record set piped (%+v)", v.Name, s)
		case v.Name == "port-per-broker" && s.PipedSets+s.UnpipedParts+s.AheadSent != 0:
			t.Errorf("%s: single-port counters moved (%+v)", v.Name, s)
		case v.Name == "single-port" && s.AheadUsed <= 0:
			t.Errorf("single-port: no fetch-ahead used (%+v)", s)
		case v.Name == "no-fetch-ahead" && s.AheadSent != 0:
			t.Errorf("no-fetch-ahead: %.0f fetch-aheads sent", s.AheadSent)
		}
	}
}
