//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// oneRecordBatch encodes a magic-2 batch holding one record, as a
// non-idempotent producer sends it.
func oneRecordBatch(value []byte) []byte {
	r := kmsg.Record{Value: value}
	body := r.AppendTo(nil)[1:] // without the zero Length varint
	recs := binary.AppendVarint(nil, int64(len(body)))
	recs = append(recs, body...)
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// rawProduce sends one batch to partition 0 with acks=all and returns the
// partition's error code and base offset.
func rawProduce(ctx context.Context, cl *kgo.Client, topic string, batch []byte) (int16, int64, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(0))
	if err != nil {
		return 0, -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, -1, fmt.Errorf("produce response has %d topics", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset, nil
}

// TestDiskFullThroughBinary runs tollgate on a small tmpfs, fills it, and
// checks that produces fail with KAFKA_STORAGE_ERROR, that no part of a
// failed batch is ever stored or served, and that produces succeed again,
// with dense offsets, once space returns. It needs mount(2) (root); it
// skips where that is not allowed.
func TestDiskFullThroughBinary(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	bin := tollgateBinary(t)
	dataDir := filepath.Join(mnt, "data")
	c, err := startTollgate(t, bin, dataDir, "127.0.0.1:0", "--fsync", "always")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.kill) // before the umount
	createTestTopic(t, c.addr, "full", 1)
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(0, 12) // topics by name (kgo raises raw requests to the max version)
	cl := testClient(t, c.addr, kgo.MaxVersions(vs))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Leave about 1 MiB free.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, free-1<<20), 0o644); err != nil {
		t.Fatalf("fill tmpfs: %v", err)
	}

	var acked []string
	var ackedBytes int64
	storageErrs := 0
	value := func(i int) []byte {
		v := make([]byte, 48<<10)
		copy(v, strconv.Itoa(i)+":")
		return v
	}
	for i := 0; storageErrs < 3; i++ {
		if i > 200 {
			t.Fatalf("produced %d batches of 48 KiB into 1 MiB without KAFKA_STORAGE_ERROR", i)
		}
		batch := oneRecordBatch(value(i))
		code, off, err := rawProduce(ctx, cl, "full", batch)
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		switch code {
		case 0:
			if storageErrs > 0 {
				t.Fatalf("produce %d succeeded after the disk filled and nothing was freed", i)
			}
			if off != int64(len(acked)) {
				t.Fatalf("produce %d: base offset %d, want %d", i, off, len(acked))
			}
			acked = append(acked, string(value(i)))
			ackedBytes += int64(len(batch))
		case kerr.KafkaStorageError.Code:
			storageErrs++
		default:
			t.Fatalf("produce %d: %v, want KAFKA_STORAGE_ERROR", i, kerr.ErrorForCode(code))
		}
	}
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged before the disk filled")
	}

	// No partial batch on disk or on the wire.
	seg := filepath.Join(dataDir, "full-0", fmt.Sprintf("%020d.log", 0))
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != ackedBytes {
		t.Errorf("segment is %d bytes; the acknowledged batches are %d", fi.Size(), ackedBytes)
	}
	got := readAll(t, c.addr, "full", 1)[0]
	if len(got) != len(acked) {
		t.Fatalf("log serves %d records, %d were acknowledged", len(got), len(acked))
	}
	for i, r := range got {
		if string(r.Value) != acked[i] {
			t.Fatalf("record %d differs from what was acknowledged", i)
		}
	}

	// Space returns: produces succeed and continue the offsets.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		code, off, err := rawProduce(ctx, cl, "full", oneRecordBatch([]byte("after-"+strconv.Itoa(i))))
		if err != nil || code != 0 {
			t.Fatalf("produce after freeing space: %v %v\n%s", err, kerr.ErrorForCode(code), c.output())
		}
		if want := int64(len(acked) + i); off != want {
			t.Fatalf("after freeing space: base offset %d, want %d", off, want)
		}
	}
	got = readAll(t, c.addr, "full", 1)[0]
	if len(got) != len(acked)+5 || string(got[len(acked)].Value) != "after-0" {
		t.Fatalf("after freeing space the log serves %d records, want %d", len(got), len(acked)+5)
	}
	t.Logf("%d batches acknowledged before the disk filled, then %d KAFKA_STORAGE_ERRORs, then 5 more after freeing space", len(acked), storageErrs)
	if err := c.stop(); err != nil {
		t.Errorf("clean stop: %v", err)
	}
}
