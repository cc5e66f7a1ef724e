package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkRequest is the per-request cost of the metrics hooks.
func BenchmarkRequest(b *testing.B) {
	m := New(prometheus.NewRegistry())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Request("default", 0, OutcomeOK, time.Millisecond, 1000, 100)
		}
	})
}
