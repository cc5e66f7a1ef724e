package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Piped records: a single-port Fetch answer's record bytes never pass
// through the gateway's memory when both its client and the upstream
// broker are plain TCP on Linux. Each part's answer is walked as it
// arrives (fetchStream with part set): its fields are read into memory,
// and each record set of pipeMin bytes or more is moved from the
// upstream socket into a pipe with splice(2), a one-byte placeholder
// standing in for it in the bytes kmsg decodes. The merged answer is
// encoded as usual (route_splice.go), and where a placeholder's records
// go, the writer splices them from the pipe to the client's socket.
//
// Why: read into memory and written back out, every record byte was
// copied twice, and a part answer over 2 MiB (a consumer of several
// partitions per broker) was a fresh buffer, zeroed and collected, each
// time. With pipes the single-port gateway's CPU per MB fell by a third
// with one broker's 3 MiB parts, and its RSS by a quarter
// (docs/performance.md, "single-port vs port-per-broker"). A record set one pipe will not take whole continues in
// the next (up to maxPipesPerSet), then in memory (tail); a part that
// finds no pipe free (maxRecordPipes) is read into memory as before.

// pipeMin is the smallest record set moved through a pipe; smaller ones
// are copied (a splice in and out costs more system calls than their
// copy).
const pipeMin = 32 << 10

// recordPipeSize is the capacity asked for each pipe with F_SETPIPE_SZ:
// Linux's default fs.pipe-max-size, the most an unprivileged process may
// ask, and kgo's default partition max. A pipe holds that many bytes only
// when the socket's bytes come in whole pages: it fills by slots (256 at
// this size), one per piece of a received packet, so it may take far
// less: in a single-port bench run over loopback one in six of kfake's
// ~1 MB record sets filled its pipe at about 540 KB.
const recordPipeSize = 1 << 20

// maxPipesPerSet bounds the pipes one record set is moved through, one
// after another as each fills; what is left goes through memory (tail).
// Four hold a record set of kgo's default partition max (1 MiB) unless
// it arrived in pieces averaging under 1 KiB, and leave most of
// maxRecordPipes to other answers.
const maxPipesPerSet = 4

// pipedFirstRead bounds each read of a piped part's frame into the
// upstream reader's buffer, so that little of a record set is read into
// memory ahead of its splice (what the buffer holds goes into the pipe
// with a write, a copy).
const pipedFirstRead = 16 << 10

// pipeStats counts record sets moved through pipes, those the pipe would
// not take whole (the rest went through memory), and part answers read
// into memory where pipes could have served (RecordPipeStats).
var pipeStats struct{ piped, spilled, unpiped atomic.Int64 }

// RecordPipeStats reports the pipes holding records now and the counts
// above, for the metrics (tollgate_single_port_record_pipes and the
// piped, spilled and unpiped counters).
func RecordPipeStats() (inUse int, piped, spilled, unpiped int64) {
	return recordPipesInUse(), pipeStats.piped.Load(), pipeStats.spilled.Load(), pipeStats.unpiped.Load()
}

// partBody is a single-port Fetch part's answer as read: buf holds the
// frame after its size and correlation id (the decoded response's
// record batches alias it), with each piped record set replaced by a
// one-byte placeholder; piped are those record sets.
// Ownership: the brokerConn reader's, then the gather's (or a held
// part's, route_fetch_hold.go), then the merged answer's (fetchAnswer),
// which releases it once written or dropped.
type partBody struct {
	buf   *[]byte
	piped []pipedRecords
}

// pipedRecords is one record set moved out of the frame: its first
// bytes in pipes, in order, then tail (what no pipe took) in memory.
type pipedRecords struct {
	at    int // the placeholder's offset in buf
	pipes []pipedChunk
	tail  []byte
	// next is what a consumer asks after this set, when the part was
	// read for a fetch-ahead (pipedPart.walk; batch_walk.go).
	next batchNext
}

