package proxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// A single-port session (brokers: single-port, route.go) talks to the
// upstream cluster through one brokerConn per upstream broker it needs,
// dialled lazily. The read loop writes part requests in request order, so
// requests for one partition reach its leader in the client's order; each
// connection's reader goroutine reads the answers in the same order and
// hands each one to its partCall.

// partCall is one request the gateway sent to one upstream broker on
// behalf of a client request (all of it, or the partitions that broker
// leads). Ownership: created by the read loop; after send, only the
// connection's reader touches resp and err, then calls done once.
type partCall struct {
	node int32
	req  kmsg.Request
	resp kmsg.Response
	err  error
	done func()
	// body is the pooled frame a Fetch answer was decoded from (resp's
	// record batches alias it, and its pipes hold the large ones); whoever
	// calls done's merge releases it once the merged answer is written or
	// dropped.
	body *partBody
	// pipe: a Fetch answer's large record sets may go to pipes (the
	// client's connection is plain TCP, pipe_records.go).
	pipe bool
	// walk: follow the batch headers of piped record sets, for a
	// fetch-ahead (route_fetch_ahead.go).
	walk bool
	// conn is the connection send wrote the request to.
	conn *brokerConn
}

// brokerConn is a session's connection to one upstream broker.
// Ownership: send is called by the read loop, sendReserved by a
// fetch-ahead (route_fetch_ahead.go), each under sendMu, which guards fmt, corr,
// wbuf, produce and the order of waiting; the reader goroutine owns the
// read side; close may come from anywhere.
type brokerConn struct {
	node    int32
	conn    net.Conn
	sendMu  sync.Mutex
	fmt     *kmsg.RequestFormatter
	corr    int32
	waiting chan *partCall
	wbuf    []byte
	// produce writes a Produce part with the client's record bytes
	// spliced, not copied (route_splice.go); plain TCP only, where the
	// pieces go out in one writev.
	produce *produceSplicer
	// raw is the connection's socket when it is plain TCP on Linux
	// (Fetch records are spliced from it into pipes), else nil.
	raw  syscall.RawConn
	upr  upReader     // what the reader's buffer reads: conn, each read bounded while upr.max > 0
	wait readableWait // the reader's (awaitAnswer)

	closeOnce sync.Once
	failed    chan struct{}
	err       error // set before failed is closed
}

// brokerConnQueue bounds the part requests awaiting answers on one
// upstream connection; a full queue blocks the read loop (back-pressure).
const brokerConnQueue = 256

