package broker

import (
	"encoding/binary"
	"hash/crc32"
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/broker/storage"
)

// The __consumer_offsets mirror: every offset commit, offset deletion and
// classic group metadata change the group coordinator writes to its
// journal (groups_journal.go, the source of truth) is also appended to
// __consumer_offsets partition 0 in the schema Kafka's group coordinator
// writes, so tools that read the topic to compute lag (Burrow, Kafka
// Offset Monitor) work against the built-in broker. Schemas, from Kafka's
// group-coordinator/src/main/resources/common/message/*.json (the encoders
// are kmsg's generated types):
//
//	OffsetCommitKey    version 1: group, topic, partition
//	OffsetCommitValue  version 3: offset, leader epoch, metadata, commit timestamp
//	GroupMetadataKey   version 2: group
//	GroupMetadataValue version 3: protocol type, generation, protocol,
//	                   leader, current state timestamp, members
//
// A deleted offset or group is a tombstone (null value); the log is
// compacted by the cleaner (cleaner.go) like any compact topic.
//
// Ownership: the coordinator enqueues under the group's lock, in the order
// it writes the journal, so the latest record of a key in the topic is the
// journal's. One goroutine (run) drains the queue and appends; a commit
// never waits for it. When the queue is full the records are dropped,
// counted (OffsetsTopicDropped) and logged at most once a second: the
// journal stays correct, and the next restart rewrites the current state
// (syncOffsetsTopic).
const (
	offsetCommitKeyVersion    = 1
	offsetCommitValueVersion  = 3
	groupMetadataKeyVersion   = 2
	groupMetadataValueVersion = 3
	offsetsMirrorQueue        = 4096 // enqueued writes (each one commit's records)
	offsetsMirrorBatchMax     = 1000 // records per appended batch
	offsetsMirrorBatchBytes   = 512 << 10
	mirrorRecordOverhead      = 32 // a record's varints and attributes, at most
)

// mirrorRecord is one __consumer_offsets record; val nil is a tombstone.
type mirrorRecord struct{ key, val []byte }

// offsetsMirror owns the queue and the one goroutine writing the topic.
type offsetsMirror struct {
	b       *Broker
	q       chan []mirrorRecord
	dropped atomic.Int64
	written atomic.Int64
	dropLog everySecond
}

func newOffsetsMirror(b *Broker) *offsetsMirror {
	return &offsetsMirror{b: b, q: make(chan []mirrorRecord, offsetsMirrorQueue)}
}

// enqueue hands recs to the writer without blocking.
func (m *offsetsMirror) enqueue(recs []mirrorRecord) {
	if m == nil || len(recs) == 0 {
		return
	}
	select {
	case m.q <- recs:
	default:
		n := m.dropped.Add(int64(len(recs)))
		if m.dropLog.allow(time.Now()) {
			m.b.log.Warn("__consumer_offsets mirror queue full: records dropped (the coordinator journal keeps them)",
				"dropped_total", n)
		}
	}
}

// run appends queued records until stop, then what is still queued.
func (m *offsetsMirror) run(stop <-chan struct{}) {
	for {
		select {
		case recs := <-m.q:
			m.write(m.gather(recs))
		case <-stop:
			for {
				select {
				case recs := <-m.q:
					m.write(m.gather(recs))
				default:
					return
				}
			}
		}
	}
}

// gather adds whatever else is queued, up to offsetsMirrorBatchMax records.
func (m *offsetsMirror) gather(recs []mirrorRecord) []mirrorRecord {
	for len(recs) < offsetsMirrorBatchMax {
		select {
		case more := <-m.q:
			recs = append(recs, more...)
		default:
			return recs
		}
	}
	return recs
}

// write appends recs to __consumer_offsets partition 0 in batches.
func (m *offsetsMirror) write(recs []mirrorRecord) {
	p := m.b.partitionOf(m.b.lookup(offsetsTopic), 0)
	if p == nil {
		return
	}
	for len(recs) > 0 {
		n := batchLen(recs)
		now := time.Now()
		if _, _, err := p.log.Append(mirrorBatch(recs[:n], now), storage.AppendOptions{Now: now}); err != nil {
			m.dropped.Add(int64(n))
			if m.dropLog.allow(now) {
				m.b.log.Warn("__consumer_offsets mirror append failed (the coordinator journal keeps the records)", "err", err)
			}
		} else {
			m.written.Add(int64(n))
		}
		recs = recs[n:]
	}
}

// batchLen is how many of recs go in the next batch: at most
// offsetsMirrorBatchMax records and offsetsMirrorBatchBytes of keys and
// values (the topic's max.message.bytes is Kafka's 1 MiB), at least one.
// A single record over the topic's limit is refused by the log, counted
// and logged as dropped.
func batchLen(recs []mirrorRecord) int {
	size := 0
	for i, r := range recs {
		size += len(r.key) + len(r.val) + mirrorRecordOverhead
		if i > 0 && (i == offsetsMirrorBatchMax || size > offsetsMirrorBatchBytes) {
			return i
		}
	}
	return len(recs)
}

