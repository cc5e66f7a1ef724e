package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

type fakeShareBroker struct{ fakeBroker }

func (fakeShareBroker) ShareStats() []ShareStat {
	return []ShareStat{{Group: "workers", Topic: "jobs", Partition: 1, StartOffset: 40, Acquired: 6, Lag: 9}}
}
func (fakeShareBroker) ShareCounters() ShareCounters {
	return ShareCounters{LockExpired: 3, Archived: 2, AckErrors: 5}
}

// TestShareSeries: a broker with share groups exports their series; one
// without (fakeBroker) exports none and still works.
func TestShareSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	base := startAdmin(t, reg, nil, nil)
	m.WatchBroker(fakeShareBroker{})
	f := scrape(t, base)
	mustValue(t, f, 40, "tollgate_broker_share_start_offset", "group", "workers", "topic", "jobs", "partition", "1")
	mustValue(t, f, 6, "tollgate_broker_share_acquired_records", "group", "workers", "topic", "jobs", "partition", "1")
	mustValue(t, f, 9, "tollgate_broker_share_lag", "group", "workers", "topic", "jobs", "partition", "1")
	mustValue(t, f, 3, "tollgate_broker_share_lock_expired_total")
	mustValue(t, f, 2, "tollgate_broker_share_delivery_limit_archived_total")
	mustValue(t, f, 5, "tollgate_broker_share_ack_errors_total")
	mustValue(t, f, 0, "tollgate_broker_series_truncated")

	m.WatchBroker(fakeBroker{})
	f = scrape(t, base)
	if _, ok := value(f, "tollgate_broker_share_ack_errors_total"); ok {
		t.Fatal("share series exported for a broker without share stats")
	}
}