func newBrokerConn(node int32, c net.Conn, clientID string) *brokerConn {
	b := &brokerConn{node: node, conn: c, waiting: make(chan *partCall, brokerConnQueue), failed: make(chan struct{}),
		fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
	if _, tcp := c.(*net.TCPConn); tcp {
		b.produce = &produceSplicer{}
	}
	b.raw = rawConn(c)
	go b.readLoop()
	return b
}

// send writes call's request; a request that gets no answer (Produce
// acks=0) is written with expectResponse false and never queued. queued
// reports whether the reader now owns call (it will call done, with an
// error if the connection fails); when false, done is never called.
func (b *brokerConn) send(call *partCall, expectResponse bool) (queued bool, err error) {
	b.sendMu.Lock()
	defer b.sendMu.Unlock()
	return b.sendLocked(call, expectResponse, true)
}

// reserve takes the connection for one sendReserved, if it can at once:
// no other send under way, the connection not failed, and room in the
// queue. A fetch-ahead reserves under the fetch session's lock (so the
// request takes its place in the broker's order before any planned after
// it) and writes after letting that lock go (a write may wait for the
// broker, whose reader may be waiting for that lock).
func (b *brokerConn) reserve() bool {
	if !b.sendMu.TryLock() {
		return false
	}
	select {
	case <-b.failed:
	default:
		if len(b.waiting) < cap(b.waiting) { // only sendLocked pushes, under sendMu
			return true
		}
	}
	b.sendMu.Unlock()
	return false
}

// unreserve gives back a reservation not used.
func (b *brokerConn) unreserve() { b.sendMu.Unlock() }

// sendReserved sends call on a reserved connection and ends the
// reservation; queued as for send.
func (b *brokerConn) sendReserved(call *partCall) (queued bool, err error) {
	defer b.sendMu.Unlock()
	return b.sendLocked(call, true, false)
}

// sendLocked is send under sendMu; wait false gives up on a full queue.
func (b *brokerConn) sendLocked(call *partCall, expectResponse, wait bool) (queued bool, err error) {
	select {
	case <-b.failed:
		return false, b.err
	default:
	}
	call.conn = b
	if expectResponse && !wait && len(b.waiting) == cap(b.waiting) {
		return false, nil // only sendLocked pushes, under sendMu: the check holds
	}
	b.corr++
	var bufs net.Buffers
	if pr, ok := call.req.(*kmsg.ProduceRequest); ok && b.produce != nil {
		if bufs, err = b.produce.appendProduce(b.fmt, pr, b.corr); err != nil {
			bufs = nil // cannot happen (kmsg wrote what the walk reads); copy instead
		}
		defer b.produce.written()
	}
	if bufs == nil {
		b.wbuf = b.fmt.AppendRequest(b.wbuf[:0], call.req, b.corr)
	}
	if expectResponse {
		select {
		case b.waiting <- call:
			queued = true
		case <-b.failed:
			return false, b.err
		}
	}
	if bufs != nil {
		_, err = bufs.WriteTo(b.conn)
	} else {
		_, err = b.conn.Write(b.wbuf)
	}
	if err != nil {
		b.fail(fmt.Errorf("write to upstream node %d: %w", b.node, err))
		return queued, b.err
	}
	return queued, nil
}

func (b *brokerConn) fail(err error) {
	b.closeOnce.Do(func() {
		b.err = err
		close(b.failed)
		b.conn.Close()
	})
}

// errConnClosedHere is the error of the calls still waiting on a
// brokerConn the gateway closed itself (its client session ended): the
// broker did nothing wrong, so nothing is retried, logged or forgotten.
var errConnClosedHere = fmt.Errorf("upstream connection closed by the gateway: %w", net.ErrClosed)

func (b *brokerConn) close() { b.fail(errConnClosedHere) }

// readLoop answers queued calls in order until the connection fails;
// then it fails every call still queued or queued later.
func (b *brokerConn) readLoop() {
	b.upr.c = b.conn
	r := bufio.NewReaderSize(&b.upr, 64<<10)
	var corr int32
	for {
		call, ok := b.nextCall(r)
		if !ok {
			b.drainFailed()
			return
		}
		corr++
		call.resp, call.body, call.err = b.readPart(r, call, corr)
		if call.err != nil {
			b.fail(fmt.Errorf("upstream node %d: %w", b.node, call.err))
			// The first cause: a read that failed, or a close or a failed
			// write before it (which is why the read failed).
			call.err = b.err
			call.done()
			b.drainFailed()
			return
		}
		call.done()
	}
}

// nextCall takes the next queued call; ok is false once the connection
// failed. With none queued, the reader waits for the broker's next bytes
// (awaitAnswer) before it waits on the queue: send queues a call before
// it writes the request, so by the time the answer arrives the call is
// there and queuing it woke nobody. Waking this goroutine through the
// queue for every part, only for it to wait on the socket at once, cost
// a futex wake and a spinning thread per part (the session's write loop
// waits the same way, session.go nextPending).
func (b *brokerConn) nextCall(r *bufio.Reader) (*partCall, bool) {
	select {
	case call := <-b.waiting:
		return call, true
	case <-b.failed:
		return nil, false
	default:
	}
	if h := answerWaitHook.Load(); h != nil {
		(*h)() // tests: widen the gap between the queue check and the wait
	}
	b.awaitAnswer(r)
	select {
	case call := <-b.waiting:
		return call, true
	case <-b.failed:
		return nil, false
	}
}

// answerWaitHook, when set (tests), runs between nextCall's empty queue
// and its wait on the socket.
var answerWaitHook atomic.Pointer[func()]

// awaitAnswer waits until the broker's socket is readable (an answer,
// its end, or an error) or the connection is closed. It returns at once
// where it cannot wait so (TLS, not Linux, bytes already buffered); a
// return with nothing queued costs only the wait on the queue that
// follows, which is what every call had before (readableWait looks for
// an answer that came in before the wait).
func (b *brokerConn) awaitAnswer(r *bufio.Reader) {
	if b.raw == nil || r.Buffered() > 0 {
		return
	}
	b.wait.wait(b.raw) // an error (closed) shows in b.failed or the read that follows
}

func (b *brokerConn) drainFailed() {
	for {
		select {
		case call := <-b.waiting:
			call.err = b.err
			call.done()
		default:
			return
		}
	}
}

// maxPartResponse caps an upstream answer the gateway reads whole.
const maxPartResponse = 256 << 20

// readPart reads call's answer: a flexible Fetch part with its large
// record sets piped when both ends allow it (pipe_records.go), any
// other with readPartResponse.
func (b *brokerConn) readPart(r *bufio.Reader, call *partCall, corr int32) (kmsg.Response, *partBody, error) {
	fr, ok := call.req.(*kmsg.FetchRequest)
	if !ok || !call.pipe || b.raw == nil {
		return readPartResponse(r, call.req, corr)
	}
	if fr.Version < 12 || !recordPipeFree() {
		pipeStats.unpiped.Add(1)
		return readPartResponse(r, call.req, corr)
	}
	// Small reads while the frame is walked: what the buffer holds of a
	// record set is copied into the pipe, the rest is spliced.
	b.upr.max = pipedFirstRead
	defer func() { b.upr.max = 0 }()
	size, err := readPartHeader(r, corr)
	if err != nil {
		return nil, nil, err
	}
	return readPipedFetch(r, b.raw, fr, int(size-4), call.walk)
}

// readPartHeader reads a response frame's size and correlation id.
func readPartHeader(r *bufio.Reader, corr int32) (int32, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, fmt.Errorf("read response: %w", err)
	}
	size := int32(binary.BigEndian.Uint32(hdr[:4]))
	if size < 4 || size > maxPartResponse {
		return 0, fmt.Errorf("response size %d out of range", size)
	}
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
		return 0, fmt.Errorf("response correlation id %d, want %d", got, corr)
	}
	return size, nil
}

