package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddOffsetsToTxn: v0-4
//
// Behavior:
// * Adds a consumer group to the producer's transaction (Kafka adds the
//   group's __consumer_offsets partition), so TxnOffsetCommit may follow;
//   answers once the state is durable.
// * Errors as AddPartitionsToTxn: INVALID_PRODUCER_ID_MAPPING,
//   PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below v2),
//   CONCURRENT_TRANSACTIONS; an empty group id is INVALID_GROUP_ID.
//
// Version notes:
// * v2: PRODUCER_FENCED; v3: flexible; v4: TRANSACTION_ABORTABLE (never here)

func init() { regKey(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	answer := func(code int16) {
		resp.ErrorCode = code
		r(encode(resp), nil)
	}
	if req.Group == "" {
		answer(kerr.InvalidGroupID.Code)
		return
	}
	t := c.b.txns.get(req.TransactionalID, false)
	if t == nil {
		answer(kerr.InvalidProducerIDMapping.Code)
		return
	}
	t.mu.Lock()
	if code := t.check(req.ProducerID, req.ProducerEpoch, req.Version, 2); code != 0 {
		t.mu.Unlock()
		answer(code)
		return
	}
	t.begin()
	t.groups[req.Group] = true
	durable := t.persist(c.b.txns.j)
	t.mu.Unlock()
	waitThen([]<-chan error{durable}, func(err error) {
		if err != nil {
			answer(kerr.CoordinatorNotAvailable.Code)
			return
		}
		answer(0)
	})
}
