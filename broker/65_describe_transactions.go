package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions: v0
//
// Behavior:
// * Each transactional id's state (Kafka's names: Empty, Ongoing,
//   PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort), producer
//   id and epoch, timeout, start time (-1 unless a transaction is open) and
//   partitions, sorted. Unknown id: TRANSACTIONAL_ID_NOT_FOUND.

func init() { regKey(65, 0, 0, syncHandler(handleDescribeTransactions)) }

func handleDescribeTransactions(c *Conn, req *kmsg.DescribeTransactionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		t := c.b.txns.get(id, false)
		if t == nil {
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		t.mu.Lock()
		st.State, st.ProducerID, st.ProducerEpoch = t.state.String(), t.pid, t.epoch
		st.TimeoutMillis = int32(t.timeout.Milliseconds())
		st.StartTimestamp = -1
		if t.state == txnOngoing || t.state == txnPrepareCommit || t.state == txnPrepareAbort {
			st.StartTimestamp = t.started.UnixMilli()
		}
		byTopic := map[string][]int32{}
		for tp := range t.parts {
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
		t.mu.Unlock()
		for _, name := range sortedKeys(byTopic) {
			ps := byTopic[name]
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			tt.Topic, tt.Partitions = name, ps
			st.Topics = append(st.Topics, tt)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
