package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// Requested names and ids are de-duplicated before a handler sees them, so
// the work and the response of one request grow with the distinct names
// it asks for, not with how often it repeats them: a Metadata naming the
// empty topic five million times was decoded into five million structs and
// answered with five million entries. Kafka does the same: KafkaApis
// handleTopicMetadataRequest turns the requested topics into a set, and
// the coordinators and the replica manager key their work by group,
// transactional id and partition.
//
// The first occurrence is kept, later ones are dropped; for topic lists
// with partitions, a repeated topic's partitions join the first entry and
// the partitions are de-duplicated in turn. CreateTopics and
// CreatePartitions are not touched here: Kafka answers a repeated name
// there with INVALID_REQUEST, once per name, which their handlers do.
//
// NOTE: a new handler that takes a list of names or ids belongs here.

// dedupeRequest de-duplicates req's lists in place.
func dedupeRequest(req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		if r.Topics != nil { // nil means all topics; keep it nil
			r.Topics = dedupe(r.Topics, func(t *kmsg.MetadataRequestTopic) topicKey { return keyOf(t.Topic, t.TopicID) }, nil)
		}
	case *kmsg.DescribeGroupsRequest:
		r.Groups = dedupeStrings(r.Groups)
	case *kmsg.DeleteGroupsRequest:
		r.Groups = dedupeStrings(r.Groups)
	case *kmsg.ConsumerGroupDescribeRequest:
		r.Groups = dedupeStrings(r.Groups)
	case *kmsg.DescribeTransactionsRequest:
		r.TransactionalIDs = dedupeStrings(r.TransactionalIDs)
	case *kmsg.ShareGroupDescribeRequest:
		r.GroupIDs = dedupeStrings(r.GroupIDs)
	case *kmsg.DescribeTopicPartitionsRequest:
		r.Topics = dedupe(r.Topics, func(t *kmsg.DescribeTopicPartitionsRequestTopic) string { return t.Topic }, nil)
	case *kmsg.DescribeConfigsRequest:
		type res struct {
			t    kmsg.ConfigResourceType
			name string
		}
		r.Resources = dedupe(r.Resources, func(x *kmsg.DescribeConfigsRequestResource) res { return res{x.ResourceType, x.ResourceName} }, nil)
	case *kmsg.DeleteTopicsRequest:
		r.TopicNames = dedupeStrings(r.TopicNames)
		r.Topics = dedupe(r.Topics, func(t *kmsg.DeleteTopicsRequestTopic) topicKey { return keyOf(t.Topic, t.TopicID) }, nil)
	default:
		dedupePartitioned(req)
	}
}

// dedupePartitioned handles the requests whose topics carry partitions.
func dedupePartitioned(req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.ListOffsetsRequest:
		r.Topics = dedupe(r.Topics, func(t *kmsg.ListOffsetsRequestTopic) string { return t.Topic },
			func(dst, src *kmsg.ListOffsetsRequestTopic) {
				dst.Partitions = append(dst.Partitions, src.Partitions...)
			})
		for i := range r.Topics {
			r.Topics[i].Partitions = dedupe(r.Topics[i].Partitions, func(p *kmsg.ListOffsetsRequestTopicPartition) int32 { return p.Partition }, nil)
		}
	case *kmsg.DeleteRecordsRequest:
		r.Topics = dedupe(r.Topics, func(t *kmsg.DeleteRecordsRequestTopic) string { return t.Topic },
			func(dst, src *kmsg.DeleteRecordsRequestTopic) {
				dst.Partitions = append(dst.Partitions, src.Partitions...)
			})
		for i := range r.Topics {
			r.Topics[i].Partitions = dedupe(r.Topics[i].Partitions, func(p *kmsg.DeleteRecordsRequestTopicPartition) int32 { return p.Partition }, nil)
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		r.Topics = dedupe(r.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic },
			func(dst, src *kmsg.OffsetForLeaderEpochRequestTopic) {
				dst.Partitions = append(dst.Partitions, src.Partitions...)
			})
		for i := range r.Topics {
			r.Topics[i].Partitions = dedupe(r.Topics[i].Partitions, func(p *kmsg.OffsetForLeaderEpochRequestTopicPartition) int32 { return p.Partition }, nil)
		}
	case *kmsg.DescribeLogDirsRequest:
		r.Topics = dedupe(r.Topics, func(t *kmsg.DescribeLogDirsRequestTopic) string { return t.Topic },
			func(dst, src *kmsg.DescribeLogDirsRequestTopic) {
				dst.Partitions = append(dst.Partitions, src.Partitions...)
			})
		for i := range r.Topics {
			r.Topics[i].Partitions = dedupeInt32s(r.Topics[i].Partitions)
		}
	case *kmsg.DescribeProducersRequest:
		r.Topics = dedupe(r.Topics, func(t *kmsg.DescribeProducersRequestTopic) string { return t.Topic },
			func(dst, src *kmsg.DescribeProducersRequestTopic) {
				dst.Partitions = append(dst.Partitions, src.Partitions...)
			})
		for i := range r.Topics {
			r.Topics[i].Partitions = dedupeInt32s(r.Topics[i].Partitions)
		}
	case *kmsg.OffsetFetchRequest:
		dedupeOffsetFetch(r)
	default:
		dedupeWrites(req)
	}
}

