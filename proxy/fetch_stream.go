package proxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"syscall"
	"time"

	"github.com/tollgate-kafka/tollgate/rewrite"
)

// Fetch responses are streamed, not buffered. They are mostly record bytes
// and can be tens of MiB, yet from v12 they may end with KIP-951 endpoints
// that must be rewritten. The walker below copies the small fields through
// a write buffer, moves each partition's records straight from the upstream
// socket to the client (splice), and rewrites the top-level tagged fields at
// the end without changing their length (rewrite.FetchTags), so the frame
// size read from the upstream stays true.
//
// NOTE: the field walk follows FetchResponse.json for versions 12 up to
// kmsg's maximum (18); versions above are never offered (ApiVersions clamp).
// A change there must change this walk too; TestFetchStreamEveryVersion
// checks it against kmsg's encoder.

// streamCopyMax is the largest record set copied through the write buffer;
// larger ones are spliced socket to socket.
const streamCopyMax = 16 << 10

// errFetchShape means the upstream's Fetch response does not fit its frame.
var errFetchShape = errors.New("malformed Fetch response")

type fetchStream struct {
	s  *session      // nil while reading a single-port part (part)
	ur *bufio.Reader // the upstream, as read
	// part, when set, reads a single-port Fetch part instead of relaying
	// a response: out collects the whole frame, with large record sets
	// moved to pipes (pipe_records.go), and nothing is written.
	part     *pipedPart
	throttle time.Duration
	collect  bool          // record per-partition results for the audit trail
	topic    fetchTopicRef // the topic being walked
	results  []fetchResult
	left     int    // bytes of the frame not yet consumed
	out      []byte // pending output, flushed before each splice
	bufs     net.Buffers
	// ended: the frame's end went out with the last record set
	// (records), so nothing of it is left to walk.
	ended bool
	// recStart is where the records field being walked starts in out
	// (its length), for part to replace.
	recStart int
}

// fetchTopicRef names a response topic by name (v12) or id (v13+).
type fetchTopicRef struct {
	name string
	id   [16]byte
}

// fetchResult is what one partition returned, for a full audit record.
type fetchResult struct {
	topic     fetchTopicRef
	partition int32
	errorCode int16
	bytes     int
	records   int // known only for the built-in broker's bodies (wire.FetchSummary)
}

// relayFetch streams one flexible Fetch response of total bytes (size
// prefix included) from the upstream to the client.
func (s *session) relayFetch(p *pending, total int) error {
	f := fetchStream{s: s, ur: s.ur, left: total, out: s.wbuf[:0], throttle: p.throttle,
		collect: p.obs.rec != nil && p.obs.req != nil}
	err := f.walk(p.version)
	s.wbuf = f.out[:0]
	if err == nil && f.collect {
		p.obs.fetched = f.results
	}
	if err != nil {
		var be *backendError
		if errors.As(err, &be) || isClientWriteErr(err) {
			return err
		}
		return &backendError{fmt.Errorf("stream Fetch v%d response: %w", p.version, err)}
	}
	return nil
}

func (f *fetchStream) walk(version int16) error {
	// Frame size, correlation id and the response header's tags.
	if err := f.copy(8); err != nil {
		return err
	}
	return f.walkBody(version)
}

