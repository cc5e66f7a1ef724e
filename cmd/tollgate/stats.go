package main

import (
	"github.com/tollgate-kafka/tollgate/broker"
	"github.com/tollgate-kafka/tollgate/metrics"
)

// brokerStats adapts the built-in broker's stats to the metrics collector
// (neither package imports the other).
type brokerStats struct{ b *broker.Broker }

var _ metrics.BrokerStats = brokerStats{}

func (s brokerStats) Partitions() []metrics.PartitionStat {
	ps := s.b.PartitionStats()
	out := make([]metrics.PartitionStat, len(ps))
	for i, p := range ps {
		out[i] = metrics.PartitionStat{Topic: p.Topic, Partition: p.Partition,
			LogStartOffset: p.LogStartOffset, LogEndOffset: p.LogEndOffset, SizeBytes: p.SizeBytes}
	}
	return out
}

func (s brokerStats) GroupLag() []metrics.GroupLag {
	gl := s.b.GroupLag()
	out := make([]metrics.GroupLag, len(gl))
	for i, g := range gl {
		out[i] = metrics.GroupLag{Group: g.Group, Topic: g.Topic, Partition: g.Partition, Lag: g.Lag, Members: g.Members}
	}
	return out
}

func (s brokerStats) ActiveTransactions() int { return s.b.ActiveTransactions() }
