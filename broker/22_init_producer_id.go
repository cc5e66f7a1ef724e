package broker

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerID: v0-5
//
// Behavior:
// * Idempotent producers (no transactional id) get a fresh producer id with
//   epoch 0. Ids are allocated in blocks whose upper bound is persisted in
//   the registry before any id of the block is handed out, so an id is
//   never reused after a restart (or a crash).
// * A producer that passes its current id and epoch (KIP-360, v3+) to
//   recover from UNKNOWN_PRODUCER_ID or a sequence error also gets a fresh
//   id: a new id always has an empty sequence history.
// * Transactional ids (txns.go): the first InitProducerID allocates an id
//   with epoch 0; every later one bumps the epoch, which fences the
//   previous producer of the id (its requests get PRODUCER_FENCED, or
//   INVALID_PRODUCER_EPOCH on produce). An exhausted epoch takes a new
//   producer id. A transaction left open by the previous producer is
//   aborted first (markers written with the new epoch); the answer waits
//   for that and for the journal write of the new epoch.
// * A transactional producer passing its id and epoch (KIP-360) must pass
//   the current ones (or the ones a timeout abort just bumped); anything
//   else is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below v4).
// * TransactionTimeoutMillis <= 0 or above transaction.max.timeout.ms is
//   INVALID_TRANSACTION_TIMEOUT; a transaction still being completed is
//   CONCURRENT_TRANSACTIONS (clients retry).
//
// Version notes:
// * v1: throttle applies after the response
// * v2: flexible
// * v3: ProducerID, ProducerEpoch in the request (KIP-360)
// * v4: PRODUCER_FENCED instead of INVALID_PRODUCER_EPOCH
// * v5: Enable2PC, KeepPreparedTxn (KIP-939), ignored

func init() { regKey(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil && *req.TransactionalID != "" {
		c.b.txns.initProducer(req, resp, r)
		return
	}
	id, err := c.b.pids.alloc()
	if err != nil {
		c.b.log.Error("allocate producer id", "err", err)
		resp.ErrorCode = kerr.KafkaStorageError.Code
		r(encode(resp), nil)
		return
	}
	resp.ProducerID = id
	resp.ProducerEpoch = 0
	r(encode(resp), nil)
}

// initProducer is InitProducerID for a transactional id.
func (tc *txnCoordinator) initProducer(req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse, r reply) {
	answer := func(code int16) {
		resp.ErrorCode = code
		if code != 0 {
			resp.ProducerID, resp.ProducerEpoch = -1, -1
		}
		r(encode(resp), nil)
	}
	timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > tc.maxTimeout {
		answer(kerr.InvalidTransactionTimeout.Code)
		return
	}
	t := tc.get(*req.TransactionalID, true)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.state == txnPrepareCommit || t.state == txnPrepareAbort:
		answer(kerr.ConcurrentTransactions.Code)
		return
	case req.ProducerID >= 0 && t.pid >= 0 && (req.ProducerID != t.pid || req.ProducerEpoch != t.epoch && req.ProducerEpoch != t.lastEpoch):
		answer(fencedCode(req.Version, 4))
		return
	}
	if t.state == txnOngoing {
		// Fence the old producer and abort its transaction; the client
		// retries on CONCURRENT_TRANSACTIONS, as with Kafka, and then
		// gets the next epoch.
		t.bumpEpoch()
		tc.startEnd(t, false, "new producer for the transactional id")
		answer(kerr.ConcurrentTransactions.Code)
		return
	}
	if t.pid < 0 || t.epoch >= math.MaxInt16-1 {
		id, err := tc.b.pids.alloc()
		if err != nil {
			tc.b.log.Error("allocate producer id", "err", err)
			answer(kerr.KafkaStorageError.Code)
			return
		}
		t.pid, t.epoch = id, 0
	} else {
		t.epoch++
	}
	t.lastEpoch = -1
	t.timeout = timeout
	t.state = txnEmpty
	t.updated = time.Now()
	resp.ProducerID, resp.ProducerEpoch = t.pid, t.epoch
	durable := t.persist(tc.j)
	waitThen([]<-chan error{durable}, func(err error) {
		if err != nil {
			tc.b.log.Error("store transaction state", "transactional_id", *req.TransactionalID, "err", err)
			answer(kerr.CoordinatorNotAvailable.Code)
			return
		}
		answer(0)
	})
}

// producerIDBlock is how many ids one persisted registry write covers.
const producerIDBlock = 1000

// producerIDs allocates producer ids that are unique across restarts.
// Lock order: producerIDs.mu before Broker.mu.
type producerIDs struct {
	b     *Broker
	mu    sync.Mutex
	next  int64        // guarded by mu
	limit atomic.Int64 // first id not covered by the persisted limit
}

func (p *producerIDs) init(b *Broker, persisted int64) {
	p.b = b
	p.next = persisted
	p.limit.Store(persisted)
}

// limitForPersist is the limit to write in the registry.
func (p *producerIDs) limitForPersist() int64 { return p.limit.Load() }

// alloc returns a never-used producer id, persisting a new block limit
// first when the current block is exhausted.
func (p *producerIDs) alloc() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.limit.Load() {
		old := p.limit.Load()
		p.limit.Store(p.next + producerIDBlock)
		p.b.mu.Lock()
		err := p.b.persistLocked()
		p.b.mu.Unlock()
		if err != nil {
			p.limit.Store(old)
			return -1, err
		}
	}
	id := p.next
	p.next++
	return id, nil
}
