package proxy

import "encoding/binary"

// A consumer's next Fetch asks, for each partition it got records of,
// the offset after the last whole record batch it was sent (Kafka's
// consumer: the last batch's nextOffset; kgo: lastOffset + 1 of the
// batch), and a Java consumer also names that batch's leader epoch
// (LastFetchedEpoch, KIP-320; kgo sends -1). A partial batch at the end
// of a record set (a broker may cut one at the partition's max bytes,
// LogSegment.read) is skipped and asked again. The gateway's fetch-ahead
// (route_fetch_ahead.go) predicts that request from the batch headers,
// which it reads as the record bytes pass (batchWalk): from memory, or,
// for a record set spliced into pipes (pipe_records.go), by peeking at
// the socket before each header is spliced.

// batchHeadLen is the part of a record batch header (magic 2) the walk
// reads: baseOffset int64, batchLength int32, partitionLeaderEpoch
// int32, magic int8, crc int32, attributes int16, lastOffsetDelta int32
// (Kafka's DefaultRecordBatch).
const batchHeadLen = 27

// batchLengthMin is the smallest batchLength a magic 2 batch may have:
// the header after the length field (49 bytes) with no records.
const batchLengthMin = 49

// minWalkedBatch bounds the batches a piped record set's walk reads: one
// per minWalkedBatch bytes on average (and a few more), past which it
// gives up. Each header a splice stops at costs a peek and a splice more,
// worth it for large batches and not for small ones.
const minWalkedBatch = 64 << 10

// batchNext is what a consumer asks next after a record set: offset, and
// epoch, the last whole batch's leader epoch; ok is false when the walk
// did not find one (no whole batch, not magic 2, or the walk gave up).
type batchNext struct {
	offset int64
	epoch  int32
	ok     bool
}

// batchWalk follows the batch headers of a record set of n bytes as its
// bytes pass, in order: with their content (pass), without it (skip, a
// splice: never over header bytes it does not know yet, see spliceable),
// or seen ahead of passing (peeked, a peek at the socket).
// Ownership: the reader filling one record set.
type batchWalk struct {
	n     int
	pos   int // bytes passed
	at    int // where the header being read starts
	hdr   [batchHeadLen]byte
	known int // how many of the header's bytes are known
	// batches counts the headers read; past limit the walk gives up.
	batches, limit int
	last           batchNext
	lost           bool
}

// newBatchWalk walks a record set of n bytes; limit bounds the headers
// it reads (0: no bound).
func newBatchWalk(n, limit int) batchWalk {
	return batchWalk{n: n, limit: limit}
}

// pipedWalkLimit is the bound of a piped record set's walk.
func pipedWalkLimit(n int) int { return 4 + n/minWalkedBatch }

// lastBatchIn walks a record set held in memory.
func lastBatchIn(b []byte) batchNext {
	w := newBatchWalk(len(b), 0)
	w.pass(b)
	return w.result()
}

// reading reports whether a header is still to be read: the walk has not
// given up, and a whole header fits in what is left of the set.
func (w *batchWalk) reading() bool {
	return !w.lost && w.at+batchHeadLen <= w.n
}

// spliceable is how many bytes may pass unseen now: up to the first
// header byte not known yet, or all that is left once no header is to be
// read.
func (w *batchWalk) spliceable() int {
	if !w.reading() {
		return w.n - w.pos
	}
	return max(w.at+w.known-w.pos, 0)
}

// pass notes b, the set's next bytes, read.
func (w *batchWalk) pass(b []byte) {
	for len(b) > 0 {
		if !w.reading() {
			w.pos += len(b)
			return
		}
		if k := w.at + w.known - w.pos; k > 0 { // before the header, or header bytes known already
			k = min(k, len(b))
			w.pos += k
			b = b[k:]
			continue
		}
		k := copy(w.hdr[w.known:], b)
		w.known += k
		w.pos += k
		b = b[k:]
		w.header()
	}
}

// skip notes k bytes passed unseen (spliced).
func (w *batchWalk) skip(k int) {
	if w.reading() && w.pos+k > w.at+w.known {
		w.lost = true // cannot happen: fill splices at most spliceable
	}
	w.pos += k
}

// peeked notes b, the bytes from pos on, seen without passing them.
func (w *batchWalk) peeked(b []byte) {
	if !w.reading() {
		return
	}
	if off := w.at + w.known - w.pos; off >= 0 && off < len(b) {
		w.known += copy(w.hdr[w.known:], b[off:])
		w.header()
	}
}

// header reads the header once all of it is known, and moves on to the
// next one.
func (w *batchWalk) header() {
	if w.known < batchHeadLen {
		return
	}
	length := int32(binary.BigEndian.Uint32(w.hdr[8:]))
	if w.hdr[16] != 2 || length < batchLengthMin {
		w.lost = true
		return
	}
	w.batches++
	if w.limit > 0 && w.batches > w.limit {
		w.lost = true
		return
	}
	end := w.at + 12 + int(length)
	if end <= w.n { // a whole batch
		base := int64(binary.BigEndian.Uint64(w.hdr[0:]))
		delta := int32(binary.BigEndian.Uint32(w.hdr[23:]))
		w.last = batchNext{offset: base + int64(delta) + 1, epoch: int32(binary.BigEndian.Uint32(w.hdr[12:])), ok: true}
	}
	w.at, w.known = end, 0
}

// result is the walk's answer, once every byte passed.
func (w *batchWalk) result() batchNext {
	if w.lost || w.pos != w.n {
		return batchNext{}
	}
	return w.last
}
