//go:build linux

package bench

import (
	"context"
	"strings"
	"testing"
)

// TestAuthFaults runs the credential faults (faults_auth.go) in every
// listener mode at CI size (one cycle each) and asserts the checker's
// invariants as TestFaults does: nothing lost, duplicated or reordered, no
// client error. RunFault itself fails a run whose fault did not happen: a
// rotated certificate never served to a new dial, a broken window with no
// dial error counted, a refused login never logged with its principal and
// mechanism, a reload that did not re-read the CA (dial errors after a
// rotation in the right order). The test checks the runner's account of
// it too. No timing is asserted. TOLLGATE_FAULT_MODES picks modes.
func TestAuthFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tollgate and runs six fault runs")
	}
	runFaultMatrix(t, envList("TOLLGATE_AUTH_FAULTS", AuthFaultNames), func(t *testing.T, f, m string, r FaultResult) {
		// The runner's account of the fault (what RunFault
		// checked): each step left its line.
		want := []string{"connections dropped", "dial errors (sasl_authentication_failed)", "log lines naming principal and mechanism"}
		if f == FaultTLSRotate {
			want = []string{"same CA: serial", "new CA (CA file old+new): serial", "old CA removed", "dial errors (tls_certificate)"}
			if m == ModeSNI {
				want = append(want, "listener certificate: serial")
			}
		}
		for _, w := range want {
			if !strings.Contains(r.Impairment, w) {
				t.Errorf("the run's account has no %q: %s", w, r.Impairment)
			}
		}
	})
}

// TestAuthFaultDirect: the credential faults need a gateway.
func TestAuthFaultDirect(t *testing.T) {
	for _, f := range AuthFaultNames {
		if !FaultNeedsGateway(f) {
			t.Errorf("FaultNeedsGateway(%s) = false", f)
		}
		if _, err := RunFault(context.Background(), FaultsConfig{Tollgate: "/nonexistent"}, f, ModeDirect); err == nil {
			t.Errorf("%s in mode direct: no error", f)
		}
	}
}
