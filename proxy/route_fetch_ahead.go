package proxy

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch-ahead: when a held-mode Fetch (route_fetch_hold.go) is answered,
// the gateway asks each broker whose part the answer carries for what
// the client's next Fetch is predicted to ask there, at once, rather than
// when that Fetch arrives. A consumer keeps one Fetch in flight per
// connection, and through the one port that is one Fetch for the whole
// cluster: without this, a broker whose records the client just got sat
// idle while the answer was written, the client decoded it, and its next
// Fetch came back (about half of each cycle in the single-port bench),
// and that Fetch then often waited for the broker's answer.
//
// The prediction is Kafka's consumer rule (batch_walk.go): for each
// partition the part sent records of, the offset after its last whole
// batch (and that batch's leader epoch, for a client that sends
// LastFetchedEpoch); every other parameter as the client last asked. The
// fetch-ahead is an incremental request of the gateway's own upstream
// session listing those partitions, and its answer is held like any
// held part (fs.out): the client's next Fetch reuses it when it asks
// exactly what was predicted (fetchState.unchanged), which a consumer
// reading on does; otherwise (it seeked, paused a partition, or forgot
// one) the answer is dropped and that broker's session starts again with
// a full request, as for any held part that no longer fits, and the
// broker gets no fetch-ahead for a while (aheadBackoffMin answers,
// doubling while the client keeps asking otherwise). A Java consumer
// leaves the partitions it still holds records of out of its next
// Fetch (which forgets them from its session), so with max.poll.records
// under an answer's records it misses often and mostly goes without.
//
// No fetch-ahead is made to a broker when the client has caught up with
// every partition the part sent records of (the next offsets are at the
// high watermark, or the last stable offset for read_committed): the
// broker would hold it for its MaxWait with nothing to send, and the
// client's next requests to that broker would queue behind it. Nor when
// the answer had an error, a diverging epoch or a preferred read replica
// for the broker's partitions (the client will change what it asks),
// when a record set's batches could not be walked (not magic 2, or more
// than one per minWalkedBatch bytes of a piped set: producers of small
// batches get none for the brokers of those sets), when another Fetch
// was planned since, or when the connection is busy (brokerConn.reserve).
//
// Memory: a fetch-ahead takes the place of the held part its broker
// would otherwise have had for the next Fetch: still at most one answer
// per upstream broker beyond the one being written. It is made earlier,
// so its record sets hold their pipes (maxRecordPipes for the process)
// from when it arrives until the client's next Fetch takes it; a part
// that finds none free is read into memory.

// aheadBackoffMin and aheadBackoffMax bound how many answers that would
// have fetched ahead a broker goes without after one the client did not
// ask for: aheadBackoffMin after the first, doubling with each miss that
// follows (a client that keeps asking otherwise, such as one that leaves
// the partitions it still holds records of out of its next Fetch),
// back to the least once a fetch-ahead is used.
const (
	aheadBackoffMin = 4
	aheadBackoffMax = 256
)

// aheadStats counts fetch-aheads sent, reused by the client's next
// Fetch, and dropped because it asked something else (FetchAheadStats).
var aheadStats struct{ sent, used, missed atomic.Int64 }

// FetchAheadStats reports the counts above, for the metrics.
func FetchAheadStats() (sent, used, missed int64) {
	return aheadStats.sent.Load(), aheadStats.used.Load(), aheadStats.missed.Load()
}

// predicted is a partition's predicted next fetch position.
type predicted struct {
	k    fsKey
	next batchNext
}

// predictNext predicts, for each broker's answer in m, where the client
// fetches next in the partitions it got records of; a broker is left out
// when any of its partitions cannot be predicted (see above). bodies are
// the answers' frames (their piped record sets carry their walks).
func (t *tunnel) predictNext(r *kmsg.FetchRequest, m map[int32]kmsg.Response, bodies []*partBody) map[int32][]predicted {
	var piped func([]byte) *pipedRecords
	var out map[int32][]predicted
broker:
	for n, resp := range m {
		fr, ok := resp.(*kmsg.FetchResponse)
		if !ok || fr.ErrorCode != 0 {
			continue
		}
		var ps []predicted
		more := false
		for i := range fr.Topics {
			tp := &fr.Topics[i]
			for j := range tp.Partitions {
				p := &tp.Partitions[j]
				if p.ErrorCode != 0 || p.DivergingEpoch.Epoch != -1 || p.PreferredReadReplica >= 0 {
					continue broker
				}
				if len(p.RecordBatches) == 0 {
					continue
				}
				if piped == nil {
					if piped = pipedLookup(bodies); piped == nil {
						piped = func([]byte) *pipedRecords { return nil }
					}
				}
				var next batchNext
				if pr := piped(p.RecordBatches); pr != nil {
					next = pr.next
				} else {
					next = lastBatchIn(p.RecordBatches)
				}
				if !next.ok {
					continue broker
				}
				ps = append(ps, predicted{t.keyOf(r, tp.Topic, tp.TopicID, p.Partition), next})
				end := p.HighWatermark
				if r.IsolationLevel == 1 {
					end = p.LastStableOffset
				}
				more = more || next.offset < end
			}
		}
		if !more {
			continue // caught up: a fetch-ahead would wait at the broker, in the way of what the client asks next
		}
		if out == nil {
			out = map[int32][]predicted{}
		}
		out[n] = ps
	}
	return out
}

