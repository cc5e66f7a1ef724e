//go:build linux

package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestNetFaults runs every network fault (faults_net.go) in every listener
// mode at CI size (one cycle; delay, loss and reordering for NetFor's
// default 5 s, the blackhole for 10 s) with the upstream kfake behind an
// impaired veth link, and asserts the checker's invariants as TestFaults
// does. No timing is asserted. Needs root (network namespaces): skipped
// otherwise, with the reason.
func TestNetFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tollgate and runs twelve network fault runs")
	}
	if err := NetFaultsAvailable(); err != nil {
		t.Skipf("network faults need a network namespace behind a veth pair: %v (run as root, as CI does)", err)
	}
	bin := faultTollgate(t)
	modes := FaultModes
	if m := os.Getenv("TOLLGATE_FAULT_MODES"); m != "" {
		modes = strings.Split(m, ",")
	}
	faults := NetFaultNames
	if f := os.Getenv("TOLLGATE_NET_FAULTS"); f != "" {
		faults = strings.Split(f, ",")
	}
	for _, f := range faults {
		for _, m := range modes {
			t.Run(f+"/"+m, func(t *testing.T) {
				var logs bytes.Buffer
				ctx, cancel := context.WithTimeout(context.Background(), faultRunBound+30*time.Second)
				defer cancel()
				r, err := RunFault(ctx, FaultsConfig{Tollgate: bin, Dir: t.TempDir(), Log: &logs}, f, m)
				if os.Getenv("TOLLGATE_FAULT_LOG") != "" {
					t.Log(logs.String())
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("acked %d, redelivered %d, commit errors %d, retried %d, recovery %v, outage %v; %s", r.Acknowledged, r.Redelivered, r.CommitErrors, r.Retried, r.Recovery, r.Outage, r.Impairment)
				if !r.OK() {
					t.Fatalf("%+v\n%s", r, logs.String())
				}
			})
		}
	}
}