// dedupeWrites handles requests that change state per partition. A
// repeated partition keeps its first position and its last values, as
// Kafka's maps of the request do (the last entry wins).
func dedupeWrites(req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		r.Topics = dedupe(r.Topics, func(t *kmsg.FetchRequestTopic) topicKey { return topicKey{t.Topic, t.TopicID} },
			func(dst, src *kmsg.FetchRequestTopic) { dst.Partitions = append(dst.Partitions, src.Partitions...) })
		for i := range r.Topics {
			r.Topics[i].Partitions = dedupe(r.Topics[i].Partitions, func(p *kmsg.FetchRequestTopicPartition) int32 { return p.Partition },
				func(dst, src *kmsg.FetchRequestTopicPartition) { *dst = *src })
		}
	case *kmsg.OffsetCommitRequest:
		r.Topics = dedupe(r.Topics, func(t *kmsg.OffsetCommitRequestTopic) topicKey { return topicKey{t.Topic, t.TopicID} },
			func(dst, src *kmsg.OffsetCommitRequestTopic) {
				dst.Partitions = append(dst.Partitions, src.Partitions...)
			})
		for i := range r.Topics {
			r.Topics[i].Partitions = dedupe(r.Topics[i].Partitions, func(p *kmsg.OffsetCommitRequestTopicPartition) int32 { return p.Partition },
				func(dst, src *kmsg.OffsetCommitRequestTopicPartition) { *dst = *src })
		}
	case *kmsg.TxnOffsetCommitRequest:
		r.Topics = dedupe(r.Topics, func(t *kmsg.TxnOffsetCommitRequestTopic) topicKey { return topicKey{t.Topic, t.TopicID} },
			func(dst, src *kmsg.TxnOffsetCommitRequestTopic) {
				dst.Partitions = append(dst.Partitions, src.Partitions...)
			})
		for i := range r.Topics {
			r.Topics[i].Partitions = dedupe(r.Topics[i].Partitions, func(p *kmsg.TxnOffsetCommitRequestTopicPartition) int32 { return p.Partition },
				func(dst, src *kmsg.TxnOffsetCommitRequestTopicPartition) { *dst = *src })
		}
	case *kmsg.AddPartitionsToTxnRequest:
		r.Topics = dedupe(r.Topics, func(t *kmsg.AddPartitionsToTxnRequestTopic) string { return t.Topic },
			func(dst, src *kmsg.AddPartitionsToTxnRequestTopic) {
				dst.Partitions = append(dst.Partitions, src.Partitions...)
			})
		for i := range r.Topics {
			r.Topics[i].Partitions = dedupeInt32s(r.Topics[i].Partitions)
		}
	case *kmsg.OffsetDeleteRequest:
		r.Topics = dedupe(r.Topics, func(t *kmsg.OffsetDeleteRequestTopic) string { return t.Topic },
			func(dst, src *kmsg.OffsetDeleteRequestTopic) {
				dst.Partitions = append(dst.Partitions, src.Partitions...)
			})
		for i := range r.Topics {
			r.Topics[i].Partitions = dedupe(r.Topics[i].Partitions, func(p *kmsg.OffsetDeleteRequestTopicPartition) int32 { return p.Partition }, nil)
		}
	default:
		dedupeReplicaAdmin(req)
	}
}

