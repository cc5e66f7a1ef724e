package broker

import (
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListTransactions: v0-2
//
// Behavior:
// * Every transactional id with its producer id and state, filtered by
//   StateFilters (unknown names are echoed in UnknownStateFilters and
//   match nothing), ProducerIDFilters, DurationFilterMillis (v1: open
//   longer than) and TransactionalIDPattern (v2: must match the whole id,
//   as Java's Matcher.matches; the syntax is Go's RE2, close to Java's for
//   ordinary patterns; an invalid one is INVALID_REQUEST).
//
// Version notes:
// * v1: DurationFilterMillis (KIP-994); v2: TransactionalIDPattern (KIP-1152)

func init() { regKey(66, 0, 2, syncHandler(handleListTransactions)) }

func handleListTransactions(c *Conn, req *kmsg.ListTransactionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	states := map[txnState]bool{}
	for _, f := range req.StateFilters {
		st, ok := parseTxnState(f)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
			continue
		}
		states[st] = true
	}
	pids := map[int64]bool{}
	for _, p := range req.ProducerIDFilters {
		pids[p] = true
	}
	var pattern *regexp.Regexp
	if req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$")
		if err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil
		}
		pattern = re
	}
	now := time.Now()
	for _, t := range c.b.txns.all() {
		t.mu.Lock()
		st, pid, started := t.state, t.pid, t.started
		t.mu.Unlock()
		open := st == txnOngoing || st == txnPrepareCommit || st == txnPrepareAbort
		switch {
		case len(req.StateFilters) > 0 && !states[st],
			len(pids) > 0 && !pids[pid],
			req.DurationFilterMillis > 0 && (!open || now.Sub(started).Milliseconds() < req.DurationFilterMillis),
			pattern != nil && !pattern.MatchString(t.id):
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = t.id, pid, st.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp, nil
}
