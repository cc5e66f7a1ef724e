package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Small metadata files in a partition directory. Each is replaced with
// write-temp, fsync, rename, fsync(dir), so a crash leaves the old or the
// new version, never a torn one.
const (
	checkpointFile = "recovery-checkpoint"
	logStartFile   = "log-start-offset"
	lockFile       = ".lock"
	tmpSuffix      = ".tmp"
)

func writeFileAtomic(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

func writeLogStart(dir string, off int64) error {
	return writeFileAtomic(dir, logStartFile, []byte("tollgate-log-start v1\n"+strconv.FormatInt(off, 10)+"\n"))
}

// readLogStart returns -1 when the file does not exist.
func readLogStart(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, logStartFile))
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("read log start offset: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != "tollgate-log-start v1" {
		return -1, fmt.Errorf("read log start offset: unrecognised file %q", b)
	}
	v, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || v < 0 {
		return -1, fmt.Errorf("read log start offset: bad value %q", lines[1])
	}
	return v, nil
}

// checkpoint is the recovery point of a log: everything before
// (segBase, pos) -- offsets before next -- was fsynced before the file was
// written, so recovery verifies only what follows. It carries the producer
// state as of next, so recovery replays only the tail's batch headers.
// clean marks a checkpoint written by Close at the log end.
type checkpoint struct {
	clean   bool
	segBase int64
	pos     int64
	next    int64
	ps      producerState
	// Accounting of the checkpoint segment's prefix, which recovery does
	// not re-read: largest timestamp and its offset, the first batch's
	// timestamp and the bytes since the last index entry.
	maxTs, maxTsOff, firstTs, sinceIndex int64
}

// Layout (big endian): "TGCKPT01", clean u8, segBase i64, pos i64, next i64,
// maxTs i64, maxTsOff i64, firstTs i64, sinceIndex i64,
// nProducers u32, per producer {pid i64, epoch i16, lastOffset i64,
// txnFirst i64, n u8, n x {firstSeq i32, lastSeq i32, base i64}},
// nAborted u32, n x {pid i64, first i64, last i64}, crc32c u32 of all before.
const checkpointMagic = "TGCKPT01"

func (c *checkpoint) encode() []byte {
	be := binary.BigEndian
	b := []byte(checkpointMagic)
	clean := byte(0)
	if c.clean {
		clean = 1
	}
	b = append(b, clean)
	b = be.AppendUint64(b, uint64(c.segBase))
	b = be.AppendUint64(b, uint64(c.pos))
	b = be.AppendUint64(b, uint64(c.next))
	for _, v := range []int64{c.maxTs, c.maxTsOff, c.firstTs, c.sinceIndex} {
		b = be.AppendUint64(b, uint64(v))
	}
	b = be.AppendUint32(b, uint32(len(c.ps.entries)))
	for pid, e := range c.ps.entries {
		b = be.AppendUint64(b, uint64(pid))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = be.AppendUint64(b, uint64(e.lastOffset))
		b = be.AppendUint64(b, uint64(e.txnFirst))
		b = append(b, byte(len(e.batches)))
		for _, sb := range e.batches {
			b = be.AppendUint32(b, uint32(sb.firstSeq))
			b = be.AppendUint32(b, uint32(sb.lastSeq))
			b = be.AppendUint64(b, uint64(sb.base))
		}
	}
	b = be.AppendUint32(b, uint32(len(c.ps.aborted)))
	for _, a := range c.ps.aborted {
		b = be.AppendUint64(b, uint64(a.ProducerID))
		b = be.AppendUint64(b, uint64(a.FirstOffset))
		b = be.AppendUint64(b, uint64(a.LastOffset))
	}
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var errBadCheckpoint = errors.New("checkpoint is damaged")

// ckReader is a sticky-error reader over a checkpoint's bytes.
type ckReader struct {
	b   []byte
	bad bool
}

func (r *ckReader) take(n int) []byte {
	if r.bad || len(r.b) < n {
		r.bad = true
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *ckReader) u8() uint8   { return r.take(1)[0] }
func (r *ckReader) u16() uint16 { return binary.BigEndian.Uint16(r.take(2)) }
func (r *ckReader) u32() uint32 { return binary.BigEndian.Uint32(r.take(4)) }
func (r *ckReader) i64() int64  { return int64(binary.BigEndian.Uint64(r.take(8))) }

func decodeCheckpoint(b []byte) (*checkpoint, error) {
	if len(b) < len(checkpointMagic)+4 || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return nil, errBadCheckpoint
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, errBadCheckpoint
	}
	r := &ckReader{b: body[len(checkpointMagic):]}
	c := &checkpoint{ps: newProducerState()}
	c.clean = r.u8() == 1
	c.segBase, c.pos, c.next = r.i64(), r.i64(), r.i64()
	c.maxTs, c.maxTsOff, c.firstTs, c.sinceIndex = r.i64(), r.i64(), r.i64(), r.i64()
	n := r.u32()
	for i := uint32(0); i < n && !r.bad; i++ {
		pid := r.i64()
		e := &producerEntry{epoch: int16(r.u16()), lastOffset: r.i64(), txnFirst: r.i64()}
		nb := int(r.u8())
		if nb > retainedBatches {
			return nil, errBadCheckpoint
		}
		for j := 0; j < nb; j++ {
			e.batches = append(e.batches, seqBatch{firstSeq: int32(r.u32()), lastSeq: int32(r.u32()), base: r.i64()})
		}
		c.ps.entries[pid] = e
	}
	na := r.u32()
	for i := uint32(0); i < na && !r.bad; i++ {
		c.ps.aborted = append(c.ps.aborted, AbortedTxn{ProducerID: r.i64(), FirstOffset: r.i64(), LastOffset: r.i64()})
	}
	if r.bad || len(r.b) != 0 || c.segBase < 0 || c.pos < 0 || c.next < c.segBase {
		return nil, errBadCheckpoint
	}
	return c, nil
}
