//go:build linux

package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	faultBinOnce sync.Once
	faultBin     string
	faultBinErr  error
	faultBinOut  []byte
)

// faultTollgate builds the tollgate binary once per test binary.
func faultTollgate(t *testing.T) string {
	t.Helper()
	faultBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tollgate-faults-bin-")
		if err != nil {
			faultBinErr = err
			return
		}
		faultBin = filepath.Join(dir, "tollgate")
		faultBinOut, faultBinErr = exec.Command("go", "build", "-o", faultBin, "../cmd/tollgate").CombinedOutput()
	})
	if faultBinErr != nil {
		t.Fatalf("build tollgate: %v\n%s", faultBinErr, faultBinOut)
	}
	return faultBin
}

// TestFaultCheck: the checker counts what it is there to count.
func TestFaultCheck(t *testing.T) {
	k := func(p int, s int64) faultKey { return faultKey{p, s} }
	acked := map[faultKey]int32{k(0, 0): 0, k(0, 1): 0, k(0, 2): 1, k(1, 0): 1, k(1, 1): 0}
	for _, c := range []struct {
		name string
		log  map[int32][]faultKey
		want faultCounts
	}{
		{"clean", map[int32][]faultKey{0: {k(0, 0), k(1, 1), k(0, 1)}, 1: {k(1, 0), k(0, 2)}}, faultCounts{}},
		{"lost", map[int32][]faultKey{0: {k(0, 0), k(0, 1)}, 1: {k(1, 0), k(0, 2)}}, faultCounts{lost: 1}},
		{"duplicated", map[int32][]faultKey{0: {k(0, 0), k(1, 1), k(0, 1), k(0, 1)}, 1: {k(1, 0), k(0, 2)}}, faultCounts{duplicated: 1}},
		{"reordered", map[int32][]faultKey{0: {k(0, 1), k(1, 1), k(0, 0)}, 1: {k(1, 0), k(0, 2)}}, faultCounts{reordered: 1}},
		{"wrong partition", map[int32][]faultKey{0: {k(0, 0), k(1, 1), k(0, 1), k(0, 2)}, 1: {k(1, 0)}}, faultCounts{lost: 1}},
		{"unacked", map[int32][]faultKey{0: {k(0, 0), k(1, 1), k(0, 1), k(0, 3)}, 1: {k(1, 0), k(0, 2)}}, faultCounts{unacked: 1}},
	} {
		if got := faultCheck(acked, c.log); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestFaults runs every fault in every listener mode at CI size (one cycle
// each) through the real tollgate binary and asserts the checker's
// invariants: nothing lost, duplicated or reordered, no client error, and
// the group consumed every acknowledged record. No timing is asserted.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tollgate and runs twelve fault runs")
	}
	var faults []string
	for _, f := range FaultNames {
		if !isNetFault(f) && !isAuthFault(f) {
			faults = append(faults, f) // the others: TestNetFaults, TestAuthFaults
		}
	}
	runFaultMatrix(t, faults, nil)
}

// envList is the comma-separated list in the environment variable name,
// or def when it is unset.
func envList(name string, def []string) []string {
	if v := os.Getenv(name); v != "" {
		return strings.Split(v, ",")
	}
	return def
}

// runFaultMatrix runs each fault in each listener mode (FaultModes, or
// TOLLGATE_FAULT_MODES) as a subtest through the real tollgate binary and
// fails it when the run errs or breaks the checker's invariants (RunFault's
// OK); check, when not nil, then asserts the runner's account of it.
// TOLLGATE_FAULT_LOG=1 logs every run's gateway log.
func runFaultMatrix(t *testing.T, faults []string, check func(t *testing.T, fault, mode string, r FaultResult)) {
	bin := faultTollgate(t)
	for _, f := range faults {
		for _, m := range envList("TOLLGATE_FAULT_MODES", FaultModes) {
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
				t.Logf("acked %d, redelivered %d, commit errors %d, retried %d, data-loss notices %d, recovery %v, outage %v; %s", r.Acknowledged, r.Redelivered, r.CommitErrors, r.Retried, r.DataLoss, r.Recovery, r.Outage, r.Impairment)
				if !r.OK() {
					t.Fatalf("%+v\n%s", r, logs.String())
				}
				if check != nil {
					check(t, f, m, r)
				}
			})
		}
	}
}
