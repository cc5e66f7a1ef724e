package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddPartitionsToTxn: v0-5
//
// Behavior:
// * Adds partitions to the producer's transaction (starting it) and answers
//   once the transaction state is durable in the coordinator journal.
// * Unknown transactional id or another producer id:
//   INVALID_PRODUCER_ID_MAPPING; another epoch: PRODUCER_FENCED
//   (INVALID_PRODUCER_EPOCH below v2); a transaction being completed:
//   CONCURRENT_TRANSACTIONS. An unknown topic or partition is
//   UNKNOWN_TOPIC_OR_PARTITION and every other partition of the request
//   OPERATION_NOT_ATTEMPTED, as Kafka does; nothing is added then.
// * v4+ batches transactions (broker-to-broker in Kafka); VerifyOnly
//   checks that the partitions are already in the ongoing transaction
//   (INVALID_TXN_STATE otherwise) without adding them.
//
// Version notes:
// * v1: no change visible here; v2: PRODUCER_FENCED; v3: flexible
// * v4: batched Transactions, VerifyOnly, top-level ErrorCode (KIP-890)
// * v5: TRANSACTION_ABORTABLE may be returned (never here)

func init() { regKey(24, 0, 5, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(c *Conn, kreq kmsg.Request, r reply) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		var topics []kmsg.AddPartitionsToTxnRequestTransactionTopic
		for _, t := range req.Topics {
			topics = append(topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
		res, durable := c.b.txns.addPartitions(req.Version, kmsg.AddPartitionsToTxnRequestTransaction{
			TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Topics: topics,
		})
		waitThen([]<-chan error{durable}, func(err error) {
			for _, t := range res.Topics {
				st := kmsg.NewAddPartitionsToTxnResponseTopic()
				st.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					sp.Partition, sp.ErrorCode = p.Partition, p.ErrorCode
					if err != nil && sp.ErrorCode == 0 {
						sp.ErrorCode = kerr.CoordinatorNotAvailable.Code
					}
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			r(encode(resp), nil)
		})
		return
	}
	var waits []<-chan error
	for _, rt := range req.Transactions {
		res, durable := c.b.txns.addPartitions(req.Version, rt)
		resp.Transactions = append(resp.Transactions, res)
		waits = append(waits, durable)
	}
	waitThen(waits, func(err error) {
		if err != nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		r(encode(resp), nil)
	})
}

// addPartitions serves one transaction of an AddPartitionsToTxn.
func (tc *txnCoordinator) addPartitions(version int16, rt kmsg.AddPartitionsToTxnRequestTransaction) (kmsg.AddPartitionsToTxnResponseTransaction, <-chan error) {
	res := kmsg.NewAddPartitionsToTxnResponseTransaction()
	res.TransactionalID = rt.TransactionalID
	code := int16(0)
	t := tc.get(rt.TransactionalID, false)
	if t == nil {
		code = kerr.InvalidProducerIDMapping.Code
	} else {
		t.mu.Lock()
		defer t.mu.Unlock()
		code = t.check(rt.ProducerID, rt.ProducerEpoch, version, 2)
	}
	var add []topicPartition
	unknown := false
	for _, rtt := range rt.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		st.Topic = rtt.Topic
		topic := tc.b.lookup(rtt.Topic)
		for _, p := range rtt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			sp.Partition = p
			switch {
			case code != 0:
				sp.ErrorCode = code
			case tc.b.partitionOf(topic, p) == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				unknown = true
			case rt.VerifyOnly && (t.state != txnOngoing || !t.parts[topicPartition{rtt.Topic, p}]):
				sp.ErrorCode = kerr.InvalidTxnState.Code
			default:
				add = append(add, topicPartition{rtt.Topic, p})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		res.Topics = append(res.Topics, st)
	}
	if code != 0 || rt.VerifyOnly {
		return res, closedErrChan
	}
	if unknown {
		for ti := range res.Topics {
			for pi := range res.Topics[ti].Partitions {
				if sp := &res.Topics[ti].Partitions[pi]; sp.ErrorCode == 0 {
					sp.ErrorCode = kerr.OperationNotAttempted.Code
				}
			}
		}
		return res, closedErrChan
	}
	t.begin()
	for _, tp := range add {
		t.parts[tp] = true
	}
	return res, t.persist(tc.j)
}
