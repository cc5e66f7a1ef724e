package broker

import (
	"sync"
	"sync/atomic"

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
// * Transactional ids are answered INVALID_REQUEST ("sent to an incompatible
//   broker"): transactions are not implemented yet (skipped_features).
//
// Version notes:
// * v1: throttle applies after the response
// * v2: flexible
// * v3: ProducerID, ProducerEpoch in the request (KIP-360)
// * v4: no change visible here
// * v5: Enable2PC, KeepPreparedTxn (KIP-939), unused

func init() { regKey(22, 0, 5, syncHandler(handleInitProducerID)) }

func handleInitProducerID(c *Conn, req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil {
		c.b.log.Warn("transactional producer refused: transactions are not supported by the built-in broker yet",
			"remote", c.remote, "transactional_id", *req.TransactionalID)
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	id, err := c.b.pids.alloc()
	if err != nil {
		c.b.log.Error("allocate producer id", "err", err)
		resp.ErrorCode = kerr.KafkaStorageError.Code
		return resp, nil
	}
	resp.ProducerID = id
	resp.ProducerEpoch = 0
	return resp, nil
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
