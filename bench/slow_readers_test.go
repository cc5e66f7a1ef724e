//go:build linux

package bench

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestSlowReaders is the CI-sized slow-readers run, port-per-broker and
// single-port: 200 connections through the gateway binary, 100 of which
// stop reading, one baseline and one stalled phase. It asserts what does not depend on the machine's
// load: the gateway's RSS stayed under the bound computed from its limits
// (slowConnBytes, singlePortConnBytes), the kgo producer and consumer moved records while the
// stalled connections were open, and the gateway closed every stalled
// connection as write_timeout (frame_timeout 6s here). The throughput
// ratio is reported, not asserted.
func TestSlowReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the gateway binary and 200 connections")
	}
	bin := faultTollgate(t)
	for _, mode := range []string{ModePortPerBroker, ModeSinglePort} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var log bytes.Buffer
			rep, err := RunSlowReaders(ctx, SlowReadersConfig{
				Tollgate: bin, Dir: t.TempDir(), Mode: mode, Conns: 200, Rounds: 1, Phase: 3 * time.Second,
				FrameTimeout: 6 * time.Second, FillMiB: 16, FetchBytes: 256 << 10, WaitClosed: true, Log: &log,
			})
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			var out bytes.Buffer
			rep.WriteTable(&out)
			t.Logf("\n%s", out.String())
			if !rep.Met() {
				t.Fatalf("memory over the bound, no records moved, or an error:\n%s\n%s", out.String(), log.String())
			}
			// A reading connection the loaded machine starved for
			// frame_timeout may be closed too.
			if rep.WriteTimeouts < 100 {
				t.Errorf("the gateway closed %d connections as write_timeout, want at least the 100 stalled ones", rep.WriteTimeouts)
			}
		})
	}
}
