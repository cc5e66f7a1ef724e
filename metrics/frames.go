package metrics

import "github.com/prometheus/client_golang/prometheus"

// RequestFrameStats is what the gateway's large request frames report at
// scrape time (the proxy's frame_mem.go): the bytes mapped outside the Go
// heap now, in use or free, and the bytes of large frames kept free for
// reuse.
type RequestFrameStats func() (mapped, free int64)

// WatchRequestFrames exports s, read at every scrape. Call it once.
func (m *Metrics) WatchRequestFrames(s RequestFrameStats) {
	if m == nil || s == nil {
		return
	}
	registerOptional(m.reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "request_frames_mapped_bytes",
		Help: "Request frames over 512 KiB (Produce read whole for single-port, policy or audit) mapped outside the Go heap, in use or free: part of the RSS that the go_memstats heap figures do not show."},
		func() float64 { b, _ := s(); return float64(b) }))
	registerOptional(m.reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "request_frames_free_bytes",
		Help: "Request frames over 512 KiB kept free for the next large request (at most 6 MiB; one idle across two garbage collections is let go)."},
		func() float64 { _, b := s(); return float64(b) }))
}
