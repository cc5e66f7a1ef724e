package proxy

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testBatch is a magic 2 record batch as kmsg encodes it (the reference
// for the layout the walk reads), with records values of size bytes.
func testBatch(base int64, epoch int32, records, size int) []byte {
	b := kmsg.NewRecordBatch()
	b.FirstOffset, b.PartitionLeaderEpoch, b.Magic = base, epoch, 2
	b.LastOffsetDelta = int32(records - 1)
	b.NumRecords = int32(records)
	var recs []byte
	for i := range records {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Value = make([]byte, size)
		recs = r.AppendTo(recs)
	}
	b.Records = recs
	b.Length = int32(len(b.AppendTo(nil)) - 12) // kmsg writes the length it is given
	return b.AppendTo(nil)
}

// testRecordSet is batches of the given record counts, one after the
// other from offset base, each batch's values size bytes.
func testRecordSet(base int64, epoch int32, counts []int, size int) (set []byte, next batchNext) {
	for _, n := range counts {
		set = append(set, testBatch(base, epoch, n, size)...)
		base += int64(n)
		next = batchNext{offset: base, epoch: epoch, ok: true}
	}
	return set, next
}

func TestLastBatchIn(t *testing.T) {
	set, next := testRecordSet(100, 7, []int{3, 10, 1}, 50)
	last := testBatch(114, 9, 4, 50) // a batch of a later leader epoch
	withLast := append(append([]byte(nil), set...), last...)
	cases := []struct {
		name string
		set  []byte
		want batchNext
	}{
		{"empty", nil, batchNext{}},
		{"whole batches", set, next},
		{"the last batch's epoch", withLast, batchNext{offset: 118, epoch: 9, ok: true}},
		{"a partial batch at the end (cut by max bytes)", withLast[:len(withLast)-10], next},
		{"a partial header at the end", withLast[:len(set)+20], next},
		{"only part of a batch", set[:30], batchNext{}},
		{"not magic 2", func() []byte {
			b := append([]byte(nil), set...)
			b[16] = 1
			return b
		}(), batchNext{}},
		{"a batch length under the header's", func() []byte {
			b := append([]byte(nil), set...)
			b[8], b[9], b[10], b[11] = 0, 0, 0, 10
			return b
		}(), batchNext{}},
	}
	for _, c := range cases {
		if got := lastBatchIn(c.set); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// walkLikeFill walks set as pipedPart.fill and recordPipe.fill do, with
// the socket's bytes arriving in the given chunks: what the buffer held
// first is passed with its content, then each step peeks when the walk
// needs a header and splices at most what it may skip; a peek that finds
// less than the header waits for the next chunk.
func walkLikeFill(set []byte, buffered int, chunks []int, limit int) batchNext {
	w := newBatchWalk(len(set), limit)
	w.pass(set[:buffered])
	arrived := buffered
	for _, c := range chunks {
		arrived = min(arrived+c, len(set))
		for w.pos < arrived {
			if s := w.spliceable(); s > 0 {
				w.skip(min(s, arrived-w.pos))
				continue
			}
			need := w.at + batchHeadLen - w.pos
			if arrived-w.pos < need {
				break // wait for more
			}
			w.peeked(set[w.pos : w.pos+need])
		}
	}
	w.skip(len(set) - w.pos) // cannot be needed: the chunks cover the set
	return w.result()
}

// TestBatchWalkLikeFill: however the bytes arrive, the walk of a spliced
// set finds what the walk of the set in memory finds.
func TestBatchWalkLikeFill(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		counts := make([]int, 1+rng.IntN(6))
		for j := range counts {
			counts[j] = 1 + rng.IntN(5)
		}
		set, _ := testRecordSet(rng.Int64N(1e9), rng.Int32N(50), counts, rng.IntN(300))
		if rng.IntN(3) == 0 { // cut, as at a partition's max bytes
			set = set[:rng.IntN(len(set))+1]
		}
		want := lastBatchIn(set)
		var chunks []int
		for n := 0; n < len(set); {
			c := 1 + rng.IntN(max(len(set)/3, 1))
			chunks = append(chunks, c)
			n += c
		}
		buffered := rng.IntN(len(set) + 1)
		if got := walkLikeFill(set, buffered, chunks, 0); got != want {
			t.Fatalf("set %d (%d bytes, %d batches, %d buffered, chunks %v): %+v, want %+v", i, len(set), len(counts), buffered, chunks, got, want)
		}
	}
}

// TestBatchWalkGivesUp: a spliced set of more batches than its limit has
// no answer (the walk stops costing peeks), and skipping over header
// bytes not yet seen is never taken for an answer.
func TestBatchWalkGivesUp(t *testing.T) {
	set, next := testRecordSet(0, 1, []int{1, 1, 1, 1, 1, 1}, 10)
	if got := walkLikeFill(set, 0, []int{len(set)}, 6); got != next {
		t.Errorf("6 batches, limit 6: %+v, want %+v", got, next)
	}
	if got := walkLikeFill(set, 0, []int{len(set)}, 5); got.ok {
		t.Errorf("6 batches, limit 5: %+v, want none", got)
	}
	w := newBatchWalk(len(set), 0)
	w.skip(len(set))
	if got := w.result(); got.ok {
		t.Errorf("every byte skipped unseen: %+v, want none", got)
	}
}

// FuzzBatchWalk: any bytes, split any way, walk without panicking, and a
// spliced walk agrees with the walk in memory.
func FuzzBatchWalk(f *testing.F) {
	set, _ := testRecordSet(5, 2, []int{2, 3}, 20)
	f.Add(set, uint16(0), uint8(7))
	f.Add(set[:len(set)-3], uint16(30), uint8(1))
	f.Add([]byte{}, uint16(0), uint8(1))
	f.Fuzz(func(t *testing.T, set []byte, buffered uint16, chunk uint8) {
		b := min(int(buffered), len(set))
		var chunks []int
		for n := b; n < len(set); n += int(chunk) + 1 {
			chunks = append(chunks, int(chunk)+1)
		}
		want := lastBatchIn(set)
		if got := walkLikeFill(set, b, chunks, 0); got != want {
			t.Fatalf("spliced walk %+v, in memory %+v", got, want)
		}
	})
}
