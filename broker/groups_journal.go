package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
)

// The coordinator journal is the durable state of the group and
// transaction coordinators: committed offsets, group metadata (members,
// generation, assignments) and transaction state. It is a compacted
// key-value log in one file, <data_dir>/coordinator.journal, playing the
// part of Kafka's __consumer_offsets and __transaction_state topics:
//
//	record := u32 length (of what follows the CRC) | u32 CRC-32C (of what
//	          follows) | u32 key length | key | i32 value length (-1: the key
//	          is deleted) | value
//
// The latest record of a key wins. Open replays the file into a map (a torn
// or corrupt tail, left by a crash mid-write, is cut off) and rewrites it
// with only the live records; at run time the file is rewritten the same way
// once it is four times the live size (and at least journalCompactMin).
// Values are the coordinators' own JSON documents (groups.go,
// consumer_groups_journal.go, share_groups_journal.go, share_partition.go,
// group_configs.go, txns.go).
//
// Durability follows the broker's fsync policy, as the partition logs do:
// FsyncAlways acknowledges a record once a group-commit fsync covers it;
// FsyncInterval and FsyncNever acknowledge once written (page cache), the
// former fsyncing every interval, the latter only on Close. Every policy
// survives SIGKILL of the process.
//
// Lock order: callers may hold a group or transaction lock while they call
// put (a write(2), never an fsync, except the rare compaction under
// FsyncAlways, which fsyncs the new file before it replaces the old one).
// journal.mu before journal.syncMu.
const journalFileName = "coordinator.journal"

// journalCompactMin is the smallest file size that triggers a compaction.
const journalCompactMin = 16 << 20

// errJournalClosed is returned by put after Close.
var errJournalClosed = errors.New("coordinator journal closed")

type journal struct {
	dir        string
	policy     storage.FsyncPolicy
	log        *slog.Logger
	compactMin int64 // journalCompactMin; tests lower it

	mu       sync.Mutex
	f        *os.File
	size     int64             // bytes in f
	live     map[string][]byte // latest value of every live key
	liveSize int64             // encoded size of live
	pending  []chan error      // FsyncAlways acks waiting for a round
	failed   error             // sticky write or fsync failure
	closed   bool
	// writeFault, when set (tests only), fails writes as a full or
	// broken disk would, before anything is written.
	writeFault func() error

	syncMu  sync.Mutex   // held during an fsync of f; compaction takes it to swap f
	fileGen atomic.Int64 // bumped when f is replaced by a compaction

	kick chan struct{}
	quit chan struct{}
	done chan struct{}
}

// openJournal loads dir/coordinator.journal (creating it), compacts it and
// starts the fsync goroutine.
func openJournal(dir string, policy storage.FsyncPolicy, interval time.Duration, log *slog.Logger) (*journal, error) {
	j := &journal{dir: dir, policy: policy, log: log, compactMin: journalCompactMin, live: map[string][]byte{},
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	_ = os.Remove(filepath.Join(dir, journalFileName+".tmp"))
	if err := j.replay(); err != nil {
		return nil, err
	}
	if err := j.rewriteLocked(true); err != nil {
		return nil, err
	}
	if interval <= 0 {
		interval = time.Second
	}
	go j.run(interval)
	return j, nil
}

// replay reads every intact record into j.live.
func (j *journal) replay() error {
	path := filepath.Join(j.dir, journalFileName)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read coordinator journal: %w", err)
	}
	off := 0
	for off < len(raw) {
		key, val, n, ok := decodeJournalRecord(raw[off:])
		if !ok {
			j.log.Warn("coordinator journal: cutting a torn or corrupt tail", "offset", off, "bytes", len(raw)-off)
			break
		}
		j.apply(key, val)
		off += n
	}
	return nil
}

func (j *journal) apply(key string, val []byte) {
	if old, ok := j.live[key]; ok {
		j.liveSize -= int64(journalRecordSize(key, old))
		delete(j.live, key)
	}
	if val != nil {
		j.live[key] = val
		j.liveSize += int64(journalRecordSize(key, val))
	}
}

func journalRecordSize(key string, val []byte) int { return 8 + 4 + len(key) + 4 + len(val) }

// appendJournalRecord encodes one record; val nil is a deletion.
func appendJournalRecord(dst []byte, key string, val []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(key)))
	dst = append(dst, key...)
	if val == nil {
		dst = binary.BigEndian.AppendUint32(dst, 0xffffffff)
	} else {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(val)))
		dst = append(dst, val...)
	}
	body := dst[start+8:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoliTable))
	return dst
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// decodeJournalRecord parses one record from b; ok is false for a torn or
// corrupt record.
func decodeJournalRecord(b []byte) (key string, val []byte, n int, ok bool) {
	if len(b) < 8 {
		return "", nil, 0, false
	}
	l := int64(binary.BigEndian.Uint32(b))
	if l < 8 || l > int64(len(b)-8) {
		return "", nil, 0, false
	}
	body := b[8 : 8+l]
	if crc32.Checksum(body, castagnoliTable) != binary.BigEndian.Uint32(b[4:]) {
		return "", nil, 0, false
	}
	kl := int64(binary.BigEndian.Uint32(body))
	if 4+kl+4 > int64(len(body)) {
		return "", nil, 0, false
	}
	key = string(body[4 : 4+kl])
	vl := int32(binary.BigEndian.Uint32(body[4+kl:]))
	rest := body[4+kl+4:]
	switch {
	case vl == -1 && len(rest) == 0:
		return key, nil, int(8 + l), true
	case vl >= 0 && int(vl) == len(rest):
		return key, append([]byte{}, rest...), int(8 + l), true
	}
	return "", nil, 0, false
}

