package broker

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transaction coordinator (Kafka's TransactionCoordinator, transactions
// v1: explicit AddPartitionsToTxn / AddOffsetsToTxn, no KIP-890 part 2).
//
// Ownership: txnCoordinator.mu guards the map; each transaction's state is
// guarded by its txn.mu. A transactional produce holds txn.mu across its
// append (a write(2)), so EndTxn, which moves the state to Prepare* under
// the same lock, can never be overtaken by a produce that lands after the
// markers. Ending a transaction (journal write of Prepare*, markers in
// every partition, offsets to the group coordinator, journal write of
// Complete*) runs in its own goroutine without the lock; requests that
// arrive meanwhile get CONCURRENT_TRANSACTIONS, which clients retry.
// Lock order: txnCoordinator.mu, txn.mu, then group.mu, Broker.mu,
// journal.mu.
//
// Durability: the transaction's state (producer id and epoch, partitions,
// groups, pending offsets) is a journal record written before
// AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit answer. On Open,
// a transaction found Ongoing or PrepareAbort is aborted (with an epoch
// bump, fencing the old producer) and one found PrepareCommit is committed
// again, so nothing is left half-visible after a crash.

type txnState int8

const (
	txnEmpty txnState = iota
	txnOngoing
	txnPrepareCommit
	txnPrepareAbort
	txnCompleteCommit
	txnCompleteAbort
)

// String is Kafka's TransactionState name (DescribeTransactions,
// ListTransactions).
func (s txnState) String() string {
	return [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}[s]
}

func parseTxnState(s string) (txnState, bool) {
	for st := txnEmpty; st <= txnCompleteAbort; st++ {
		if strings.EqualFold(st.String(), s) {
			return st, true
		}
	}
	return 0, false
}

const (
	defaultTxnMaxTimeout = 15 * time.Minute // transaction.max.timeout.ms
	txnKeyPrefix         = "t\x00"          // journal key: t NUL transactional id
	txnTimeoutCheck      = time.Second      // how often timed-out transactions are looked for
)

type topicPartition struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
}

// txn is one transactional id.
type txn struct {
	id string

	mu        sync.Mutex
	pid       int64
	epoch     int16
	lastEpoch int16 // epoch before a timeout's bump (KIP-360 recovery), -1
	timeout   time.Duration
	state     txnState
	parts     map[topicPartition]bool
	groups    map[string]bool
	offsets   map[string]map[topicPartition]committed // pending TxnOffsetCommits by group
	started   time.Time
	updated   time.Time
	ending    bool // a startEnd goroutine is running
}

type txnCoordinator struct {
	b          *Broker
	j          *journal
	maxTimeout time.Duration

	mu   sync.Mutex
	txns map[string]*txn
}

func newTxnCoordinator(b *Broker, j *journal) *txnCoordinator {
	tc := &txnCoordinator{b: b, j: j, maxTimeout: b.cfg.TransactionMaxTimeout, txns: map[string]*txn{}}
	if tc.maxTimeout <= 0 {
		tc.maxTimeout = defaultTxnMaxTimeout
	}
	return tc
}

// get returns the transaction, creating an empty one if create is set.
func (tc *txnCoordinator) get(id string, create bool) *txn {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	t := tc.txns[id]
	if t == nil && create {
		t = &txn{id: id, pid: -1, epoch: -1, lastEpoch: -1, parts: map[topicPartition]bool{}, groups: map[string]bool{},
			offsets: map[string]map[topicPartition]committed{}}
		tc.txns[id] = t
	}
	return t
}

