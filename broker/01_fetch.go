package broker

import (
	"errors"
	"reflect"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch: v4-18
//
// Behavior:
// * Records are served from the segment files as stored (zero-copy, see
//   fetch_encode.go); whole batches from the one holding FetchOffset, never
//   past the high watermark.
// * read_committed (IsolationLevel 1, KIP-98): never past the last stable
//   offset either (the first offset of the oldest open transaction); the
//   partition reports that LSO and, in AbortedTransactions, every aborted
//   transaction overlapping [FetchOffset, first batch not returned), so the
//   consumer drops their records (Kafka's UnifiedLog.addAbortedTransactions).
//   The response's LastStableOffset is the bound the read used.
// * MaxBytes (at most fetchMaxBytes, Kafka's fetch.max.bytes) and
//   PartitionMaxBytes bound the response, except that the first
//   non-empty partition always returns at least one batch so a consumer can
//   make progress past a large batch (KIP-74).
// * Long polling: if fewer than MinBytes are available, no partition erred
//   and MaxWaitMillis > 0, the answer waits (off the read loop) until
//   enough data arrives on any partition or the wait ends: the high
//   watermark moves, or for read_committed the last stable offset (a
//   commit or abort marker), as Kafka's DelayedFetch. Closing the
//   connection cancels the wait.
// * FetchOffset below the log start offset or above the log end offset is
//   OFFSET_OUT_OF_RANGE; unknown topics UNKNOWN_TOPIC_OR_PARTITION (by
//   name) or UNKNOWN_TOPIC_ID (v13+).
// * Fetch sessions (KIP-227), v7+: see fetch_session.go. A session's
//   incremental fetch reads every partition of the session and answers
//   with only those that have records, an error, or changed offsets.
//
// Version notes:
// * v4: LastStableOffset, AbortedTransactions (null at read_uncommitted,
//   a list at read_committed), IsolationLevel; magic 2 batches need v4+,
//   hence min 4 (librdkafka's MsgVer2 needs Fetch >= 4)
// * v5: LogStartOffset; v7: sessions; v11: PreferredReadReplica (-1)
// * v12: flexible; v13: topic ids; v15: ReplicaState (ignored: no
//   followers); v16+: NodeEndpoints only with NOT_LEADER errors (never)

// fetchMaxBytes caps a Fetch response as Kafka's broker config
// fetch.max.bytes does (default 55 MiB, KIP-541), whatever MaxBytes asks.
const fetchMaxBytes = 55 << 20

func init() { regKey(1, 4, 18, handleFetch) }

// fetchPart is one requested partition and what the last read found.
type fetchPart struct {
	partition int32
	offset    int64
	maxBytes  int32
	p         *partition // nil when code is set up front
	sp        *sessPart  // the session's entry, when in a session
	skip      bool       // left out of an incremental response

	code           int16
	hw, lso, start int64
	rr             *storage.ReadResult
	aborted        []storage.AbortedTxn // read_committed: overlapping rr
}

// fetchTopic is one requested topic and its partitions.
type fetchTopic struct {
	name  string
	id    [16]byte
	parts []fetchPart
}

// fetch is one Fetch request in progress.
type fetch struct {
	c      *Conn
	req    *kmsg.FetchRequest
	topics []fetchTopic
	// sessionCode is a top-level error (KIP-227 session errors).
	sessionCode int16
	// sess is the fetch session this request uses (nil: sessionless);
	// sessionID is what the response reports (0: none).
	sess        *fetchSession
	sessionID   int32
	incremental bool
}

func handleFetch(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.FetchRequest)
	f := &fetch{c: c, req: req}
	items := f.openSession()
	if f.sessionCode != 0 {
		r(f.encode(), nil)
		return
	}
	f.resolve(items)
	total, erred := f.read()
	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if erred || total >= int(req.MinBytes) || maxWait <= 0 {
		r(f.encode(), nil)
		return
	}
	go f.longPoll(maxWait, r)
}

