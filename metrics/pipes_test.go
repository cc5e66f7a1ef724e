package metrics

import (
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestWatchRecordPipes: the record pipe metrics are read from the
// source at every scrape, not copied once.
func TestWatchRecordPipes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	var piped atomic.Int64
	m.WatchRecordPipes(func() (int, int64, int64, int64) { return 3, piped.Load(), 2, 5 })
	base := startAdmin(t, reg, nil, nil)
	piped.Store(7)
	fams := scrape(t, base)
	mustValue(t, fams, 3, "tollgate_single_port_record_pipes")
	mustValue(t, fams, 7, "tollgate_single_port_piped_record_sets_total")
	mustValue(t, fams, 2, "tollgate_single_port_spilled_record_sets_total")
	mustValue(t, fams, 5, "tollgate_single_port_unpiped_fetch_parts_total")
	piped.Store(9)
	mustValue(t, scrape(t, base), 9, "tollgate_single_port_piped_record_sets_total")
}
