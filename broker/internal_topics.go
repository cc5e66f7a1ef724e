package broker

import "fmt"

// Kafka's internal topics. Kafka keeps committed offsets and group
// metadata in __consumer_offsets and transaction state in
// __transaction_state; clients and tools expect both in Metadata, marked
// internal (MetadataResponseTopic.IsInternal), which is how client-side
// regex subscriptions know to skip them.
//
// Here their partitions are led by this broker and readable, but the
// coordinators keep their state in the coordinator journal
// (groups_journal.go), not in these logs: __transaction_state stays
// empty, and __consumer_offsets gets a copy of the group coordinator's
// commits and classic group metadata in Kafka's schema (offsets_topic.go)
// for tools that compute lag from it. Clients cannot produce to them (INVALID_TOPIC_EXCEPTION,
// as Kafka's ReplicaManager refuses appends to internal topics) or delete
// them.
//
// Differences from Kafka: one partition each (Kafka's
// offsets.topic.num.partitions and transaction.state.log.num.partitions
// default to 50; one node gains nothing from spreading), created when the
// broker opens rather than on the first FindCoordinator.
const (
	offsetsTopic            = "__consumer_offsets"
	txnStateTopic           = "__transaction_state"
	internalTopicPartitions = 1
	// offsetsTopicSegmentBytes is Kafka's offsets.topic.segment.bytes
	// default (100 MiB).
	offsetsTopicSegmentBytes = "104857600"
)

var internalTopics = []string{offsetsTopic, txnStateTopic}

// isInternalTopic reports whether name is one of Kafka's internal topics.
func isInternalTopic(name string) bool {
	return name == offsetsTopic || name == txnStateTopic
}

// ensureInternalTopics creates the internal topics a data directory does
// not have yet (compacted, as Kafka creates them).
func (b *Broker) ensureInternalTopics() error {
	for _, name := range internalTopics {
		if b.lookup(name) != nil {
			continue
		}
		configs := map[string]string{"cleanup.policy": "compact"}
		if name == offsetsTopic {
			// Kafka's offsets.topic.segment.bytes: the active segment is
			// never cleaned, so a smaller one lets compaction start sooner.
			configs["segment.bytes"] = offsetsTopicSegmentBytes
		}
		s := createSpec{name: name, partitions: internalTopicPartitions, configs: configs}
		if _, err := b.createTopic(s); err != nil {
			return fmt.Errorf("create internal topic %s: %w", name, err)
		}
	}
	return nil
}