// pipedChunk is n bytes of a record set in pipe p.
type pipedChunk struct {
	p *recordPipe
	n int
	// sent: the n bytes were spliced to the client (or read out), so p
	// is empty and can be reused.
	sent bool
}

func (r *pipedRecords) size() int { return r.piped() + len(r.tail) }

// piped is how many of the set's bytes are in pipes.
func (r *pipedRecords) piped() int {
	n := 0
	for _, c := range r.pipes {
		n += c.n
	}
	return n
}

// pipedBytes is the record bytes b holds in pipes and their tails (the
// decoded answer sees a one-byte placeholder for each set).
func (b *partBody) pipedBytes() int {
	n := 0
	if b != nil {
		for i := range b.piped {
			n += b.piped[i].size() - 1
		}
	}
	return n
}

// release returns buf and the pipes; nothing reads b afterwards.
func (b *partBody) release() {
	if b == nil {
		return
	}
	for i := range b.piped {
		for _, c := range b.piped[i].pipes {
			putRecordPipe(c.p, c.sent || c.n == 0)
		}
	}
	putPartBody(b.buf)
	b.buf, b.piped = nil, nil
}

// pipedPart is fetchStream's part mode: where the records go.
type pipedPart struct {
	raw  syscall.RawConn // the upstream socket
	body *partBody
	// walk: follow each piped set's batch headers (route_fetch_ahead.go).
	walk bool
}

// records moves a record set of n bytes (its length just copied into
// f.out at f.recStart) into pipes, or copies it when it is small or no
// pipe is free.
func (pp *pipedPart) records(f *fetchStream, n int) error {
	if n < pipeMin {
		return f.copy(n)
	}
	p := getRecordPipe()
	if p == nil {
		pipeStats.unpiped.Add(1)
		return f.copy(n)
	}
	rec := pipedRecords{}
	// The placeholder: a records field of one byte.
	f.out = append(f.out[:f.recStart], 2, 0)
	rec.at = len(f.out) - 1
	f.left -= n
	err := pp.fill(f, &rec, p, n)
	pp.body.piped = append(pp.body.piped, rec) // its pipes are released with the body, even on error
	return err
}

// fill moves the record set's n bytes into p and, as each pipe fills,
// into the next free one (up to maxPipesPerSet), and reads what is left
// into rec.tail.
func (pp *pipedPart) fill(f *fetchStream, rec *pipedRecords, p *recordPipe, n int) error {
	pipeStats.piped.Add(1)
	var walk *batchWalk
	if pp.walk {
		w := newBatchWalk(n, pipedWalkLimit(n))
		walk = &w
		defer func() { rec.next = walk.result() }()
	}
	for p != nil {
		c := pipedChunk{p: p}
		want := min(n, recordPipeSize)
		if b := min(f.ur.Buffered(), want); b > 0 {
			head, _ := f.ur.Peek(b)
			w := p.write(head)
			if walk != nil {
				walk.pass(head[:w])
			}
			f.ur.Discard(w)
			c.n += w
		}
		if c.n < want && f.ur.Buffered() == 0 {
			moved, err := p.fill(pp.raw, want-c.n, walk)
			c.n += moved
			if err != nil {
				rec.pipes = append(rec.pipes, c)
				return &backendError{err}
			}
		}
		rec.pipes = append(rec.pipes, c)
		n -= c.n
		if n == 0 || c.n == 0 || len(rec.pipes) == maxPipesPerSet {
			break
		}
		p = getRecordPipe()
	}
	if n > 0 { // past the pipes, or none was free for the rest
		pipeStats.spilled.Add(1)
		rec.tail = make([]byte, n)
		if _, err := io.ReadFull(f.ur, rec.tail); err != nil {
			return &backendError{fmt.Errorf("read Fetch response: %w", truncated(err))}
		}
		if walk != nil {
			walk.pass(rec.tail)
		}
	}
	return nil
}

