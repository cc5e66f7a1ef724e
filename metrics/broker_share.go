package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// ShareStat is one share-partition of a KIP-932 share group.
type ShareStat struct {
	Group       string
	Topic       string
	Partition   int32
	StartOffset int64 // share-partition start offset
	Acquired    int64 // records locked by a member now
	Lag         int64 // records not yet acknowledged or archived
}

// ShareCounters are share-group totals since the broker started.
type ShareCounters struct {
	LockExpired, Archived, AckErrors int64
}

// ShareStatsSource is optionally implemented by a BrokerStats: the
// share-group series are exported when it is.
type ShareStatsSource interface {
	ShareStats() []ShareStat
	ShareCounters() ShareCounters
}

var (
	descShareStart = prometheus.NewDesc("tollgate_broker_share_start_offset",
		"Built-in broker: share-partition start offset per share group partition.", []string{"group", "topic", "partition"}, nil)
	descShareAcquired = prometheus.NewDesc("tollgate_broker_share_acquired_records",
		"Built-in broker: records a share group member holds under an acquisition lock.", []string{"group", "topic", "partition"}, nil)
	descShareLag = prometheus.NewDesc("tollgate_broker_share_lag",
		"Built-in broker: records of a share group partition not yet acknowledged or archived.", []string{"group", "topic", "partition"}, nil)
	descShareExpired = prometheus.NewDesc("tollgate_broker_share_lock_expired_total",
		"Built-in broker: share acquisition locks that ran out (records released for redelivery).", nil, nil)
	descShareArchived = prometheus.NewDesc("tollgate_broker_share_delivery_limit_archived_total",
		"Built-in broker: share records archived at the delivery-count limit.", nil, nil)
	descShareAckErrors = prometheus.NewDesc("tollgate_broker_share_ack_errors_total",
		"Built-in broker: share acknowledgements refused (malformed, or records not held by the member).", nil, nil)
)

var shareDescs = []*prometheus.Desc{descShareStart, descShareAcquired, descShareLag, descShareExpired, descShareArchived, descShareAckErrors}

// collectShare emits the share-group series of s (if it has them) and
// reports whether the series cap truncated them.
func collectShare(s BrokerStats, ch chan<- prometheus.Metric) bool {
	src, ok := s.(ShareStatsSource)
	if !ok {
		return false
	}
	stats := src.ShareStats()
	truncated := len(stats) > maxBrokerSeries
	if truncated {
		stats = stats[:maxBrokerSeries]
	}
	for _, st := range stats {
		p := strconv.FormatInt(int64(st.Partition), 10)
		ch <- prometheus.MustNewConstMetric(descShareStart, prometheus.GaugeValue, float64(st.StartOffset), st.Group, st.Topic, p)
		ch <- prometheus.MustNewConstMetric(descShareAcquired, prometheus.GaugeValue, float64(st.Acquired), st.Group, st.Topic, p)
		ch <- prometheus.MustNewConstMetric(descShareLag, prometheus.GaugeValue, float64(st.Lag), st.Group, st.Topic, p)
	}
	c := src.ShareCounters()
	ch <- prometheus.MustNewConstMetric(descShareExpired, prometheus.CounterValue, float64(c.LockExpired))
	ch <- prometheus.MustNewConstMetric(descShareArchived, prometheus.CounterValue, float64(c.Archived))
	ch <- prometheus.MustNewConstMetric(descShareAckErrors, prometheus.CounterValue, float64(c.AckErrors))
	return truncated
}
