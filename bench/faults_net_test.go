//go:build linux

package bench

import (
	"testing"
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
	runFaultMatrix(t, envList("TOLLGATE_NET_FAULTS", NetFaultNames), nil)
}