// snapshot returns the live entries, sorted by key (load order).
func (j *journal) snapshot() []journalEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]journalEntry, 0, len(j.live))
	for k, v := range j.live {
		out = append(out, journalEntry{k, v})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].key < out[b].key })
	return out
}

type journalEntry struct {
	key string
	val []byte
}

// rewriteLocked writes the live entries to a new file and puts it in place
// of the old one. Callers hold j.mu (or own j during open).
func (j *journal) rewriteLocked(opening bool) error {
	keys := make([]string, 0, len(j.live))
	for k := range j.live {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	buf := make([]byte, 0, j.liveSize)
	for _, k := range keys {
		buf = appendJournalRecord(buf, k, j.live[k])
	}
	tmp := filepath.Join(j.dir, journalFileName+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("compact coordinator journal: %w", err)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("compact coordinator journal: %w", err)
	}
	// The new file replaces records that may have been acknowledged as
	// durable, so it must be on disk before the rename (unless nothing is
	// ever fsynced). Opening always syncs: it is rare and keeps recovery
	// simple.
	if opening || j.policy != storage.FsyncNever {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("compact coordinator journal: fsync: %w", err)
		}
	}
	if err := os.Rename(tmp, filepath.Join(j.dir, journalFileName)); err != nil {
		f.Close()
		return fmt.Errorf("compact coordinator journal: %w", err)
	}
	if opening || j.policy != storage.FsyncNever {
		if err := syncDir(j.dir); err != nil {
			f.Close()
			return fmt.Errorf("compact coordinator journal: %w", err)
		}
	}
	j.syncMu.Lock()
	old := j.f
	j.f, j.size = f, int64(len(buf))
	j.fileGen.Add(1)
	j.syncMu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	// Everything pending is in the new, fsynced file.
	for _, ch := range j.pending {
		ch <- nil
	}
	j.pending = nil
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// closedErrChan is the ack of a record that needs no fsync.
var closedErrChan = func() chan error { c := make(chan error); close(c); return c }()

// put records key=val (val nil deletes key). It returns once the record is
// written; the channel yields nil (or is closed) once it is durable per the
// fsync policy, or the error if it never will be.
func (j *journal) put(key string, val []byte) <-chan error {
	return j.putMany([]journalEntry{{key, val}})
}

// putMany writes several records with one write(2).
func (j *journal) putMany(es []journalEntry) <-chan error {
	ch, err := j.write(es)
	if err != nil {
		ch := make(chan error, 1)
		ch <- err
		return ch
	}
	return ch
}

// write is putMany that reports a failed write at once (nothing of es was
// written, so the caller can keep its change pending); the channel then
// yields the durability result.
func (j *journal) write(es []journalEntry) (<-chan error, error) {
	if len(es) == 0 {
		return closedErrChan, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.closed:
		return nil, errJournalClosed
	case j.failed != nil:
		return nil, j.failed
	}
	if j.writeFault != nil {
		if err := j.writeFault(); err != nil {
			return nil, fmt.Errorf("write coordinator journal: %w", err)
		}
	}
	var buf []byte
	for _, e := range es {
		buf = appendJournalRecord(buf, e.key, e.val)
	}
	if _, err := j.f.WriteAt(buf, j.size); err != nil {
		// Cut what may have been written so the next record starts clean.
		if terr := j.f.Truncate(j.size); terr != nil {
			j.failed = fmt.Errorf("coordinator journal: write failed and could not be undone: %w", errors.Join(err, terr))
		}
		return nil, fmt.Errorf("write coordinator journal: %w", err)
	}
	j.size += int64(len(buf))
	for _, e := range es {
		j.apply(e.key, e.val)
	}
	if j.size > j.compactMin && j.size > 4*j.liveSize {
		if err := j.rewriteLocked(false); err != nil {
			j.log.Warn("compact coordinator journal", "err", err)
		}
	}
	if j.policy != storage.FsyncAlways {
		return closedErrChan, nil
	}
	ch := make(chan error, 1)
	j.pending = append(j.pending, ch)
	select {
	case j.kick <- struct{}{}:
	default:
	}
	return ch, nil
}

// run fsyncs: at once when FsyncAlways records wait, every interval under
// FsyncInterval.
func (j *journal) run(interval time.Duration) {
	defer close(j.done)
	var tick <-chan time.Time
	if j.policy == storage.FsyncInterval {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-j.quit:
			return
		case <-j.kick:
		case <-tick:
		}
		j.syncRound()
	}
}

// syncRound fsyncs the file and acknowledges what waited for it.
func (j *journal) syncRound() {
	j.mu.Lock()
	waiting := j.pending
	j.pending = nil
	f, gen := j.f, j.fileGen.Load()
	j.mu.Unlock()
	j.syncMu.Lock()
	var err error
	if j.fileGen.Load() == gen { // else a compaction already fsynced it all
		if serr := f.Sync(); serr != nil {
			err = fmt.Errorf("fsync coordinator journal: %w", serr)
		}
	}
	j.syncMu.Unlock()
	if err != nil {
		j.mu.Lock()
		// After a failed fsync the page cache state is unknown (the
		// "fsyncgate" lesson): refuse further records.
		j.failed = err
		j.mu.Unlock()
		j.log.Error("coordinator journal", "err", err)
	}
	for _, ch := range waiting {
		ch <- err
	}
}

// close fsyncs and closes the file.
func (j *journal) close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	j.mu.Unlock()
	close(j.quit)
	<-j.done
	j.syncRound()
	j.mu.Lock()
	defer j.mu.Unlock()
	err := j.f.Sync()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("close coordinator journal: %w", err)
	}
	return nil
}