// resolve looks up every partition to read. Consecutive items of one topic
// share a response topic.
func (f *fetch) resolve(items []fetchItem) {
	b := f.c.b
	var t *topic
	for i, it := range items {
		if i == 0 || it.key.name != items[i-1].key.name || it.key.id != items[i-1].key.id {
			f.topics = append(f.topics, fetchTopic{name: it.key.name, id: it.key.id})
			if f.req.Version >= 13 {
				t = b.lookupID(it.key.id)
			} else {
				t = b.lookup(it.key.name)
			}
		}
		ft := &f.topics[len(f.topics)-1]
		fp := fetchPart{partition: it.key.partition, offset: it.offset, maxBytes: it.maxBytes, sp: it.sp}
		switch {
		case t == nil && f.req.Version >= 13:
			fp.code = kerr.UnknownTopicID.Code
		case t == nil:
			fp.code = kerr.UnknownTopicOrPartition.Code
		default:
			if fp.p = b.partitionOf(t, it.key.partition); fp.p == nil {
				fp.code = kerr.UnknownTopicOrPartition.Code
			}
		}
		ft.parts = append(ft.parts, fp)
	}
}

// read reads every partition once, within the byte limits. It returns the
// record bytes found and whether any partition erred.
func (f *fetch) read() (total int, erred bool) {
	committed := f.req.IsolationLevel == 1
	remaining := fetchMaxBytes
	if f.req.Version >= 3 && f.req.MaxBytes >= 0 {
		remaining = min(int(f.req.MaxBytes), fetchMaxBytes)
	}
	for ti := range f.topics {
		for pi := range f.topics[ti].parts {
			fp := &f.topics[ti].parts[pi]
			if fp.rr != nil {
				fp.rr.Release()
				fp.rr = nil
			}
			if fp.p == nil {
				erred = true
				continue
			}
			fp.code, fp.aborted = 0, nil
			l := fp.p.log
			// The LSO first: it only grows, so a read bounded by it never
			// passes the one the response reports.
			fp.lso = l.LastStableOffset()
			fp.hw, fp.start = l.HighWatermark(), l.LogStartOffset()
			end := fp.hw
			if committed {
				end = fp.lso
			}
			switch {
			case fp.offset < fp.start || fp.offset > l.LogEndOffset():
				fp.code = kerr.OffsetOutOfRange.Code
				erred = true
				continue
			case fp.offset >= end || remaining <= 0 || fp.maxBytes <= 0:
				continue
			}
			limit := min(int(fp.maxBytes), remaining)
			rr, err := l.ReadUpTo(fp.offset, int32(limit), end)
			if err != nil {
				fp.code = storageCode(err)
				if fp.code == kerr.KafkaStorageError.Code {
					f.c.b.log.Error("fetch read", "partition", fp.p.dirName(), "offset", fp.offset, "err", err)
				}
				erred = true
				continue
			}
			fp.hw, fp.start = rr.HighWatermark, rr.LogStartOffset
			if !committed {
				fp.lso = rr.LastStableOffset
			}
			// Only the first non-empty partition may exceed the limits.
			if total > 0 && rr.Size > limit {
				rr.Release()
				continue
			}
			if rr.Size == 0 {
				rr.Release()
				continue
			}
			fp.rr = rr
			if committed {
				fp.aborted = l.AbortedTransactions(fp.offset, rr.NextOffset)
			}
			total += rr.Size
			remaining -= rr.Size
		}
	}
	return total, erred
}

// longPoll waits until MinBytes are available, the wait ends, or the
// connection or broker closes, then answers.
func (f *fetch) longPoll(maxWait time.Duration, r reply) {
	deadline := time.NewTimer(maxWait)
	defer deadline.Stop()
	for {
		// Case 0: deadline, 1: connection closed, 2: broker closing; then
		// one case per partition: its high watermark (read_committed: its
		// last stable offset) passed what we saw.
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(f.c.done)},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(f.c.b.stop)},
		}
		for _, ft := range f.topics {
			for _, fp := range ft.parts {
				if fp.p == nil {
					continue
				}
				ch := fp.p.log.Wait(max(fp.offset, fp.hw))
				if f.req.IsolationLevel == 1 {
					ch = fp.p.log.WaitStable(max(fp.offset, fp.lso))
				}
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
			}
		}
		chosen, _, _ := reflect.Select(cases)
		switch chosen {
		case 1:
			f.release()
			r(nil, ErrClosed)
			return
		case 0, 2:
			r(f.encode(), nil)
			return
		}
		total, erred := f.read()
		if erred || total >= int(f.req.MinBytes) {
			r(f.encode(), nil)
			return
		}
	}
}

// release drops every read result not handed to a response.
func (f *fetch) release() {
	for ti := range f.topics {
		for pi := range f.topics[ti].parts {
			if rr := f.topics[ti].parts[pi].rr; rr != nil {
				rr.Release()
				f.topics[ti].parts[pi].rr = nil
			}
		}
	}
}

// errFetchBodyReleased is returned by a fetch body written after Release.
var errFetchBodyReleased = errors.New("fetch response already released")