func (tc *txnCoordinator) all() []*txn {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	out := make([]*txn, 0, len(tc.txns))
	for _, t := range tc.txns {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// fencedCode is PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for request
// versions older than the one that introduced it (Kafka's KafkaApis maps
// it the same way for old clients).
func fencedCode(version, since int16) int16 {
	if version < since {
		return kerr.InvalidProducerEpoch.Code
	}
	return kerr.ProducerFenced.Code
}

// check validates a request's producer id and epoch against t (locked).
func (t *txn) check(pid int64, epoch int16, version, fencedSince int16) int16 {
	switch {
	case t.pid < 0 || pid != t.pid:
		return kerr.InvalidProducerIDMapping.Code
	case epoch != t.epoch:
		return fencedCode(version, fencedSince)
	case t.state == txnPrepareCommit || t.state == txnPrepareAbort:
		return kerr.ConcurrentTransactions.Code
	}
	return 0
}

// begin moves t (locked) to Ongoing if it is not already.
func (t *txn) begin() {
	if t.state != txnOngoing {
		t.state = txnOngoing
		t.started = time.Now()
	}
	t.updated = time.Now()
}

// txnRecord is the journal document of a transaction.
type txnRecord struct {
	PID       int64            `json:"pid"`
	Epoch     int16            `json:"epoch"`
	LastEpoch int16            `json:"last_epoch"`
	TimeoutMs int64            `json:"timeout_ms"`
	State     string           `json:"state"`
	StartMs   int64            `json:"start_ms"`
	Parts     []topicPartition `json:"parts,omitempty"`
	Groups    []string         `json:"groups,omitempty"`
	Offsets   []txnOffset      `json:"offsets,omitempty"`
}

type txnOffset struct {
	Group string `json:"g"`
	topicPartition
	committed
}

// persist writes t (locked) to the journal.
func (t *txn) persist(j *journal) <-chan error {
	rec := txnRecord{PID: t.pid, Epoch: t.epoch, LastEpoch: t.lastEpoch, TimeoutMs: t.timeout.Milliseconds(),
		State: t.state.String(), StartMs: t.started.UnixMilli()}
	for tp := range t.parts {
		rec.Parts = append(rec.Parts, tp)
	}
	for g := range t.groups {
		rec.Groups = append(rec.Groups, g)
	}
	for g, byTP := range t.offsets {
		for tp, oc := range byTP {
			rec.Offsets = append(rec.Offsets, txnOffset{g, tp, oc})
		}
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		ch := make(chan error, 1)
		ch <- fmt.Errorf("encode transaction %s: %w", t.id, err)
		return ch
	}
	return j.put(txnKeyPrefix+t.id, raw)
}

// load restores every transaction and finishes those a crash interrupted.
func (tc *txnCoordinator) load(entries []journalEntry) error {
	var unfinished []*txn
	for _, e := range entries {
		if !strings.HasPrefix(e.key, txnKeyPrefix) {
			continue
		}
		var rec txnRecord
		if err := json.Unmarshal(e.val, &rec); err != nil {
			return fmt.Errorf("coordinator journal: transaction %q: %w", e.key[len(txnKeyPrefix):], err)
		}
		st, ok := parseTxnState(rec.State)
		if !ok {
			return fmt.Errorf("coordinator journal: transaction %q: unknown state %q", e.key[len(txnKeyPrefix):], rec.State)
		}
		t := tc.get(e.key[len(txnKeyPrefix):], true)
		t.pid, t.epoch, t.lastEpoch, t.state = rec.PID, rec.Epoch, rec.LastEpoch, st
		t.timeout = time.Duration(rec.TimeoutMs) * time.Millisecond
		t.started, t.updated = time.UnixMilli(rec.StartMs), time.Now()
		for _, tp := range rec.Parts {
			t.parts[tp] = true
		}
		for _, g := range rec.Groups {
			t.groups[g] = true
		}
		for _, o := range rec.Offsets {
			t.addOffset(o.Group, o.topicPartition, o.committed)
		}
		if st == txnOngoing || st == txnPrepareCommit || st == txnPrepareAbort {
			unfinished = append(unfinished, t)
		}
	}
	for _, t := range unfinished {
		t.mu.Lock()
		commit := t.state == txnPrepareCommit
		if !commit {
			// An open transaction's producer is gone with the old process
			// (or will be fenced): abort with a bumped epoch.
			t.bumpEpoch()
		}
		done := tc.startEnd(t, commit, "recovery")
		t.mu.Unlock()
		if err := <-done; err != nil {
			return fmt.Errorf("recover transaction %q: %w", t.id, err)
		}
		tc.b.log.Info("recovered an interrupted transaction", "transactional_id", t.id, "committed", commit)
	}
	return nil
}

func (t *txn) addOffset(g string, tp topicPartition, oc committed) {
	m := t.offsets[g]
	if m == nil {
		m = map[topicPartition]committed{}
		t.offsets[g] = m
	}
	m[tp] = oc
}

// bumpEpoch fences the current producer (t locked). On exhaustion the
// epoch wraps by taking a new producer id, which InitProducerID does.
func (t *txn) bumpEpoch() {
	t.lastEpoch = t.epoch
	if t.epoch < math.MaxInt16-1 {
		t.epoch++
	}
}

// startEnd moves t (locked) to Prepare* and finishes the transaction in a
// goroutine: journal, markers, offsets, journal. The channel yields the
// outcome once the transaction is Complete* (or failed; it then stays in
// Prepare* and the next timeout pass or restart finishes it).
func (tc *txnCoordinator) startEnd(t *txn, commit bool, why string) <-chan error {
	if commit {
		t.state = txnPrepareCommit
	} else {
		t.state = txnPrepareAbort
	}
	t.updated = time.Now()
	t.ending = true
	prepared := t.persist(tc.j)
	pid, epoch := t.pid, t.epoch
	parts := make([]topicPartition, 0, len(t.parts))
	for tp := range t.parts {
		parts = append(parts, tp)
	}
	offsets := t.offsets
	done := make(chan error, 1)
	go func() {
		err := <-prepared
		if err == nil {
			err = tc.writeMarkers(parts, pid, epoch, commit)
		}
		if err == nil && commit {
			err = tc.applyOffsets(offsets)
		}
		t.mu.Lock()
		t.ending = false
		var complete <-chan error
		if err == nil {
			if commit {
				t.state = txnCompleteCommit
			} else {
				t.state = txnCompleteAbort
			}
			t.parts = map[topicPartition]bool{}
			t.groups = map[string]bool{}
			t.offsets = map[string]map[topicPartition]committed{}
			t.updated = time.Now()
			complete = t.persist(tc.j)
		}
		t.mu.Unlock()
		if complete != nil {
			err = <-complete
		}
		if err != nil {
			tc.b.log.Error("end transaction", "transactional_id", t.id, "commit", commit, "why", why, "err", err)
		}
		done <- err
	}()
	return done
}

// writeMarkers appends a commit or abort marker to every partition and
// waits until they are durable.
func (tc *txnCoordinator) writeMarkers(parts []topicPartition, pid int64, epoch int16, commit bool) error {
	var waits []<-chan error
	now := time.Now()
	for _, tp := range parts {
		p := tc.b.partitionOf(tc.b.lookup(tp.Topic), tp.Partition)
		if p == nil {
			continue // the topic was deleted: nothing left to mark
		}
		_, durable, err := p.log.Append(controlBatch(pid, epoch, commit, now), storage.AppendOptions{AllowControl: true, Now: now})
		if err != nil {
			return fmt.Errorf("write marker to %s: %w", p.dirName(), err)
		}
		waits = append(waits, durable)
	}
	var errs []error
	for _, w := range waits {
		if err := <-w; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// applyOffsets commits a transaction's pending offsets to their groups.
func (tc *txnCoordinator) applyOffsets(offsets map[string]map[topicPartition]committed) error {
	var waits []<-chan error
	for name, byTP := range offsets {
		ocs := make([]offsetCommit, 0, len(byTP))
		for tp, oc := range byTP {
			ocs = append(ocs, offsetCommit{tp.Topic, tp.Partition, oc})
		}
		g := tc.b.groups.lock(name, true)
		waits = append(waits, g.commit(ocs))
		g.mu.Unlock()
	}
	var errs []error
	for _, w := range waits {
		if err := <-w; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// controlBatch encodes a transaction marker: one control record whose key
// is (version 0, type 0 abort / 1 commit) and value (version 0,
// coordinator epoch 0), in a batch with the transactional and control
// attributes (Kafka's EndTransactionMarker / MemoryRecords.withEndTransactionMarker).
func controlBatch(pid int64, epoch int16, commit bool, now time.Time) []byte {
	typ := int16(0)
	if commit {
		typ = 1
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 0)
	rec := kmsg.Record{Key: key, Value: val}
	body := rec.AppendTo(nil)[1:] // AppendTo writes Length 0 first; we prefix the real length
	recs := binary.AppendVarint(nil, int64(len(body)))
	recs = append(recs, body...)
	ms := now.UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x30, // transactional | control
		FirstTimestamp: ms, MaxTimestamp: ms,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: -1,
		NumRecords: 1, Records: recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoliTable))
	return raw
}

// timeoutLoop aborts transactions open longer than their timeout, bumping
// the epoch so the stuck producer is fenced (Kafka's
// abortTimedOutTransactions), and retries ends that failed.
func (tc *txnCoordinator) timeoutLoop(stop <-chan struct{}) {
	tick := time.NewTicker(txnTimeoutCheck)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			tc.abortExpired(now)
		}
	}
}

func (tc *txnCoordinator) abortExpired(now time.Time) {
	for _, t := range tc.all() {
		t.mu.Lock()
		switch {
		case t.state == txnOngoing && now.Sub(t.started) > t.timeout:
			tc.b.log.Info("aborting a timed-out transaction", "transactional_id", t.id, "timeout", t.timeout)
			t.bumpEpoch()
			tc.startEnd(t, false, "timeout")
		case (t.state == txnPrepareCommit || t.state == txnPrepareAbort) && !t.ending:
			// An earlier end failed (a marker or journal write); the
			// outcome is decided, so finish it.
			tc.startEnd(t, t.state == txnPrepareCommit, "retry")
		}
		t.mu.Unlock()
	}
}

// produce appends a transactional batch for txnID if the batch's producer
// owns the transaction and the partition was added to it. The append
// runs under the transaction's lock (see the ownership note above).
func (tc *txnCoordinator) produce(txnID string, records []byte, p *partition, appendFn func() (int16, string, <-chan error)) (int16, string, <-chan error) {
	if len(records) < recordBatchOverhead {
		return kerr.CorruptMessage.Code, "record set shorter than a batch header", nil
	}
	pid := int64(binary.BigEndian.Uint64(records[43:]))
	epoch := int16(binary.BigEndian.Uint16(records[51:]))
	attrs := binary.BigEndian.Uint16(records[21:])
	t := tc.get(txnID, false)
	if t == nil {
		return kerr.InvalidProducerIDMapping.Code, "unknown transactional id", nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case attrs&0x10 == 0:
		return kerr.InvalidRecord.Code, "a transactional produce must carry a transactional batch", nil
	case pid != t.pid:
		return kerr.InvalidProducerIDMapping.Code, "the batch's producer id does not own this transactional id", nil
	case epoch < t.epoch:
		return kerr.InvalidProducerEpoch.Code, fmt.Sprintf("producer epoch %d is fenced by epoch %d", epoch, t.epoch), nil
	case epoch > t.epoch, t.state != txnOngoing, !t.parts[topicPartition{p.t.name, p.idx}]:
		return kerr.InvalidTxnState.Code, "the partition was not added to an ongoing transaction", nil
	}
	t.updated = time.Now()
	return appendFn()
}

// pendingOffsets returns the partitions with a transactional commit
// pending for group (OffsetFetch RequireStable).
func (tc *txnCoordinator) pendingOffsets(group string) map[string]map[int32]bool {
	var out map[string]map[int32]bool
	for _, t := range tc.all() {
		t.mu.Lock()
		for tp := range t.offsets[group] {
			if out == nil {
				out = map[string]map[int32]bool{}
			}
			if out[tp.Topic] == nil {
				out[tp.Topic] = map[int32]bool{}
			}
			out[tp.Topic][tp.Partition] = true
		}
		t.mu.Unlock()
	}
	return out
}

// groupHasPending reports whether a transaction holds offsets for group
// (such a group must not expire).
func (tc *txnCoordinator) groupHasPending(group string) bool {
	return len(tc.pendingOffsets(group)) > 0
}