// fetchAhead sends the fetch-aheads of round's answer (next, from
// predictNext, made before the merge) and holds their answers for the
// client's next Fetch. It runs before the answer is delivered, so that
// Fetch finds them in fs.out. Each is planned, and its connection
// reserved, under fs.mu, so it takes its place in its broker's epoch
// order; it is written after fs.mu is let go (brokerConn.reserve).
func (t *tunnel) fetchAhead(round *fetchRound, next map[int32][]predicted) {
	if len(next) == 0 {
		return
	}
	type ahead struct {
		n    int32
		h    *heldPart
		call *partCall
		conn *brokerConn
	}
	var sends []ahead
	fs := t.fetch
	fs.mu.Lock()
	if fs.closed || fs.lastRound != round || fs.id != round.plan.sid {
		fs.mu.Unlock()
		return
	}
	fs.lastRound = nil
	for n, ps := range next {
		prev, u := round.parts[n], fs.up[n]
		switch {
		case prev == nil || prev.conn == nil || u == nil || fs.out[n] != nil:
			continue
		case u.gen != round.plan.gens[n] || u.full || u.opening || u.id == 0:
			continue // the session there is being (re)opened
		case !fs.unchanged(u, round.plan.byNode[n]):
			continue
		case u.skipAhead > 0:
			u.skipAhead--
			continue
		case !prev.conn.reserve():
			continue // busy: no fetch-ahead this time
		}
		req := fs.aheadRequest(round.r, u, ps, len(round.plan.byNode))
		if req == nil {
			prev.conn.unreserve()
			continue
		}
		h := &heldPart{node: n, gen: u.gen, ahead: true}
		call := &partCall{node: n, req: req, pipe: t.pipe, walk: true}
		call.done = func() { t.holdArrived(h, call) }
		fs.out[n] = h
		sends = append(sends, ahead{n, h, call, prev.conn})
	}
	fs.mu.Unlock()
	for _, a := range sends {
		if queued, _ := a.conn.sendReserved(a.call); queued {
			aheadStats.sent.Add(1)
			continue
		}
		// Not sent (the connection failed): its answer will never come.
		fs.mu.Lock()
		if fs.out[a.n] == a.h {
			fs.dropOut(a.n)
		}
		fs.mu.Unlock()
	}
}

// aheadRequest is the incremental request of u's session that asks for
// ps, and moves u's session on as if it were sent; nil when a prediction
// is not past what the client asks now. The caller holds fs.mu.
func (fs *fetchState) aheadRequest(r *kmsg.FetchRequest, u *fetchUpstream, ps []predicted, fetching int) *kmsg.FetchRequest {
	for _, pr := range ps {
		if p := fs.parts[pr.k]; p == nil || pr.next.offset <= p.req.FetchOffset {
			return nil
		}
	}
	c := *r
	c.Topics, c.ForgottenTopics = nil, nil
	if fetching > 1 && c.MaxWaitMillis > fetchPartWait {
		c.MaxWaitMillis = fetchPartWait
	}
	for _, pr := range ps {
		p := fs.parts[pr.k]
		q := p.req
		q.FetchOffset = pr.next.offset
		if q.LastFetchedEpoch >= 0 {
			q.LastFetchedEpoch = pr.next.epoch
		}
		appendFetchPartition(&c, pr.k, p.name, q)
		u.held[pr.k] = q
	}
	c.SessionID, c.SessionEpoch = u.id, u.epoch
	u.epoch = nextFetchEpoch(u.epoch)
	return &c
}

// appendFetchPartition adds q to c under its topic (by id from v13,
// else by name).
func appendFetchPartition(c *kmsg.FetchRequest, k fsKey, name string, q kmsg.FetchRequestTopicPartition) {
	if c.Version >= 13 {
		name = ""
	}
	for i := range c.Topics {
		if t := &c.Topics[i]; t.Topic == name && t.TopicID == k.id {
			t.Partitions = append(t.Partitions, q)
			return
		}
	}
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = name, k.id
	t.Partitions = append(t.Partitions, q)
	c.Topics = append(c.Topics, t)
}