// dedupeReplicaAdmin handles the replica admin keys (43, 45, 46; 34
// answers each partition once by itself).
func dedupeReplicaAdmin(req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.ElectLeadersRequest:
		if r.Topics != nil { // nil means every partition; keep it nil
			r.Topics = dedupe(r.Topics, func(t *kmsg.ElectLeadersRequestTopic) string { return t.Topic },
				func(dst, src *kmsg.ElectLeadersRequestTopic) {
					dst.Partitions = append(dst.Partitions, src.Partitions...)
				})
			for i := range r.Topics {
				r.Topics[i].Partitions = dedupeInt32s(r.Topics[i].Partitions)
			}
		}
	case *kmsg.AlterPartitionAssignmentsRequest:
		r.Topics = dedupe(r.Topics, func(t *kmsg.AlterPartitionAssignmentsRequestTopic) string { return t.Topic },
			func(dst, src *kmsg.AlterPartitionAssignmentsRequestTopic) {
				dst.Partitions = append(dst.Partitions, src.Partitions...)
			})
		for i := range r.Topics {
			r.Topics[i].Partitions = dedupe(r.Topics[i].Partitions, func(p *kmsg.AlterPartitionAssignmentsRequestTopicPartition) int32 { return p.Partition },
				func(dst, src *kmsg.AlterPartitionAssignmentsRequestTopicPartition) { *dst = *src })
		}
	case *kmsg.ListPartitionReassignmentsRequest:
		if r.Topics != nil {
			r.Topics = dedupe(r.Topics, func(t *kmsg.ListPartitionReassignmentsRequestTopic) string { return t.Topic }, nil)
		}
	}
}

func dedupeOffsetFetch(r *kmsg.OffsetFetchRequest) {
	if r.Topics != nil {
		r.Topics = dedupe(r.Topics, func(t *kmsg.OffsetFetchRequestTopic) string { return t.Topic },
			func(dst, src *kmsg.OffsetFetchRequestTopic) {
				dst.Partitions = append(dst.Partitions, src.Partitions...)
			})
		for i := range r.Topics {
			r.Topics[i].Partitions = dedupeInt32s(r.Topics[i].Partitions)
		}
	}
	r.Groups = dedupe(r.Groups, func(g *kmsg.OffsetFetchRequestGroup) string { return g.Group },
		func(dst, src *kmsg.OffsetFetchRequestGroup) {
			if dst.Topics != nil {
				dst.Topics = append(dst.Topics, src.Topics...)
			}
		})
	for i := range r.Groups {
		g := &r.Groups[i]
		if g.Topics == nil { // all topics
			continue
		}
		g.Topics = dedupe(g.Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) topicKey { return topicKey{t.Topic, t.TopicID} },
			func(dst, src *kmsg.OffsetFetchRequestGroupTopic) {
				dst.Partitions = append(dst.Partitions, src.Partitions...)
			})
		for j := range g.Topics {
			g.Topics[j].Partitions = dedupeInt32s(g.Topics[j].Partitions)
		}
	}
}

// topicKey names a topic by name or, when the name is null, by id.
type topicKey struct {
	name string
	id   [16]byte
}

func keyOf(name *string, id [16]byte) topicKey {
	if name != nil {
		return topicKey{name: *name}
	}
	return topicKey{id: id}
}

// dedupe keeps the first element of each key, in order, merging later
// ones into it when merge is set. It allocates nothing for a list without
// repeats shorter than two.
func dedupe[T any, K comparable](s []T, key func(*T) K, merge func(dst, src *T)) []T {
	if len(s) < 2 {
		return s
	}
	first := make(map[K]int, min(len(s), 1024))
	out := s[:0]
	for i := range s {
		k := key(&s[i])
		if j, ok := first[k]; ok {
			if merge != nil {
				merge(&out[j], &s[i])
			}
			continue
		}
		first[k] = len(out)
		out = append(out, s[i])
	}
	clear(s[len(out):]) // drop references the tail still holds
	return out
}

func dedupeStrings(s []string) []string {
	return dedupe(s, func(x *string) string { return *x }, nil)
}

func dedupeInt32s(s []int32) []int32 {
	return dedupe(s, func(x *int32) int32 { return *x }, nil)
}
