package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn: v0-4
//
// Behavior:
// * Commits or aborts the producer's ongoing transaction: the journal
//   records PrepareCommit/PrepareAbort, a marker goes to every partition of
//   the transaction, committed transactional offsets go to their groups,
//   and the journal records CompleteCommit/CompleteAbort. The answer waits
//   for all of it (Kafka answers after the Prepare write and completes
//   asynchronously; waiting keeps "EndTxn returned" equal to "the outcome
//   is visible").
// * A retry of an end that already completed the same way succeeds; the
//   opposite outcome, or an end without an ongoing transaction, is
//   INVALID_TXN_STATE; an end still in progress CONCURRENT_TRANSACTIONS.
// * INVALID_PRODUCER_ID_MAPPING / PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
//   below v2) as AddPartitionsToTxn. A transaction that a timeout aborted
//   has a bumped epoch, so its producer learns it is fenced.
// * A failure writing markers is COORDINATOR_NOT_AVAILABLE; the
//   transaction stays Prepare* and is finished on the next start.
//
// Version notes:
// * v2: PRODUCER_FENCED; v3: flexible; v4: TRANSACTION_ABORTABLE (never)
// * v5 (KIP-890 part 2: the epoch bumps on every end) is not served; we
//   finalize no transaction.version feature, so clients stay at v4.

func init() { regKey(26, 0, 4, handleEndTxn) }

func handleEndTxn(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	answer := func(code int16) {
		resp.ErrorCode = code
		r(encode(resp), nil)
	}
	tc := c.b.txns
	t := tc.get(req.TransactionalID, false)
	if t == nil {
		answer(kerr.InvalidProducerIDMapping.Code)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if code := t.check(req.ProducerID, req.ProducerEpoch, req.Version, 2); code != 0 {
		answer(code)
		return
	}
	switch {
	case t.state == txnCompleteCommit && req.Commit, t.state == txnCompleteAbort && !req.Commit:
		answer(0)
		return
	case t.state != txnOngoing:
		answer(kerr.InvalidTxnState.Code)
		return
	}
	done := tc.startEnd(t, req.Commit, "EndTxn")
	waitThen([]<-chan error{done}, func(err error) {
		if err != nil {
			answer(kerr.CoordinatorNotAvailable.Code)
			return
		}
		answer(0)
	})
}
