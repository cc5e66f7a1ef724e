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

// TestWatchRequestFrames: the large request frames' gauges read the
// proxy's figures at each scrape.
func TestWatchRequestFrames(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	var mapped atomic.Int64
	m.WatchRequestFrames(func() (int64, int64) { return mapped.Load(), 3 << 20 })
	base := startAdmin(t, reg, nil, nil)
	mapped.Store(5 << 20)
	fams := scrape(t, base)
	mustValue(t, fams, 5<<20, "tollgate_request_frames_mapped_bytes")
	mustValue(t, fams, 3<<20, "tollgate_request_frames_free_bytes")
	mapped.Store(1 << 20)
	mustValue(t, scrape(t, base), 1<<20, "tollgate_request_frames_mapped_bytes")
}

// TestWatchFetchAhead: the fetch-ahead counters are read at each scrape.
func TestWatchFetchAhead(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	var used atomic.Int64
	m.WatchFetchAhead(func() (int64, int64, int64) { return 10, used.Load(), 2 })
	base := startAdmin(t, reg, nil, nil)
	used.Store(7)
	fams := scrape(t, base)
	mustValue(t, fams, 10, "tollgate_single_port_fetch_ahead_sent_total")
	mustValue(t, fams, 7, "tollgate_single_port_fetch_ahead_used_total")
	mustValue(t, fams, 2, "tollgate_single_port_fetch_ahead_missed_total")
	used.Store(8)
	mustValue(t, scrape(t, base), 8, "tollgate_single_port_fetch_ahead_used_total")
}
