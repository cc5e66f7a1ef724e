package rewrite

// The Produce and Fetch pre-check.
//
// Produce and Fetch responses are the hot path, and almost none carry the
// KIP-951 NodeEndpoints: the broker fills them only for partitions that fail
// with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH (KafkaApis
// handleProduceRequest / handleFetchRequest). Decoding every response with
// kmsg to find out costs an allocation per topic and partition, so instead
// withoutEndpoints walks the body just far enough to reach the top-level
// tagged fields and reports whether tag 0 is absent.
//
// This is the one place the package reads the wire format by hand, so it is
// held to three rules:
//   - It only ever answers "certainly no endpoints". Anything it does not
//     fully understand (a version outside its table, an over-long varint, a
//     null non-nullable string, a short body) makes it answer false, and the
//     caller decodes with kmsg as for every other key.
//   - It follows kmsg's generated readFrom field by field (generated.go,
//     ProduceResponse.readFrom and FetchResponse.readFrom, kmsg v1.15.1), and
//     FuzzPrecheck checks it against kmsg on arbitrary bodies: whenever it
//     says "no endpoints", kmsg must decode no Brokers.
//   - Its version table ends at the kmsg max it was written against;
//     TestPrecheckCoversKmsgMax fails when a kmsg upgrade adds a version,
//     and until the walk is extended such versions take the decode path.

import (
	"encoding/binary"

	"github.com/tollgate-kafka/tollgate/apis"
)

// Highest versions the walk was written for. Produce and Fetch responses
// are flexible (and so may carry tags) from v9 and v12.
const (
	precheckProduceMax = 13
	precheckFetchMax   = 18
)

// withoutEndpoints reports whether a Produce (0) or Fetch (1) response body
// certainly has no top-level tag 0 (NodeEndpoints).
func withoutEndpoints(key, version int16, body []byte) bool {
	w := walker{b: body}
	switch {
	case key == apis.Produce && version >= 9 && version <= precheckProduceMax:
		w.produce(version)
	case key == apis.Fetch && version >= 12 && version <= precheckFetchMax:
		w.fetch(version)
	default:
		return false
	}
	return w.ok && w.noTag0()
}

// walker is a forward-only reader that turns !ok at the first thing it does
// not understand; every method is a no-op once !ok.
type walker struct {
	b  []byte
	ok bool
}

// skip consumes n bytes.
func (w *walker) skip(n int) {
	if n < 0 || n > len(w.b) {
		w.b, w.ok = nil, false
		return
	}
	w.b = w.b[n:]
}

// uvarint reads a uvarint of at most four bytes (values below 2^28). kmsg
// reads up to five (a uint32); longer encodings are legal but never needed
// for a body under the frame limit, so they send the body to kmsg instead,
// keeping this reader's values identical to kmsg's whenever it succeeds.
func (w *walker) uvarint() int {
	v, n := binary.Uvarint(w.b)
	if n <= 0 || n > 4 {
		w.b, w.ok = nil, false
		return 0
	}
	w.b = w.b[n:]
	return int(v)
}

// compactLen reads a compact length (uvarint N+1; 0 is null, returned as -1).
func (w *walker) compactLen() int { return w.uvarint() - 1 }

// count reads a compact array length and returns the number of elements
// to walk. A null array (kmsg reads it as empty) has none; a count larger
// than the bytes left is malformed, as each element takes at least one.
func (w *walker) count() int {
	n := w.compactLen()
	if n > len(w.b) {
		w.b, w.ok = nil, false
		return 0
	}
	return max(n, 0)
}

// str skips a non-nullable compact string; a null one is malformed (kmsg
// fails on it too).
func (w *walker) str() {
	n := w.compactLen()
	if n < 0 {
		w.ok = false
		return
	}
	w.skip(n)
}

// nullable skips a compact nullable string or bytes.
func (w *walker) nullable() {
	if n := w.compactLen(); n >= 0 {
		w.skip(n)
	}
}

// tags skips a tagged-field section.
func (w *walker) tags() {
	for n := w.uvarint(); n > 0 && w.ok; n-- {
		w.uvarint() // tag
		w.skip(w.uvarint())
	}
}

// noTag0 reads the top-level tagged-field section and reports whether it
// holds no tag 0. Bytes after it are ignored, as kmsg ignores them.
func (w *walker) noTag0() bool {
	for n := w.uvarint(); n > 0 && w.ok; n-- {
		if w.uvarint() == 0 {
			return false
		}
		w.skip(w.uvarint())
	}
	return w.ok
}

// topic skips a topic name (v0–12 of both keys) or topic id (v13+).
func (w *walker) topic(version int16) {
	if version <= 12 {
		w.str()
	} else {
		w.skip(16)
	}
}

// The walks below are plain loops rather than an array(func()) helper, so
// the hot path has no indirect calls.

// produce walks a flexible ProduceResponse up to its top-level tags.
func (w *walker) produce(version int16) {
	w.ok = true
	for range w.count() { // Topics
		w.topic(version)
		for range w.count() { // Partitions
			// Partition, ErrorCode, BaseOffset, LogAppendTime (v2+),
			// LogStartOffset (v5+): every flexible version has all five.
			w.skip(4 + 2 + 8 + 8 + 8)
			for range w.count() { // ErrorRecords (v8+)
				w.skip(4) // RelativeOffset
				w.nullable()
				w.tags()
			}
			w.nullable() // ErrorMessage (v8+)
			w.tags()     // CurrentLeader is tag 0 here: no address
			if !w.ok {
				return
			}
		}
		w.tags()
	}
	w.skip(4) // ThrottleMillis
}

// fetch walks a flexible FetchResponse up to its top-level tags.
func (w *walker) fetch(version int16) {
	w.ok = true
	w.skip(4 + 2 + 4)     // ThrottleMillis, ErrorCode, SessionID
	for range w.count() { // Topics
		w.topic(version)
		for range w.count() { // Partitions
			// Partition, ErrorCode, HighWatermark, LastStableOffset,
			// LogStartOffset.
			w.skip(4 + 2 + 8 + 8 + 8)
			for range w.count() { // AbortedTransactions (nullable)
				w.skip(8 + 8) // ProducerID, FirstOffset
				w.tags()
			}
			w.skip(4)    // PreferredReadReplica (v11+)
			w.nullable() // RecordBatches
			w.tags()     // DivergingEpoch, CurrentLeader, SnapshotID
			if !w.ok {
				return
			}
		}
		w.tags()
	}
}
