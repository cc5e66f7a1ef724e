//go:build linux

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// crashProducer is one producing client and what it was told.
type crashProducer struct {
	id         int
	idempotent bool
	cl         *kgo.Client

	mu     sync.Mutex
	acked  map[int]bool // seq -> acknowledged (true) or failed (false)
	sent   int          // seqs [0, sent) were handed to Produce
	errors map[string]int
	nAcked atomic.Int64
}

// TestCrashSafetyKill9 is the crash-safety harness: several
// producers (two idempotent, two not) produce with acks=all and
// fsync=always while the tollgate process is killed with SIGKILL at random
// moments and restarted on the same data directory, and a consumer reads
// along. Afterwards it checks, per partition:
//
//   - offsets are dense from 0 to the high watermark (the consumer sees
//     offset n+1 right after n);
//   - every record a producer saw acknowledged is in the log: exactly once
//     for idempotent producers (a retry of a batch that was written before
//     the crash must be recognised from the producer state storage rebuilt
//     from the log); at least once for non-idempotent producers, whose
//     retries of a written-but-unacknowledged batch legitimately duplicate
//     (counted and reported, not failed);
//   - per producer and partition, the first occurrences of its sequence
//     numbers appear in increasing order (idempotent: strictly, with no
//     repeats at all);
//   - the consumer reading during the crashes never saw offsets go
//     backwards or skip, and what it saw at each offset is what the final
//     log holds there (offsets are never reused for different data).
func TestCrashSafetyKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash harness runs the binary for ~30s")
	}
	const (
		topic      = "crash"
		partitions = 4
		cycles     = 24
	)
	bin := tollgateBinary(t)
	dir := t.TempDir()
	c, err := startTollgate(t, bin, dir, "127.0.0.1:0", "--fsync", "always")
	if err != nil {
		t.Fatal(err)
	}
	addr := c.addr
	cur := c
	defer func() { cur.kill() }()
	createTestTopic(t, addr, topic, partitions)

	// Producers. A short constant backoff keeps reconnects quick; the long
	// retry timeout keeps records from failing while the broker is down.
	prods := make([]*crashProducer, 4)
	for i := range prods {
		p := &crashProducer{id: i, idempotent: i < 2, acked: map[int]bool{}, errors: map[string]int{}}
		opts := []kgo.Opt{
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(2 * time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
			kgo.RetryTimeout(2 * time.Minute),
			kgo.MaxBufferedRecords(100),
			kgo.ProduceRequestTimeout(5 * time.Second),
			// kgo refreshes metadata after a broken connection, but at
			// most every MetadataMinAge (default 5 s).
			kgo.MetadataMinAge(50 * time.Millisecond),
		}
		if !p.idempotent {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		p.cl = testClient(t, addr, opts...)
		prods[i] = p
	}
	stopProducing := make(chan struct{})
	var prodWG sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, p := range prods {
		prodWG.Add(1)
		go func() {
			defer prodWG.Done()
			for seq := 0; ; seq++ {
				select {
				case <-stopProducing:
					return
				default:
				}
				p.mu.Lock()
				p.sent = seq + 1
				p.mu.Unlock()
				rec := &kgo.Record{Topic: topic, Partition: int32(seq % partitions), Value: []byte(fmt.Sprintf("%d:%d", p.id, seq))}
				p.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
					p.mu.Lock()
					p.acked[seq] = err == nil
					if err != nil {
						p.errors[err.Error()]++
					}
					p.mu.Unlock()
					if err == nil {
						p.nAcked.Add(1)
					}
				})
			}
		}()
	}

	// A consumer reading along from the start, across the crashes.
	seen := make([]map[int64]string, partitions)
	for i := range seen {
		seen[i] = map[int64]string{}
	}
	var consumeErrs []string
	var consumed atomic.Int64
	stopConsuming := make(chan struct{})
	consDone := make(chan struct{})
	cons := testClient(t, addr,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.MetadataMinAge(50*time.Millisecond),
	)
	go func() {
		defer close(consDone)
		next := make([]int64, partitions)
		for {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := cons.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != next[r.Partition] && len(consumeErrs) < 20 {
					consumeErrs = append(consumeErrs, fmt.Sprintf("partition %d: consumer saw offset %d after %d", r.Partition, r.Offset, next[r.Partition]-1))
				}
				next[r.Partition] = r.Offset + 1
				if old, ok := seen[r.Partition][r.Offset]; ok && old != string(r.Value) && len(consumeErrs) < 20 {
					consumeErrs = append(consumeErrs, fmt.Sprintf("partition %d offset %d: read %q, earlier %q", r.Partition, r.Offset, r.Value, old))
				}
				seen[r.Partition][r.Offset] = string(r.Value)
				consumed.Add(1)
			})
			select {
			case <-stopConsuming:
				return
			default:
			}
		}
	}()

	totalAcked := func() int64 {
		var n int64
		for _, p := range prods {
			n += p.nAcked.Load()
		}
		return n
	}
	// Kill cycles: wait for new acknowledgements (so the kill lands while
	// producers are busy; one cycle in five does not wait), then a random
	// extra moment, then SIGKILL.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	start := time.Now()
	for cycle := 0; cycle < cycles; cycle++ {
		base := totalAcked()
		want := base + int64(50+rng.IntN(400))
		if rng.IntN(5) == 0 {
			want = base // now and then, kill right after the restart
		}
		deadline := time.Now().Add(20 * time.Second)
		for totalAcked() < want {
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: no progress for 20s (acked %d)\nlogs:\n%s", cycle, totalAcked(), cur.output())
			}
			time.Sleep(2 * time.Millisecond)
		}
		waited := time.Since(deadline.Add(-20 * time.Second))
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		if testing.Verbose() {
			t.Logf("cycle %d: %d acknowledged after %v", cycle, totalAcked()-base, waited.Round(time.Millisecond))
		}
		cur.kill()
		cur = restartOn(t, bin, dir, addr, "--fsync", "always")
	}
	killPhase := time.Since(start)

	// Let everything in flight finish against the last incarnation.
	close(stopProducing)
	prodWG.Wait()
	for _, p := range prods {
		fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
		if err := p.cl.Flush(fctx); err != nil {
			t.Fatalf("producer %d flush: %v", p.id, err)
		}
		fcancel()
	}

	final := readAll(t, addr, topic, partitions)
	var hwTotal int64
	for _, recs := range final {
		hwTotal += int64(len(recs))
	}
	waitUntil := time.Now().Add(30 * time.Second)
	for consumed.Load() < hwTotal && time.Now().Before(waitUntil) {
		time.Sleep(5 * time.Millisecond)
	}
	close(stopConsuming)
	<-consDone
	if err := cur.stop(); err != nil {
		t.Errorf("clean stop: %v\n%s", err, cur.output())
	}

	// Dense offsets and what the reading-along consumer saw.
	type loc struct {
		part int32
		off  int64
	}
	where := make([]map[int][]loc, len(prods)) // producer -> seq -> locations
	for i := range where {
		where[i] = map[int][]loc{}
	}
	for p, recs := range final {
		for i, r := range recs {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d: record %d has offset %d: offsets are not dense", p, i, r.Offset)
			}
			if old, ok := seen[p][r.Offset]; ok && old != string(r.Value) {
				t.Errorf("partition %d offset %d: consumer saw %q during the crashes, the log now holds %q", p, r.Offset, old, r.Value)
			}
			pid, seq, ok := parseCrashValue(string(r.Value))
			if !ok || pid >= len(prods) {
				t.Fatalf("partition %d offset %d: unexpected value %q", p, r.Offset, r.Value)
			}
			if want := int32(seq % partitions); want != int32(p) {
				t.Errorf("partition %d offset %d: %q belongs to partition %d", p, r.Offset, r.Value, want)
			}
			where[pid][seq] = append(where[pid][seq], loc{int32(p), r.Offset})
		}
	}
	for _, e := range consumeErrs {
		t.Error(e)
	}
	if consumed.Load() < hwTotal {
		t.Errorf("the reading-along consumer got %d of %d records", consumed.Load(), hwTotal)
	}

	var totalAck, totalFailed, totalDup, totalLost int
	for _, p := range prods {
		p.mu.Lock()
		ackedN, failed, dups, lost, unackedPresent := 0, 0, 0, 0, 0
		for seq := 0; seq < p.sent; seq++ {
			ok, done := p.acked[seq]
			locs := where[p.id][seq]
			switch {
			case done && ok:
				ackedN++
				if len(locs) == 0 {
					lost++
					if lost <= 5 {
						t.Errorf("producer %d: acknowledged record seq %d (partition %d) is missing", p.id, seq, seq%partitions)
					}
				}
			case done:
				failed++
				if len(locs) > 0 {
					unackedPresent++
				}
			}
			if len(locs) > 1 {
				dups += len(locs) - 1
				if p.idempotent && dups <= 5 {
					t.Errorf("idempotent producer %d: seq %d is in the log %d times: %v", p.id, seq, len(locs), locs)
				}
			}
		}
		// Order: per partition, first occurrences in sequence order.
		for part := int32(0); part < partitions; part++ {
			lastSeq, lastOff := -1, int64(-1)
			for _, r := range final[part] {
				pid, seq, _ := parseCrashValue(string(r.Value))
				if pid != p.id {
					continue
				}
				first := where[pid][seq][0].off == r.Offset
				switch {
				case seq > lastSeq:
					lastSeq, lastOff = seq, r.Offset
				case p.idempotent || first:
					t.Errorf("producer %d partition %d: seq %d at offset %d after seq %d at offset %d: order broken", p.id, part, seq, r.Offset, lastSeq, lastOff)
				}
			}
		}
		t.Logf("producer %d (idempotent=%v): sent %d, acknowledged %d, failed %d (of which in the log: %d), duplicates %d, lost %d, errors %v",
			p.id, p.idempotent, p.sent, ackedN, failed, unackedPresent, dups, lost, p.errors)
		totalAck += ackedN
		totalFailed += failed
		totalDup += dups
		totalLost += lost
		p.mu.Unlock()
	}
	t.Logf("%d SIGKILL cycles in %v; %d records in the log, %d acknowledged, %d failed, %d duplicates (non-idempotent retries), %d lost",
		cycles, killPhase.Round(time.Millisecond), hwTotal, totalAck, totalFailed, totalDup, totalLost)
	if totalAck == 0 {
		t.Fatal("no record was acknowledged")
	}
}

func parseCrashValue(v string) (pid, seq int, ok bool) {
	a, b, found := strings.Cut(v, ":")
	if !found {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(a)
	seq, err2 := strconv.Atoi(b)
	return pid, seq, err1 == nil && err2 == nil
}
