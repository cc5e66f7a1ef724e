package proxy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzListTransactionsBody is a ListTransactions answer as a broker sends
// it after the correlation id (flexible: an empty header tag buffer).
func fuzzListTransactionsBody(code int16, ids ...string) []byte {
	r := kmsg.NewPtrListTransactionsResponse()
	r.ErrorCode = code
	r.UnknownStateFilters = []string{"Bogus"}
	for i, id := range ids {
		s := kmsg.NewListTransactionsResponseTransactionState()
		s.TransactionalID, s.ProducerID, s.TransactionState = id, int64(i), "Ongoing"
		r.TransactionStates = append(r.TransactionStates, s)
	}
	return append([]byte{0}, r.AppendTo(nil)...)
}

// FuzzSinglePortMergeListTransactions: three brokers' answers to one
// ListTransactions fan-out (bytes as a broker sends them; one broker that
// did not answer when a body is empty). A malformed answer is an error,
// never a panic; decoded ones merge into an answer that encodes and
// decodes, lists every transactional id the parts listed exactly once,
// reports every unknown state filter once, and has an error when a part
// had one or was missing.
func FuzzSinglePortMergeListTransactions(f *testing.F) {
	f.Add(fuzzListTransactionsBody(0, "a", "b"), fuzzListTransactionsBody(0, "b", "c"), []byte{})
	f.Add(fuzzListTransactionsBody(0, "a"), fuzzListTransactionsBody(kerr.CoordinatorLoadInProgress.Code, "a"), fuzzListTransactionsBody(0))
	f.Add([]byte{0, 0, 0}, []byte{0xff}, fuzzListTransactionsBody(0, "x"))
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		req := kmsg.NewPtrListTransactionsRequest()
		parts := map[int32]kmsg.Response{}
		partErr, ids, filters := false, map[string]bool{}, map[string]bool{}
		for i, body := range [][]byte{a, b, c} {
			if len(body) == 0 {
				continue // that broker did not answer
			}
			resp, err := decodePartResponse(req, body)
			if err != nil {
				return
			}
			x := resp.(*kmsg.ListTransactionsResponse)
			partErr = partErr || x.ErrorCode != 0
			for _, s := range x.TransactionStates {
				ids[s.TransactionalID] = true
			}
			for _, f := range x.UnknownStateFilters {
				filters[f] = true
			}
			parts[int32(i)] = resp
		}
		out := mergeListTransactions(req, 3, parts)
		if (partErr || len(parts) < 3) != (out.ErrorCode != 0) {
			t.Fatalf("merged error %d; a part erred %v, %d of 3 answered", out.ErrorCode, partErr, len(parts))
		}
		listed := map[string]bool{}
		for _, s := range out.TransactionStates {
			if listed[s.TransactionalID] {
				t.Fatalf("%q listed twice", s.TransactionalID)
			}
			listed[s.TransactionalID] = true
		}
		if len(listed) != len(ids) {
			t.Fatalf("merged %d ids, the parts listed %d", len(listed), len(ids))
		}
		if len(out.UnknownStateFilters) != len(filters) {
			t.Fatalf("merged %d unknown filters, the parts had %d", len(out.UnknownStateFilters), len(filters))
		}
		back := kmsg.NewPtrListTransactionsResponse()
		if err := back.ReadFrom(out.AppendTo(nil)); err != nil {
			t.Fatalf("merged answer does not decode: %v", err)
		}
	})
}

// FuzzSinglePortMergeDescribeProducers: two leaders' answers to the parts
// of one DescribeProducers for partitions 0-2 of "a" and 0-1 of "b". A
// decoded pair merges into an answer that lists every requested
// partition, one no part answered for as NOT_LEADER_OR_FOLLOWER (and the
// view marked stale), and encodes.
func FuzzSinglePortMergeDescribeProducers(f *testing.F) {
	good := kmsg.NewPtrDescribeProducersResponse()
	tp := kmsg.NewDescribeProducersResponseTopic()
	tp.Topic = "a"
	p := kmsg.NewDescribeProducersResponseTopicPartition()
	p.Partition = 1
	p.ActiveProducers = append(p.ActiveProducers, kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer())
	tp.Partitions = append(tp.Partitions, p)
	good.Topics = append(good.Topics, tp)
	body := append([]byte{0}, good.AppendTo(nil)...)
	f.Add(body, []byte{0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff}, body)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		req := kmsg.NewPtrDescribeProducersRequest()
		for name, n := range map[string]int32{"a": 3, "b": 2} {
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic = name
			for p := range n {
				rt.Partitions = append(rt.Partitions, p)
			}
			req.Topics = append(req.Topics, rt)
		}
		parts := map[int32]kmsg.Response{}
		for i, body := range [][]byte{a, b} {
			resp, err := decodePartResponse(req, body)
			if err != nil {
				return
			}
			parts[int32(i)] = resp
		}
		out, stale := mergeDescribeProducers(req, parts)
		have, filled := map[string]map[int32]bool{}, false
		for _, tp := range out.Topics {
			if have[tp.Topic] == nil {
				have[tp.Topic] = map[int32]bool{}
			}
			for _, p := range tp.Partitions {
				have[tp.Topic][p.Partition] = true
				filled = filled || p.ErrorCode == kerr.NotLeaderForPartition.Code
			}
		}
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				if !have[rt.Topic][p] {
					t.Fatalf("%s[%d] missing from the merged answer", rt.Topic, p)
				}
			}
		}
		if filled && !stale {
			t.Fatal("NOT_LEADER_OR_FOLLOWER in the answer but the view is not marked stale")
		}
		back := kmsg.NewPtrDescribeProducersResponse()
		if err := back.ReadFrom(out.AppendTo(nil)); err != nil {
			t.Fatalf("merged answer does not decode: %v", err)
		}
	})
}
