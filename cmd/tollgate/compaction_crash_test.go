package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactionSurvivesKill9: an idempotent producer overwrites 40 keys
// of a compacted topic (4 KiB segments, the cleaner looking for work every
// 10 ms) while the binary (fsync always) is killed with SIGKILL, three
// times. After each restart every key reads back at least its last
// acknowledged value, at or after the acknowledged offset, versions only
// increase along the log.
func TestCompactionSurvivesKill9(t *testing.T) {
	bin := tollgateBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "tollgate.yaml")
	if err := os.WriteFile(cfg, []byte("broker:\n  cleaner_backoff: 10ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--fsync", "always", "--config", cfg}
	c, err := startTollgate(t, bin, dir, "127.0.0.1:0", args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stop() }) // the child running at the end (c is reassigned)
	addr := c.addr
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(testClient(t, addr))
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"), "segment.bytes": kadm.StringPtr("4096"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
	}, "table")
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	acked := map[string]ackedWrite{} // key -> last acknowledged write
	version, midClean := 0, 0
	for cycle := 0; cycle < 3; cycle++ {
		version = produceUntilKill(t, ctx, c, addr, acked, version)
		// Did the kill catch a cleaning in the act? (The storage tests
		// kill at every swap stage deterministically; this is the real
		// process under load.)
		if left, _ := filepath.Glob(filepath.Join(dir, "*", "*.cleaned")); len(left) > 0 {
			midClean++
		}
		c = restartOn(t, bin, dir, addr, args...)
		checkCompactedAfterKill(t, ctx, addr, acked)
	}
	t.Logf("%d of 3 kills interrupted a cleaning", midClean)
}

type ackedWrite struct {
	offset  int64
	version int
}

// produceUntilKill overwrites keys until at least one cleaning has
// finished and 1500 more writes are acknowledged, then kills the binary
// with writes in flight. It returns the next version number.
func produceUntilKill(t *testing.T, ctx context.Context, c *child, addr string, acked map[string]ackedWrite, version int) int {
	t.Helper()
	prod := testClient(t, addr, kgo.DefaultProduceTopic("table"), kgo.RecordRetries(0))
	var mu sync.Mutex
	n := 0
	cleaned := func() int { return strings.Count(c.output(), "log cleaned") }
	start := cleaned()
	acks := func() int { mu.Lock(); defer mu.Unlock(); return n }
	for acks() < 1500 || cleaned() == start {
		if ctx.Err() != nil {
			t.Fatalf("%d writes acknowledged, %d cleanings, before the deadline", acks(), cleaned()-start)
		}
		key := fmt.Sprintf("key-%02d", version%40)
		v := version
		version++
		prod.Produce(ctx, &kgo.Record{Key: []byte(key), Value: []byte(strconv.Itoa(v))}, func(r *kgo.Record, err error) {
			if err != nil {
				return // in flight at the kill, or refused: not acknowledged
			}
			mu.Lock()
			defer mu.Unlock()
			if a, ok := acked[key]; !ok || a.version < v {
				acked[key] = ackedWrite{offset: r.Offset, version: v}
			}
			n++
		})
		if version%200 == 0 {
			prod.Flush(ctx)
		}
	}
	c.kill()
	// Close fails what is still buffered; wait for it, so every promise
	// has run before acked is read.
	closed := make(chan struct{})
	go func() { prod.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("the producer did not close after the kill")
	}
	mu.Lock()
	defer mu.Unlock()
	return version
}

// checkCompactedAfterKill reads the topic from the start and checks every
// acknowledged key.
func checkCompactedAfterKill(t *testing.T, ctx context.Context, addr string, acked map[string]ackedWrite) {
	t.Helper()
	ends, err := kadm.NewClient(testClient(t, addr)).ListEndOffsets(ctx, "table")
	if err != nil {
		t.Fatal(err)
	}
	end := ends["table"][0].Offset
	cl := testClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"table": {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxWait(100*time.Millisecond))
	latest := map[string]ackedWrite{}
	last := int64(-1)
	for last < end-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read to offset %d of %d", last, end)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		for _, r := range fs.Records() {
			v, _ := strconv.Atoi(string(r.Value))
			if p, ok := latest[string(r.Key)]; ok && p.version >= v {
				t.Fatalf("key %s: version %d at %d after version %d", r.Key, v, r.Offset, p.version)
			}
			latest[string(r.Key)] = ackedWrite{offset: r.Offset, version: v}
			last = r.Offset
		}
	}
	for k, a := range acked {
		g, ok := latest[k]
		if !ok || g.version < a.version || g.offset < a.offset {
			t.Fatalf("key %s: acknowledged version %d at %d, read %+v (present %v)", k, a.version, a.offset, g, ok)
		}
	}
}
