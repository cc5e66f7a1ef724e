package metrics

import "github.com/prometheus/client_golang/prometheus"

// RecordPipeStats is what the single-port gateway's record pipes report
// at scrape time (the proxy's pipe_records.go): pipes holding records
// now, record sets moved through pipes, those of them that spilled past
// their pipes into memory, and Fetch part answers read into memory on a
// plain TCP connection for want of a pipe.
type RecordPipeStats func() (inUse int, piped, spilled, unpiped int64)

// WatchRecordPipes exports s, read at every scrape. Call it once.
func (m *Metrics) WatchRecordPipes(s RecordPipeStats) {
	if m == nil || s == nil {
		return
	}
	registerOptional(m.reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "single_port_record_pipes",
		Help: "Pipes holding single-port Fetch record sets on their way to clients (at most 32 per process)."},
		func() float64 { n, _, _, _ := s(); return float64(n) }))
	registerOptional(m.reg, prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "single_port_piped_record_sets_total",
		Help: "Single-port Fetch record sets moved upstream socket to pipe to client socket."},
		func() float64 { _, n, _, _ := s(); return float64(n) }))
	registerOptional(m.reg, prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "single_port_spilled_record_sets_total",
		Help: "Piped record sets larger than their pipes took (up to four of at most 1 MiB each, fewer when no more were free): the rest went through memory."},
		func() float64 { _, _, n, _ := s(); return float64(n) }))
	registerOptional(m.reg, prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "single_port_unpiped_fetch_parts_total",
		Help: "Single-port Fetch part answers, or large record sets in one, read into memory on plain TCP connections because no record pipe was free (or the Fetch version is below 12)."},
		func() float64 { _, _, _, n := s(); return float64(n) }))
}

// FetchAheadStats is what the single-port gateway's fetch-aheads report
// at scrape time (the proxy's route_fetch_ahead.go): sent, used by the
// client's next Fetch, and dropped because that Fetch asked otherwise.
type FetchAheadStats func() (sent, used, missed int64)

// WatchFetchAhead exports s, read at every scrape. Call it once.
func (m *Metrics) WatchFetchAhead(s FetchAheadStats) {
	if m == nil || s == nil {
		return
	}
	registerOptional(m.reg, prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "single_port_fetch_ahead_sent_total",
		Help: "Single-port Fetches sent to a broker ahead of the client's next Fetch, asking what it was predicted to."},
		func() float64 { n, _, _ := s(); return float64(n) }))
	registerOptional(m.reg, prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "single_port_fetch_ahead_used_total",
		Help: "Fetch-aheads whose answer served the client's next Fetch (it asked what was predicted)."},
		func() float64 { _, n, _ := s(); return float64(n) }))
	registerOptional(m.reg, prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "single_port_fetch_ahead_missed_total",
		Help: "Fetch-aheads dropped because the client's next Fetch asked otherwise (a seek, a paused or forgotten partition): that broker's session starts again with a full request."},
		func() float64 { _, _, n := s(); return float64(n) }))
}
