//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceOneByOne produces n records to partition 0 of topic, one batch
// each (ProduceSync waits for each), values prefix0..prefix(n-1).
func produceOneByOne(t *testing.T, addr, topic, prefix string, n int) {
	t.Helper()
	cl := testClient(t, addr, kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte(prefix + strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %s%d: %v", prefix, i, err)
		}
	}
	cl.Close()
}

// batchBounds returns the start positions of the batches of a segment file
// (walking the Length fields, bytes 8-11 of each batch).
func batchBounds(t *testing.T, b []byte) []int {
	t.Helper()
	var starts []int
	for pos := 0; pos+12 <= len(b); {
		starts = append(starts, pos)
		pos += 12 + int(binary.BigEndian.Uint32(b[pos+8:]))
	}
	return starts
}

// TestTornTailRecoveredByBinary damages the end of a partition's segment
// after a SIGKILL, the way a crash mid-write or a bad sector does, and
// checks that the real binary starts, keeps every record before the
// damage, drops the damaged batch and everything after it, and appends new
// records at the damage point with dense offsets.
func TestTornTailRecoveredByBinary(t *testing.T) {
	const n = 60
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, starts []int, data []byte) int // returns records kept
	}{
		{"truncated mid-batch", func(t *testing.T, path string, starts []int, data []byte) int {
			last := starts[len(starts)-1]
			if err := os.Truncate(path, int64(last+(len(data)-last)/2)); err != nil {
				t.Fatal(err)
			}
			return len(starts) - 1
		}},
		{"bytes flipped", func(t *testing.T, path string, starts []int, data []byte) int {
			// Recovery trusts what its checkpoint covers (written at the
			// first flush; the next is due 5 s later), so damage a batch
			// near the end, past it: as a torn write would be.
			k := len(starts) - 10
			end := len(data)
			if k+1 < len(starts) {
				end = starts[k+1]
			}
			for i := end - 6; i < end-2; i++ { // inside the last record's value
				data[i] ^= 0xff
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			return k
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := tollgateBinary(t)
			dir := t.TempDir()
			c, err := startTollgate(t, bin, dir, "127.0.0.1:0", "--fsync", "always")
			if err != nil {
				t.Fatal(err)
			}
			createTestTopic(t, c.addr, "torn", 1)
			produceOneByOne(t, c.addr, "torn", "a", n)
			c.kill()

			path := filepath.Join(dir, "torn-0", fmt.Sprintf("%020d.log", 0))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			starts := batchBounds(t, data)
			if len(starts) != n {
				t.Fatalf("segment holds %d batches, want %d", len(starts), n)
			}
			kept := tc.damage(t, path, starts, data)

			c, err = startTollgate(t, bin, dir, "127.0.0.1:0", "--fsync", "always")
			if err != nil {
				t.Fatalf("restart after damage: %v", err)
			}
			defer c.kill()
			got := readAll(t, c.addr, "torn", 1)[0]
			if len(got) != kept {
				t.Fatalf("after recovery the log holds %d records, want the %d before the damage\n%s", len(got), kept, c.output())
			}
			for i, r := range got {
				if want := "a" + strconv.Itoa(i); string(r.Value) != want || r.Offset != int64(i) {
					t.Fatalf("record %d: offset %d value %q, want offset %d value %q", i, r.Offset, r.Value, i, want)
				}
			}
			if !strings.Contains(c.output(), "truncating torn or corrupt log tail") {
				t.Errorf("recovery did not log the truncation:\n%s", c.output())
			}
			produceOneByOne(t, c.addr, "torn", "b", 5)
			got = readAll(t, c.addr, "torn", 1)[0]
			if len(got) != kept+5 {
				t.Fatalf("after new produces the log holds %d records, want %d", len(got), kept+5)
			}
			for i, r := range got[kept:] {
				if want := "b" + strconv.Itoa(i); string(r.Value) != want || r.Offset != int64(kept+i) {
					t.Fatalf("new record %d: offset %d value %q, want offset %d value %q", i, r.Offset, r.Value, kept+i, want)
				}
			}
			if err := c.stop(); err != nil {
				t.Errorf("clean stop: %v", err)
			}
		})
	}
}

// TestDataDirHeldByAnotherProcess starts a second tollgate on a data
// directory a running one holds: it must exit non-zero at once, naming the
// directory and the holder, and the first must keep serving.
func TestDataDirHeldByAnotherProcess(t *testing.T) {
	bin := tollgateBinary(t)
	dir := t.TempDir()
	first, err := startTollgate(t, bin, dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer first.kill()
	second, err := startTollgate(t, bin, dir, "127.0.0.1:0")
	if err == nil {
		second.kill()
		t.Fatal("a second tollgate started on a data directory that is in use")
	}
	<-second.exited
	code := second.cmd.ProcessState.ExitCode()
	if code == 0 {
		t.Errorf("second tollgate exited 0")
	}
	out := second.output()
	pid := strconv.Itoa(first.cmd.Process.Pid)
	if !strings.Contains(out, "is in use") || !strings.Contains(out, dir) || !strings.Contains(out, "pid "+pid) {
		t.Errorf("second tollgate's message does not name the directory and holder pid %s:\n%s", pid, out)
	}
	createTestTopic(t, first.addr, "still-serving", 1)
	produceOneByOne(t, first.addr, "still-serving", "v", 1)
}
