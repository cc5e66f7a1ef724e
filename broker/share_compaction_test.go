package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareOverCompactedTopic: a share group reads a cleaned compacted
// topic (gaps between and inside batches): it gets exactly what a plain
// consumer reads, each record once, and its start offset reaches the end
// (the holes are acknowledged as gaps by the client, or were never
// acquired).
func TestShareOverCompactedTopic(t *testing.T) {
	b, srv := newBroker(t, manualCleaner)
	compactedTopic(t, srv.addr(), "cq", nil)
	cl := newClient(t, srv.addr(), kgo.ProducerLinger(0))
	want := produceHistory(t, cl, "cq", 15, 8, map[int]bool{4: true})
	fill(t, cl, "cq", 30)
	if n := b.cleanAll(time.Now(), false); n != 1 {
		t.Fatalf("cleaner cleaned %d partitions, want 1", n)
	}
	plain := readToEnd(t, srv.addr(), "cq", 0)
	checkLatest(t, plain, want, false)
	admin := newClient(t, srv.addr())
	setGroupConfigs(t, admin, "cg-share", "share.auto.offset.reset", "earliest")
	sc := shareConsumer(t, srv.addr(), "cg-share", "cq")
	ctx := testCtx(t)
	seen := map[int64]int{}
	for len(seen) < len(plain) {
		for _, r := range sc.PollRecords(ctx, 0).Records() {
			seen[r.Offset]++
		}
		if ctx.Err() != nil {
			t.Fatalf("share consumer read %d of %d records", len(seen), len(plain))
		}
	}
	for _, r := range plain {
		if seen[r.Offset] != 1 {
			t.Fatalf("offset %d delivered %d times to the share group", r.Offset, seen[r.Offset])
		}
	}
	sc.MarkAcks(kgo.AckAccept)
	if err := sc.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	end := plain[len(plain)-1].Offset + 1
	for {
		if start, lag := shareStart(t, admin, "cg-share", "cq"); start == end && lag == 0 {
			break
		}
		if ctx.Err() != nil {
			start, lag := shareStart(t, admin, "cg-share", "cq")
			t.Fatalf("share start %d lag %d, want %d and 0", start, lag, end)
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		sc.PollRecords(pctx, 0) // lets the client send gap acknowledgements
		cancel()
	}
}