// readPipedFetch reads a flexible Fetch part's frame of size bytes
// (after its size and correlation id) with its large record sets piped.
func readPipedFetch(r *bufio.Reader, raw syscall.RawConn, req *kmsg.FetchRequest, size int, walk bool) (kmsg.Response, *partBody, error) {
	buf := getPartBody(min(size, 16<<10))
	body := &partBody{buf: buf}
	f := fetchStream{ur: r, left: size, out: (*buf)[:0], part: &pipedPart{raw: raw, body: body, walk: walk}}
	err := f.walkBody(req.Version)
	*buf = f.out
	if err == nil && f.left != 0 {
		err = fmt.Errorf("%w: %d bytes left after the walk", errFetchShape, f.left)
	}
	if err != nil {
		body.release()
		return nil, nil, err
	}
	resp, err := decodePartResponse(req, *buf)
	if err != nil {
		body.release()
		return nil, nil, err
	}
	return resp, body, nil
}

// pipedLookup maps the placeholders of bodies to their record sets, for
// spliceFetch; nil when nothing is piped.
func pipedLookup(bodies []*partBody) func([]byte) *pipedRecords {
	var m map[*byte]*pipedRecords
	for _, b := range bodies {
		for i := range b.piped {
			if m == nil {
				m = map[*byte]*pipedRecords{}
			}
			m[&(*b.buf)[b.piped[i].at]] = &b.piped[i]
		}
	}
	if m == nil {
		return nil
	}
	return func(r []byte) *pipedRecords {
		if len(r) != 1 {
			return nil
		}
		return m[&r[0]]
	}
}

// writePiped writes a merged answer that has piped record sets to the
// client (plain TCP): the pieces between them with writev, each piped
// set with a splice from its pipe.
func (a *fetchAnswer) writePiped(s *session, bufs net.Buffers) error {
	raw := rawConn(s.client)
	if raw == nil {
		return fmt.Errorf("internal: piped Fetch answer for a %T client", s.client)
	}
	f := &a.frame
	prev := 0
	for i, c := range f.cuts {
		if c > prev {
			bufs = append(bufs, f.head[prev:c])
		}
		prev = c
		pr := f.pipes[i]
		if pr == nil {
			bufs = append(bufs, f.recs[i])
			continue
		}
		// Each step under a fresh frame_timeout, kept moving while bytes
		// move (writeProgress, drainTo).
		s.pushWriteDeadline()
		if err := s.writeProgress(bufs); err != nil {
			return err
		}
		bufs = bufs[:0]
		for j := range pr.pipes {
			chunk := &pr.pipes[j]
			s.pushWriteDeadline()
			if err := chunk.p.drainTo(raw, chunk.n, s.pushWriteDeadline); err != nil {
				return err
			}
			chunk.sent = true
		}
		if len(pr.tail) > 0 {
			bufs = append(bufs, pr.tail)
		}
	}
	if prev < len(f.head) {
		bufs = append(bufs, f.head[prev:])
	}
	s.pushWriteDeadline()
	return s.writeProgress(bufs)
}

// copyPiped writes the answer to w, reading its piped record sets out
// of their pipes.
func (a *fetchAnswer) copyPiped(w io.Writer) (int64, error) {
	f := &a.frame
	var n int64
	write := func(b []byte) error {
		k, err := w.Write(b)
		n += int64(k)
		return err
	}
	prev := 0
	for i, c := range f.cuts {
		if err := write(f.head[prev:c]); err != nil {
			return n, err
		}
		prev = c
		pr := f.pipes[i]
		if pr == nil {
			if err := write(f.recs[i]); err != nil {
				return n, err
			}
			continue
		}
		for j := range pr.pipes {
			chunk := &pr.pipes[j]
			if err := chunk.p.readTo(w, chunk.n); err != nil {
				return n, err
			}
			n += int64(chunk.n)
			chunk.sent = true
		}
		if err := write(pr.tail); err != nil {
			return n, err
		}
	}
	err := write(f.head[prev:])
	return n, err
}