// mirrorBatch encodes recs as one record batch (magic 2, no producer id,
// uncompressed, CreateTime now) with its length and CRC-32C set.
func mirrorBatch(recs []mirrorRecord, now time.Time) []byte {
	var body []byte
	for i, r := range recs {
		rec := kmsg.Record{OffsetDelta: int32(i), Key: r.key, Value: r.val}
		enc := rec.AppendTo(nil)[1:] // AppendTo writes Length 0 first; we prefix the real length
		body = binary.AppendVarint(body, int64(len(enc)))
		body = append(body, enc...)
	}
	ms := now.UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  ms, MaxTimestamp: ms,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(recs)), Records: body,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoliTable))
	return raw
}

// offsetCommitRecord is Kafka's record of one committed offset (val nil
// when oc is nil: a tombstone).
func offsetCommitRecord(group, topic string, p int32, oc *committed) mirrorRecord {
	k := kmsg.OffsetCommitKey{Version: offsetCommitKeyVersion, Group: group, Topic: topic, Partition: p}
	r := mirrorRecord{key: k.AppendTo(nil)}
	if oc != nil {
		v := kmsg.NewOffsetCommitValue()
		v.Version, v.Offset, v.LeaderEpoch, v.CommitTimestamp = offsetCommitValueVersion, oc.Offset, oc.LeaderEpoch, oc.CommitMs
		if oc.Metadata != nil {
			v.Metadata = *oc.Metadata
		}
		r.val = v.AppendTo(nil)
	}
	return r
}

func groupMetadataKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupMetadataKeyVersion, Group: group}
	return k.AppendTo(nil)
}

// groupMetadataRecord is Kafka's record of a classic group's metadata
// (Kafka's GroupMetadataManager.groupMetadataValue): a Stable group's
// protocol, leader and members with their subscription (the metadata of
// the chosen protocol) and assignment, or an Empty group's protocol type
// and generation. Caller holds g.mu.
func (g *group) groupMetadataRecord(now time.Time) mirrorRecord {
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.ProtocolType, v.Generation = groupMetadataValueVersion, g.protocolType, g.generation
	v.CurrentStateTimestamp = now.UnixMilli()
	if g.state == groupStable {
		proto, leader := g.protocol, g.leader
		v.Protocol, v.Leader = &proto, &leader
		ids := make([]string, 0, len(g.members))
		for id := range g.members {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			m := g.members[id]
			vm := kmsg.NewGroupMetadataValueMember()
			vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instance, m.clientID, m.clientHost
			vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis = int32(m.rebalance.Milliseconds()), int32(m.session.Milliseconds())
			vm.Assignment = m.assignment
			for _, p := range m.protocols {
				if p.Name == proto {
					vm.Subscription = p.Metadata
				}
			}
			v.Members = append(v.Members, vm)
		}
	}
	return mirrorRecord{key: groupMetadataKey(g.name), val: v.AppendTo(nil)}
}

// isClassic reports whether g is a classic group (not KIP-848 or share),
// the only kind whose metadata Kafka writes as GroupMetadataValue.
func (g *group) isClassic() bool { return g.cg == nil && g.sg == nil }

// mirrorGroupMetadata mirrors a classic group's metadata when it is
// Stable or Empty (states in the middle of a rebalance are not written,
// as Kafka writes at the end of SyncGroup and when the group empties).
// Caller holds g.mu.
func (g *group) mirrorGroupMetadata() {
	if !g.isClassic() || g.protocolType == "" || (g.state != groupStable && g.state != groupEmpty) {
		return
	}
	g.c.b.mirror.enqueue([]mirrorRecord{g.groupMetadataRecord(time.Now())})
}

// syncOffsetsTopic appends the coordinator's whole current state (every
// committed offset, every classic group's metadata) to the mirror queue's
// topic directly, at open: whatever a full queue or a crash lost before
// is rewritten, and compaction drops the older copies.
func (b *Broker) syncOffsetsTopic() {
	var recs []mirrorRecord
	for _, g := range b.groups.groups() {
		g.mu.Lock()
		for t, ps := range g.offsets {
			for p, oc := range ps {
				oc := oc
				recs = append(recs, offsetCommitRecord(g.name, t, p, &oc))
			}
		}
		if g.isClassic() && g.protocolType != "" && (g.state == groupStable || g.state == groupEmpty) {
			recs = append(recs, g.groupMetadataRecord(time.Now()))
		}
		g.mu.Unlock()
	}
	b.mirror.write(recs)
}

// OffsetsTopicDropped is how many __consumer_offsets records the mirror
// dropped (queue full or append failed) since the broker opened.
func (b *Broker) OffsetsTopicDropped() int64 {
	if b.mirror == nil {
		return 0
	}
	return b.mirror.dropped.Load()
}
