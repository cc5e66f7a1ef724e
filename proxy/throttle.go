package proxy

import "time"

// Fetch-rate throttles (policy rate fetch_bytes_per_second) are charged
// when the read loop learns how many Fetch bytes the write loop sent,
// after the response left. Like every other throttle they mute the
// connection, are counted in tollgate_policy_throttles_total and
// tollgate_policy_throttle_seconds_total under their rule, are logged at
// most once a second, and the next request's answer and audit record
// carry them (throttle_time_ms, decision "throttled"), as Kafka's fetch
// quota puts the delay in the next response (KIP-219).

// fetchThrottled applies a fetch-rate throttle of d from rule.
func (s *session) fetchThrottled(d time.Duration, rule string) {
	s.mute(d)
	s.hooks.Throttled(rule, d)
	if s.srv.noisy.Allow("fetch_throttle", s.remote) {
		s.log.Warn("fetch rate exceeded; throttling the connection", "rule", rule, "throttle", d)
	}
	if d > s.fetchThrottle {
		s.fetchThrottle, s.fetchThrottleRule = d, rule
	}
}

// takeFetchThrottle returns and clears the fetch throttle not yet reported.
func (s *session) takeFetchThrottle() (time.Duration, string) {
	d, rule := s.fetchThrottle, s.fetchThrottleRule
	s.fetchThrottle, s.fetchThrottleRule = 0, ""
	return d, rule
}
