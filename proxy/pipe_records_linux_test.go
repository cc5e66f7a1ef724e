package proxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// pipedFrame is a Fetch v16 answer frame (size, correlation id, header,
// body) whose record sets take every path of pipedPart.records: piped
// whole in one pipe (0), across two (1), across maxPipesPerSet and the
// rest in memory (4), copied (2, small), null (3).
func pipedFrame(t *testing.T, corr int32) (frame []byte, recs map[int32][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	recs = map[int32][]byte{0: random(100 << 10), 1: random(recordPipeSize + 300<<10), 2: random(1 << 10), 3: nil,
		4: random(maxPipesPerSet*recordPipeSize + 200<<10)}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	tp := kmsg.NewFetchResponseTopic()
	tp.TopicID = [16]byte{1, 2, 3}
	for p := int32(0); p < int32(len(recs)); p++ {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.RecordBatches = p, 1000+int64(p), recs[p]
		tp.Partitions = append(tp.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, tp)
	body := resp.AppendTo([]byte{0}) // the response header's empty tags
	frame = binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
	frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
	return append(frame, body...), recs
}

// tcpPair is a loopback TCP connection: what is written to w is read
// from r.
func tcpPair(t *testing.T) (r, w net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	w, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// readPipedFrame sends frame (then closes the sending side) and reads it
// as a brokerConn reads a piped Fetch part.
func readPipedFrame(t *testing.T, frame []byte, corr int32) (kmsg.Response, *partBody, error) {
	t.Helper()
	rc, wc := tcpPair(t)
	go func() {
		wc.Write(frame)
		wc.Close()
	}()
	b := &brokerConn{conn: rc, raw: rawConn(rc)}
	b.upr.c = rc
	r := bufio.NewReaderSize(&b.upr, 64<<10)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 16
	return b.readPart(r, &partCall{req: req, pipe: true}, corr)
}

// TestReadPipedFetch: a Fetch part read with its large record sets piped
// decodes to the answer sent, with placeholders whose pipes (and tails)
// hold the record bytes sent; small and null record sets are in memory.
func TestReadPipedFetch(t *testing.T) {
	frame, recs := pipedFrame(t, 1)
	resp, body, err := readPipedFrame(t, frame, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer body.release()
	piped := pipedLookup([]*partBody{body})
	if piped == nil || len(body.piped) != 3 {
		t.Fatalf("%d record sets piped, want 3", len(body.piped))
	}
	fr := resp.(*kmsg.FetchResponse)
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != len(recs) {
		t.Fatalf("decoded %+v", fr.Topics)
	}
	for _, p := range fr.Topics[0].Partitions {
		want := recs[p.Partition]
		if p.HighWatermark != 1000+int64(p.Partition) {
			t.Errorf("partition %d: high watermark %d", p.Partition, p.HighWatermark)
		}
		pr := piped(p.RecordBatches)
		if pr == nil {
			if !bytes.Equal(p.RecordBatches, want) || (want == nil) != (p.RecordBatches == nil) {
				t.Errorf("partition %d: %d record bytes in memory, want %d", p.Partition, len(p.RecordBatches), len(want))
			}
			continue
		}
		if len(want) < pipeMin {
			t.Errorf("partition %d: %d record bytes piped, under pipeMin", p.Partition, len(want))
		}
		if pr.size() != len(want) || len(pr.pipes) > maxPipesPerSet {
			t.Errorf("partition %d: %d bytes in %d pipes + %d in memory, want %d in at most %d pipes", p.Partition, pr.piped(), len(pr.pipes), len(pr.tail), len(want), maxPipesPerSet)
		}
		// A set larger than a pipe continues in the next free one (the
		// test's frame arrives in large segments, so each pipe fills to
		// its capacity): only what maxPipesPerSet pipes cannot hold is
		// in memory.
		switch p.Partition {
		case 1:
			if len(pr.pipes) < 2 || len(pr.tail) != 0 {
				t.Errorf("partition 1: %d pipes and %d bytes in memory, want the set whole in two or more pipes", len(pr.pipes), len(pr.tail))
			}
		case 4:
			if len(pr.pipes) != maxPipesPerSet || len(pr.tail) < 200<<10 {
				t.Errorf("partition 4: %d pipes and %d bytes in memory, want %d pipes and the rest in memory", len(pr.pipes), len(pr.tail), maxPipesPerSet)
			}
		}
		if got := drainPiped(t, pr); !bytes.Equal(got, want) {
			t.Errorf("partition %d: piped records differ from those sent", p.Partition)
		}
	}
}

// drainPiped reads a piped record set out of its pipes and tail, marking
// the pipes empty.
func drainPiped(t *testing.T, pr *pipedRecords) []byte {
	t.Helper()
	var got []byte
	for i := range pr.pipes {
		c := &pr.pipes[i]
		if c.n > recordPipeSize {
			t.Errorf("%d bytes in one pipe, more than its %d", c.n, recordPipeSize)
		}
		b := make([]byte, c.n)
		for k := 0; k < c.n; {
			m, err := unix.Read(c.p.r, b[k:])
			if err != nil || m <= 0 {
				t.Fatalf("read pipe %d after %d of %d bytes: %v", i, k, c.n, err)
			}
			k += m
		}
		c.sent = true // drained: the pipe may be reused
		got = append(got, b...)
	}
	return append(got, pr.tail...)
}

// TestReadPipedFetchBadFrames: a piped part that is cut short, or whose
// size does not fit its fields, is an error, and leaves no pipe in use.
func TestReadPipedFetchBadFrames(t *testing.T) {
	frame, recs := pipedFrame(t, 1)
	second := bytes.Index(frame, recs[1][:64]) + recordPipeSize + 50_000 // in set 1's second pipe
	short := bytes.Clone(frame)
	binary.BigEndian.PutUint32(short, uint32(len(frame)-4-200_000)) // the size ends mid-records
	long := bytes.Clone(frame)
	binary.BigEndian.PutUint32(long, uint32(len(frame)-4+10)) // fields end before the size
	cases := map[string][]byte{
		"cut in the fields":             frame[:40],
		"cut in the first piped set":    frame[:60_000],
		"cut in a set's second pipe":    frame[:second],
		"cut in the set past the pipes": frame[:len(frame)-1000],
		"cut in the tail":               frame[:len(frame)-2],
		"size ends mid-records":         short,
		"size past the fields":          long,
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			_, body, err := readPipedFrame(t, f, 1)
			if err == nil {
				body.release()
				t.Fatal("read a bad frame without error")
			}
			if body != nil {
				t.Error("a failed read returned a body")
			}
			var be *backendError
			if !errors.Is(err, errFetchShape) && !errors.As(err, &be) {
				t.Errorf("error %v is neither a shape nor an upstream error", err)
			}
			if n := recordPipesInUse(); n != 0 {
				t.Errorf("%d record pipes in use after the failed read", n)
			}
		})
	}
}

// TestReadPipedFetchWalk: a part read for a fetch-ahead follows the
// batch headers of each piped record set while splicing it (peeking at
// each header first), and finds what the walk of the same bytes in
// memory finds, however the bytes arrive: whole, or in pieces that cut
// headers in two; across pipes and into a set's tail; with a partial
// batch at the end. A set of more small batches than its walk's bound
// gives no answer, and its bytes are moved all the same.
func TestReadPipedFetchWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	large, _ := testRecordSet(1000, 5, []int{20, 20, 20, 20, 20}, 1000) // ~100 KB batches, ~500 KB
	counts := make([]int, 50)
	for i := range counts {
		counts[i] = 100 // ~100 KB batches
	}
	huge, _ := testRecordSet(5000, 6, counts, 1000) // ~5 MB: past maxPipesPerSet pipes
	cut := large[:len(large)-5000]                  // a partial batch at the end
	small := make([]int, 200)
	for i := range small {
		small[i] = 1 // ~60-byte batches: past the walk's bound
	}
	many, _ := testRecordSet(0, 1, small, 300) // ~70 KB
	sets := map[int32][]byte{0: large, 1: huge, 2: cut, 3: many}
	frame := setsFrame(sets)

	for _, pieces := range []string{"whole", "in pieces"} {
		t.Run(pieces, func(t *testing.T) {
			rc, wc := tcpPair(t)
			go func() {
				defer wc.Close()
				for rest := frame; len(rest) > 0; {
					n := len(rest)
					if pieces == "in pieces" {
						n = min(n, 1+rng.IntN(40<<10))
					}
					if _, err := wc.Write(rest[:n]); err != nil {
						return
					}
					rest = rest[n:]
				}
			}()
			got, pb, err := readWalkedPart(rc)
			if err != nil {
				t.Fatal(err)
			}
			defer pb.release()
			piped := pipedLookup([]*partBody{pb})
			for _, p := range got.(*kmsg.FetchResponse).Topics[0].Partitions {
				pr := piped(p.RecordBatches)
				if pr == nil {
					t.Fatalf("partition %d: not piped", p.Partition)
				}
				want := lastBatchIn(sets[p.Partition])
				if p.Partition == 3 {
					want = batchNext{} // over the bound: no answer
				}
				if pr.next != want {
					t.Errorf("partition %d: walk %+v, want %+v", p.Partition, pr.next, want)
				}
				if data := drainPiped(t, pr); !bytes.Equal(data, sets[p.Partition]) {
					t.Errorf("partition %d: piped bytes differ from those sent", p.Partition)
				}
				if p.Partition == 1 && len(pr.tail) == 0 {
					t.Errorf("partition 1: all %d bytes in pipes; the walk through a set's tail was not tested", len(sets[1]))
				}
			}
		})
	}
}

// TestReadPipedFetchWalkMidHeader: the upstream's bytes stop in the
// middle of a batch header the walk must peek at. When they go on after
// a pause, the part is read and walked whole; when the connection ends
// there, the read fails at once rather than wait for the rest of a
// header that will never come.
func TestReadPipedFetchWalkMidHeader(t *testing.T) {
	counts := []int{40, 40, 40, 40, 40} // ~40 KB batches: the first is past what the reader buffers
	set, _ := testRecordSet(300, 2, counts, 1000)
	frame := setsFrame(map[int32][]byte{0: set})
	first := int(binary.BigEndian.Uint32(set[8:])) + 12 // the first batch's size
	cut := bytes.Index(frame, set[:64]) + first + 10    // ten bytes into the second header

	for _, end := range []bool{false, true} {
		name := map[bool]string{false: "pause", true: "end"}[end]
		t.Run(name, func(t *testing.T) {
			rc, wc := tcpPair(t)
			go func() {
				defer wc.Close()
				if _, err := wc.Write(frame[:cut]); err != nil || end {
					return
				}
				time.Sleep(50 * time.Millisecond) // the reader waits at the header
				wc.Write(frame[cut:])
			}()
			type result struct {
				resp kmsg.Response
				body *partBody
				err  error
			}
			done := make(chan result, 1)
			go func() {
				resp, pb, err := readWalkedPart(rc)
				done <- result{resp, pb, err}
			}()
			var got result
			select {
			case got = <-done:
			case <-time.After(10 * time.Second):
				rc.Close() // ends the read, so the test's goroutine ends too
				t.Fatal("the read did not end in 10s")
			}
			if end {
				if got.err == nil {
					got.body.release()
					t.Fatal("a part cut in a batch header was read without error")
				}
				if n := recordPipesInUse(); n != 0 {
					t.Errorf("%d record pipes in use after the failed read", n)
				}
				return
			}
			if got.err != nil {
				t.Fatal(got.err)
			}
			defer got.body.release()
			fr := got.resp.(*kmsg.FetchResponse)
			pr := pipedLookup([]*partBody{got.body})(fr.Topics[0].Partitions[0].RecordBatches)
			if pr == nil {
				t.Fatal("the record set was not piped")
			}
			if want := lastBatchIn(set); pr.next != want {
				t.Errorf("walk %+v, want %+v", pr.next, want)
			}
			if data := drainPiped(t, pr); !bytes.Equal(data, set) {
				t.Error("piped bytes differ from those sent")
			}
		})
	}
}

// setsFrame is a Fetch v16 answer frame (correlation id 1) of one topic
// whose partition p holds the record set sets[p], partitions 0 up.
func setsFrame(sets map[int32][]byte) []byte {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	tp := kmsg.NewFetchResponseTopic()
	tp.TopicID = [16]byte{9}
	for p := int32(0); p < int32(len(sets)); p++ {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.RecordBatches = p, sets[p]
		tp.Partitions = append(tp.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, tp)
	body := resp.AppendTo([]byte{0})
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
	frame = binary.BigEndian.AppendUint32(frame, 1)
	return append(frame, body...)
}

// readWalkedPart reads a piped Fetch part from rc as a brokerConn does
// for a fetch-ahead (record sets piped, their batch headers walked).
func readWalkedPart(rc net.Conn) (kmsg.Response, *partBody, error) {
	b := &brokerConn{conn: rc, raw: rawConn(rc)}
	b.upr.c = rc
	r := bufio.NewReaderSize(&b.upr, 64<<10)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 16
	return b.readPart(r, &partCall{req: req, pipe: true, walk: true}, 1)
}
