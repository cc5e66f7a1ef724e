package metrics

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// PartitionStat is one partition of the built-in broker.
type PartitionStat struct {
	Topic          string
	Partition      int32
	LogStartOffset int64
	LogEndOffset   int64
	SizeBytes      int64
	// Compacted partitions (cleanup.policy includes compact) also report
	// the log cleaner's state.
	Compacted             bool
	DirtyRatio            float64
	CleanerRuns           int64
	CleanerReclaimedBytes int64
	KeylessRefused        int64 // produces refused for a record without a key
}

// GroupLag is one committed offset of a consumer group, with the group's
// current member count.
type GroupLag struct {
	Group     string
	Topic     string
	Partition int32
	Lag       int64 // log end offset minus committed offset
	Members   int
}

// BrokerStats is what the built-in broker reports at scrape time. Its
// methods are called from the scraping goroutine and must be safe for
// concurrent use; they should copy state, not hold locks while the
// caller formats it.
type BrokerStats interface {
	Partitions() []PartitionStat
	GroupLag() []GroupLag
	ActiveTransactions() int
}

// offsetsDropper is an optional BrokerStats method: records the
// built-in broker's __consumer_offsets mirror dropped.
type offsetsDropper interface{ OffsetsTopicDropped() int64 }

// maxBrokerSeries caps the per-partition and per-group series one scrape
// emits. Topic and group names are the broker's own state (bounded by
// what exists), but a broker with 100,000 partitions should not make a
// 300,000-line scrape; past the cap, series are left out and
// tollgate_broker_series_truncated says so.
const maxBrokerSeries = 10000

var (
	descLEO = prometheus.NewDesc("tollgate_broker_log_end_offset",
		"Built-in broker: log end offset (next offset to be written) per partition.", []string{"topic", "partition"}, nil)
	descLSO = prometheus.NewDesc("tollgate_broker_log_start_offset",
		"Built-in broker: log start offset (first offset kept) per partition.", []string{"topic", "partition"}, nil)
	descSize = prometheus.NewDesc("tollgate_broker_log_size_bytes",
		"Built-in broker: bytes on disk per partition.", []string{"topic", "partition"}, nil)
	descLag = prometheus.NewDesc("tollgate_broker_consumer_group_lag",
		"Built-in broker: log end offset minus the group's committed offset.", []string{"group", "topic", "partition"}, nil)
	descMembers = prometheus.NewDesc("tollgate_broker_consumer_group_members",
		"Built-in broker: members of a consumer group.", []string{"group"}, nil)
	descTxns = prometheus.NewDesc("tollgate_broker_active_transactions",
		"Built-in broker: transactions begun and not yet committed or aborted.", nil, nil)
	descDirty = prometheus.NewDesc("tollgate_broker_log_dirty_ratio",
		"Built-in broker: share of a compacted partition's cleanable log not yet compacted (cleaning starts at min.cleanable.dirty.ratio).", []string{"topic", "partition"}, nil)
	descCleanRuns = prometheus.NewDesc("tollgate_broker_log_cleaner_runs_total",
		"Built-in broker: log cleanings of a compacted partition since the broker started.", []string{"topic", "partition"}, nil)
	descCleanBytes = prometheus.NewDesc("tollgate_broker_log_cleaner_reclaimed_bytes_total",
		"Built-in broker: bytes the log cleaner removed from a compacted partition since the broker started.", []string{"topic", "partition"}, nil)
	descKeyless = prometheus.NewDesc("tollgate_broker_compacted_keyless_refused_total",
		"Built-in broker: produces to a compacted partition refused for a record without a key (INVALID_RECORD).", []string{"topic", "partition"}, nil)
	descOffsetsDropped = prometheus.NewDesc("tollgate_broker_consumer_offsets_dropped_total",
		"Built-in broker: __consumer_offsets mirror records dropped (queue full or append failed); the coordinator journal keeps the offsets.", nil, nil)
	descTrunc = prometheus.NewDesc("tollgate_broker_series_truncated",
		"1 when the last scrape left out partitions or groups beyond the series cap.", nil, nil)
)

type brokerCollector struct {
	src atomic.Pointer[BrokerStats]
}

func (c *brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range append([]*prometheus.Desc{descLEO, descLSO, descSize, descDirty, descCleanRuns, descCleanBytes, descKeyless, descLag, descMembers, descTxns, descOffsetsDropped, descTrunc}, shareDescs...) {
		ch <- d
	}
}

func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.src.Load()
	if p == nil {
		return
	}
	s := *p
	truncated := 0.0
	parts := s.Partitions()
	if len(parts) > maxBrokerSeries {
		parts, truncated = parts[:maxBrokerSeries], 1
	}
	for _, ps := range parts {
		part := strconv.FormatInt(int64(ps.Partition), 10)
		ch <- prometheus.MustNewConstMetric(descLEO, prometheus.GaugeValue, float64(ps.LogEndOffset), ps.Topic, part)
		ch <- prometheus.MustNewConstMetric(descLSO, prometheus.GaugeValue, float64(ps.LogStartOffset), ps.Topic, part)
		ch <- prometheus.MustNewConstMetric(descSize, prometheus.GaugeValue, float64(ps.SizeBytes), ps.Topic, part)
		if ps.Compacted {
			ch <- prometheus.MustNewConstMetric(descDirty, prometheus.GaugeValue, ps.DirtyRatio, ps.Topic, part)
			ch <- prometheus.MustNewConstMetric(descCleanRuns, prometheus.CounterValue, float64(ps.CleanerRuns), ps.Topic, part)
			ch <- prometheus.MustNewConstMetric(descCleanBytes, prometheus.CounterValue, float64(ps.CleanerReclaimedBytes), ps.Topic, part)
			ch <- prometheus.MustNewConstMetric(descKeyless, prometheus.CounterValue, float64(ps.KeylessRefused), ps.Topic, part)
		}
	}
	lags := s.GroupLag()
	if len(lags) > maxBrokerSeries {
		lags, truncated = lags[:maxBrokerSeries], 1
	}
	members := map[string]int{}
	for _, g := range lags {
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(g.Lag), g.Group, g.Topic, strconv.FormatInt(int64(g.Partition), 10))
		members[g.Group] = max(members[g.Group], g.Members)
	}
	for g, n := range members {
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(n), g)
	}
	ch <- prometheus.MustNewConstMetric(descTxns, prometheus.GaugeValue, float64(s.ActiveTransactions()))
	if d, ok := s.(offsetsDropper); ok {
		ch <- prometheus.MustNewConstMetric(descOffsetsDropped, prometheus.CounterValue, float64(d.OffsetsTopicDropped()))
	}
	if collectShare(s, ch) {
		truncated = 1
	}
	ch <- prometheus.MustNewConstMetric(descTrunc, prometheus.GaugeValue, truncated)
}

// WatchBroker exports the built-in broker's partitions, group lag and
// transactions, read from s at every scrape. A second call replaces s.
func (m *Metrics) WatchBroker(s BrokerStats) {
	if m == nil {
		return
	}
	m.brokerOnce.Do(func() {
		m.broker = register(m.reg, &brokerCollector{})
	})
	m.broker.src.Store(&s)
}