// readPartResponse reads and decodes one response frame for req. A
// Fetch answer is read into a pooled buffer, returned as a partBody: the
// decoded record batches alias it (kmsg keeps them as bytes), so it
// must stay untouched until the merged answer is encoded.
func readPartResponse(r *bufio.Reader, req kmsg.Request, corr int32) (kmsg.Response, *partBody, error) {
	size, err := readPartHeader(r, corr)
	if err != nil {
		return nil, nil, err
	}
	var pooled *[]byte
	var body []byte
	if req.Key() == apis.Fetch {
		pooled = getPartBody(int(size - 4))
		body = *pooled
	} else {
		body = make([]byte, size-4)
	}
	if _, err := io.ReadFull(r, body); err != nil {
		putPartBody(pooled)
		return nil, nil, fmt.Errorf("read response body: %w", err)
	}
	resp, err := decodePartResponse(req, body)
	if err != nil {
		putPartBody(pooled)
		return nil, nil, err
	}
	if pooled == nil {
		return resp, nil, nil
	}
	return resp, &partBody{buf: pooled}, nil
}

// maxPooledPartBody is the largest Fetch buffer kept for reuse; larger
// ones are left to the garbage collector.
const maxPooledPartBody = 2 << 20

// pooledPartBytes bounds what the free list holds, in bytes: a part's
// answer is about a partition max per partition (kgo's default 1 MiB),
// so a few answers' worth is kept (one merged Fetch's parts, a few
// partitions each) and the rest left to the garbage collector.
const pooledPartBytes = 8 << 20

// bodyPool is a free list bounded by bytes (freelist.go) of single-port
// Fetch buffers, so a merged Fetch does not allocate (and zero) a fresh
// buffer for each part answer.
type bodyPool struct{ list freeList[*[]byte] }

func newBodyPool(limit int) *bodyPool {
	return &bodyPool{freeList[*[]byte]{limit: limit, size: func(b *[]byte) int { return cap(*b) }}}
}

var partBodies = newBodyPool(pooledPartBytes) // parts' answers as read (route_conn.go)

// get returns a buffer of length n, reused when a big enough one is free.
func (p *bodyPool) get(n int) *[]byte {
	if b, ok := p.list.take(func(b *[]byte) bool { return cap(*b) >= n }); ok {
		*b = (*b)[:n]
		return b
	}
	// Capacity rounded up to a multiple of partBodyGrain, so a buffer
	// comes back for the next answer of about the same size (answers of
	// one partition max vary by a batch).
	b := make([]byte, n, (n+partBodyGrain-1)/partBodyGrain*partBodyGrain)
	return &b
}

// partBodyGrain is the unit part-answer buffers are allocated in.
const partBodyGrain = 256 << 10

// put returns a buffer from get; nil is ignored. Nothing may read the
// buffer (or a response decoded from it) afterwards. A buffer that would
// take the list past its limit is dropped.
func (p *bodyPool) put(b *[]byte) {
	if b == nil || cap(*b) > maxPooledPartBody {
		return
	}
	p.list.put(b)
}

// getPartBody and putPartBody are partBodies' get and put.
func getPartBody(n int) *[]byte { return partBodies.get(n) }
func putPartBody(b *[]byte)     { partBodies.put(b) }

// decodePartResponse decodes a response body (after the correlation id)
// for req, skipping the flexible header's tag buffer.
func decodePartResponse(req kmsg.Request, body []byte) (kmsg.Response, error) {
	resp := req.ResponseKind()
	if req.IsFlexible() && req.Key() != apis.ApiVersions { // ApiVersions responses keep the v0 header (KIP-511)
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, fmt.Errorf("%s response header: %w", kmsg.NameForKey(req.Key()), err)
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}

// skipTags skips a flexible header's tagged fields.
func skipTags(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, errors.New("truncated tag count")
	}
	b = b[w:]
	for ; n > 0; n-- {
		if _, w = binary.Uvarint(b); w <= 0 {
			return nil, errors.New("truncated tag")
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || size > uint64(len(b)-w) {
			return nil, errors.New("truncated tag value")
		}
		b = b[w+int(size):]
	}
	return b, nil
}

func (b *brokerConn) isFailed() bool {
	select {
	case <-b.failed:
		return true
	default:
		return false
	}
}