// walkBody walks the frame after its size and correlation id.
func (f *fetchStream) walkBody(version int16) error {
	if err := f.copyTags(); err != nil {
		return err
	}
	// ThrottleMillis, ErrorCode, SessionID. The buffer is flushed first if
	// need be, so the fields patched below are still in it.
	if err := f.room(4 + 2 + 4); err != nil {
		return err
	}
	if err := f.copy(4 + 2 + 4); err != nil {
		return err
	}
	if f.throttle > 0 { // the policy's throttle, if longer than the upstream's
		field := f.out[len(f.out)-10:]
		ms := int32(min((f.throttle+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
		if ms > int32(binary.BigEndian.Uint32(field)) {
			binary.BigEndian.PutUint32(field, uint32(ms))
		}
	}
	topics, err := f.copyArrayLen()
	if err != nil {
		return err
	}
	for t := range topics {
		start := len(f.out)
		if version >= 13 {
			err = f.copy(16) // TopicID
		} else {
			err = f.copyCompactBytes() // Topic
		}
		if err != nil {
			return err
		}
		if f.collect {
			f.topic = topicRef(f.out[start:], version)
		}
		parts, err := f.copyArrayLen()
		if err != nil {
			return err
		}
		for i := range parts {
			if err := f.partition(t == topics-1 && i == parts-1); err != nil {
				return err
			}
		}
		if f.ended {
			return nil
		}
		if err := f.copyTags(); err != nil {
			return err
		}
	}
	return f.rewriteTail()
}

// emptyTail is the end of a Fetch response after the last partition's
// records when every tagged-field section left is empty: the partition's,
// the topic's and the response's, one zero count each. Three sections in
// three bytes can only be empty (a field takes a count, a tag and a size),
// so such an end carries no endpoint to rewrite.
const emptyTail = 3

// partition copies one partition: its fixed fields, aborted transactions,
// preferred read replica, records (spliced when large) and tags. last
// says it is the frame's last partition: when only an empty tail follows
// its records, the tail goes with them (records) instead of being read
// and written on its own.
func (f *fetchStream) partition(last bool) error {
	// Partition, ErrorCode, HighWatermark, LastStableOffset, LogStartOffset
	// (kept in the buffer to be read back below).
	if err := f.room(30); err != nil {
		return err
	}
	if err := f.copy(4 + 2 + 8 + 8 + 8); err != nil {
		return err
	}
	var res fetchResult
	if f.collect {
		fixed := f.out[len(f.out)-30:]
		res = fetchResult{topic: f.topic, partition: int32(binary.BigEndian.Uint32(fixed)),
			errorCode: int16(binary.BigEndian.Uint16(fixed[4:]))}
	}
	aborted, err := f.copyArrayLen()
	if err != nil {
		return err
	}
	for range aborted {
		if err := f.copy(8 + 8); err != nil { // ProducerID, FirstOffset
			return err
		}
		if err := f.copyTags(); err != nil {
			return err
		}
	}
	if err := f.copy(4); err != nil { // PreferredReadReplica
		return err
	}
	f.recStart = len(f.out)
	n, err := f.copyUvarint() // RecordBatches: compact nullable bytes
	if err != nil {
		return err
	}
	if n > 0 {
		tail := 0
		if last && f.left-int(n-1) == emptyTail {
			tail = emptyTail
		}
		if err := f.records(int(n-1), tail); err != nil {
			return err
		}
		res.bytes = int(n - 1)
	}
	if f.collect {
		f.results = append(f.results, res)
	}
	if f.ended {
		return nil
	}
	return f.copyTags()
}

// topicRef reads the topic field just copied: a compact string (v12) or a
// 16-byte id (v13+).
func topicRef(b []byte, version int16) fetchTopicRef {
	if version >= 13 {
		var r fetchTopicRef
		copy(r.id[:], b)
		return r
	}
	_, n := binary.Uvarint(b)
	if n <= 0 {
		return fetchTopicRef{}
	}
	return fetchTopicRef{name: string(b[n:])}
}

// records moves n record bytes: small sets through the buffer, large ones
// as the buffered part plus a socket-to-socket copy. A large set moves
// tail more bytes with it, the frame's empty end (emptyTail), so that the
// response does not end with a read and a write of three bytes.
func (f *fetchStream) records(n, tail int) error {
	if n+tail > f.left {
		return fmt.Errorf("%w: %d record bytes, %d left in the frame", errFetchShape, n, f.left)
	}
	if f.part != nil {
		return f.part.records(f, n)
	}
	if n <= streamCopyMax {
		return f.copy(n)
	}
	ur, s := f.ur, f.s
	n += tail
	f.left -= n
	f.ended = tail > 0
	// The pending fields and the records' buffered head go in one writev;
	// when a splice of the rest follows, with MSG_MORE, so that they leave
	// in the splice's segments (writeMore).
	if b := min(ur.Buffered(), n); b > 0 {
		head, _ := ur.Peek(b)
		var err error
		switch {
		case b < n:
			err = writeMore(s.client, f.out, head)
			f.out = f.out[:0]
		case len(f.out) == 0:
			_, err = s.client.Write(head)
		default:
			f.bufs = append(f.bufs[:0], f.out, head)
			_, err = f.bufs.WriteTo(s.client)
			f.out = f.out[:0]
		}
		if err != nil {
			return clientWriteErr{err}
		}
		ur.Discard(b)
		n -= b
	} else if len(f.out) > 0 {
		err := writeMore(s.client, f.out) // the splice follows
		f.out = f.out[:0]
		if err != nil {
			return clientWriteErr{err}
		}
	}
	if n > 0 {
		return s.copyToClient(clientWriter{s.client}, int64(n))
	}
	return nil
}

// rewriteTail reads the top-level tagged fields (all that is left of the
// frame), rewrites their endpoints in place and writes the end.
func (f *fetchStream) rewriteTail() error {
	if f.part != nil { // a part's tags are rewritten once decoded (virtualize)
		return f.copy(f.left)
	}
	const maxTail = 1 << 20
	if f.left > maxTail {
		return fmt.Errorf("%w: %d bytes of top-level tags", errFetchShape, f.left)
	}
	tail := make([]byte, f.left)
	if _, err := io.ReadFull(f.ur, tail); err != nil {
		return &backendError{fmt.Errorf("read Fetch response: %w", truncated(err))}
	}
	f.left = 0
	out, _, err := rewrite.FetchTags(tail, &f.s.mapper)
	if err != nil {
		return err
	}
	f.out = append(f.out, out...)
	return f.flush()
}

// room flushes the output buffer if n more bytes would make copy flush it,
// so that fixed fields just copied can be read back or patched.
func (f *fetchStream) room(n int) error {
	if len(f.out)+n >= bufSize && f.part == nil {
		return f.flush()
	}
	return nil
}

// copy moves n bytes from the upstream into the output buffer.
func (f *fetchStream) copy(n int) error {
	if n > f.left {
		return fmt.Errorf("%w: field of %d bytes, %d left in the frame", errFetchShape, n, f.left)
	}
	f.left -= n
	for n > 0 {
		b, err := f.ur.Peek(min(n, bufSize))
		if len(b) == 0 && err != nil {
			return &backendError{fmt.Errorf("read Fetch response: %w", truncated(err))}
		}
		f.out = append(f.out, b...)
		f.ur.Discard(len(b))
		n -= len(b)
		if len(f.out) >= bufSize && f.part == nil {
			if err := f.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyUvarint copies one unsigned varint and returns its value.
func (f *fetchStream) copyUvarint() (uint64, error) {
	var v uint64
	for shift := 0; shift < 35; shift += 7 {
		if f.left == 0 {
			return 0, fmt.Errorf("%w: varint past the frame", errFetchShape)
		}
		c, err := f.ur.ReadByte()
		if err != nil {
			return 0, &backendError{fmt.Errorf("read Fetch response: %w", truncated(err))}
		}
		f.left--
		f.out = append(f.out, c)
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			if v > 1<<31 {
				return 0, fmt.Errorf("%w: varint %d", errFetchShape, v)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: varint too long", errFetchShape)
}

// copyArrayLen copies a compact array length and returns the element count
// (a null array counts as empty).
func (f *fetchStream) copyArrayLen() (int, error) {
	n, err := f.copyUvarint()
	if err != nil || n == 0 {
		return 0, err
	}
	// Every element takes at least one byte: a count past the frame is a lie.
	if int(n-1) > f.left {
		return 0, fmt.Errorf("%w: %d elements, %d bytes left", errFetchShape, n-1, f.left)
	}
	return int(n - 1), nil
}

// copyCompactBytes copies a compact (nullable) string or bytes field.
func (f *fetchStream) copyCompactBytes() error {
	n, err := f.copyUvarint()
	if err != nil || n == 0 {
		return err
	}
	return f.copy(int(n - 1))
}

// copyTags copies a tagged-field section unchanged.
func (f *fetchStream) copyTags() error {
	n, err := f.copyUvarint()
	if err != nil {
		return err
	}
	for range n {
		if _, err := f.copyUvarint(); err != nil { // tag
			return err
		}
		if err := f.copyCompactLen(); err != nil {
			return err
		}
	}
	return nil
}

// copyCompactLen copies a uvarint size and that many bytes.
func (f *fetchStream) copyCompactLen() error {
	n, err := f.copyUvarint()
	if err != nil {
		return err
	}
	return f.copy(int(n))
}

func (f *fetchStream) flush() error {
	if len(f.out) == 0 {
		return nil
	}
	_, err := f.s.client.Write(f.out)
	f.out = f.out[:0]
	if err != nil {
		return clientWriteErr{err}
	}
	return nil
}

// clientWriteErr marks a failed write to the client, so it is not blamed on
// the upstream.
type clientWriteErr struct{ err error }

func (e clientWriteErr) Error() string { return "write client: " + e.err.Error() }
func (e clientWriteErr) Unwrap() error { return e.err }

func isClientWriteErr(err error) bool {
	var cw clientWriteErr
	return errors.As(err, &cw)
}

// clientWriter tags errors from a socket-to-socket copy's write side.
// io.CopyN into it still splices: *net.TCPConn's ReadFrom is reached
// through clientWriter.ReadFrom.
type clientWriter struct{ w io.Writer }

func (c clientWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		err = clientWriteErr{err}
	}
	return n, err
}

func (c clientWriter) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.w.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{c}, r)
	}
	n, err := rf.ReadFrom(r)
	return n, relayErr(err, func() bool { return peerClosed(c.w) })
}

// relayErr classes a splice's error. ReadFrom does not say which side
// failed, but EPIPE only comes from writing to a socket whose peer has
// gone, so it is the client's; ECONNRESET can be either side's, and is
// the client's when clientClosed reports the client's socket closed (a
// consumer that closed mid-answer resets it); any other error stays the
// upstream's. Either way the session ends.
func relayErr(err error, clientClosed func() bool) error {
	switch {
	case err == nil || errors.Is(err, io.EOF):
		return err
	case errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ECONNRESET) && clientClosed():
		return clientWriteErr{fmt.Errorf("relay Fetch records: %w", err)}
	}
	return fmt.Errorf("relay Fetch records: %w", err)
}
