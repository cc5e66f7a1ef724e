package proxy_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSinglePortFetchHeldParts: an incremental Fetch over three brokers
// is answered with the parts that are in while a slow broker's part is
// still out; that part's answer is held and answers the next Fetch,
// which asks the slow broker nothing new. When the client instead moves
// the slow broker's partition (a seek), the held answer is dropped and
// that broker gets a full request for the new offset.
func TestSinglePortFetchHeldParts(t *testing.T) {
	const topic, parts = "held", 3
	c, srv, scan := startSinglePort(t, topic, parts) // partition p led by node p
	ctx := ctxT(t, 60*time.Second)

	// A tap on the brokers' Fetches that can hold one broker's
	// incremental requests until released.
	type seen struct {
		node         int32
		epoch, parts int32
	}
	var (
		mu      sync.Mutex
		log     []seen
		slow    int32 = -1
		release chan struct{}
	)
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.FetchRequest)
		n := c.CurrentNode()
		s := seen{node: n, epoch: r.SessionEpoch}
		for _, tp := range r.Topics {
			s.parts += int32(len(tp.Partitions))
		}
		mu.Lock()
		log = append(log, s)
		hold := n == slow && r.SessionEpoch > 0
		ch := release
		mu.Unlock()
		if hold {
			c.SleepControl(func() { <-ch })
		}
		return nil, nil, false
	})
	slowDown := func(node int32) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		slow, release = node, make(chan struct{})
		return release
	}
	requestsTo := func(node int32) (all []seen) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range log {
			if s.node == node {
				all = append(all, s)
			}
		}
		return all
	}

	prod := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(n int) {
		t.Helper()
		for p := range int32(parts) {
			for i := range n {
				if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	produce(3)

	raw := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	_, id := topicID(t, ctx, raw, topic)
	// fetch sends one Fetch of the session on one connection and
	// returns, per partition listed, the first offset of its records
	// (-1: none) and its high watermark.
	type listed struct{ first, hwm int64 }
	fetch := func(ctx context.Context, sid, epoch int32, offsets map[int32]int64) (*kmsg.FetchResponse, map[int32]listed) {
		t.Helper()
		r := sessionFetch(topic, id, parts, 200, sid, epoch, offsets)
		kr, err := raw.Broker(testVirtual).Request(ctx, r)
		if err != nil {
			t.Fatalf("fetch epoch %d: %v", epoch, err)
		}
		resp := kr.(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch epoch %d: error %d", epoch, resp.ErrorCode)
		}
		got := map[int32]listed{}
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				l := listed{first: -1, hwm: p.HighWatermark}
				if len(p.RecordBatches) >= 8 {
					l.first = int64(binary.BigEndian.Uint64(p.RecordBatches))
				}
				got[p.Partition] = l
			}
		}
		return resp, got
	}

	full, got := fetch(ctx, 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0})
	if len(got) != 3 {
		t.Fatalf("full fetch listed %v, want all 3 partitions", got)
	}
	sid, epoch := full.SessionID, int32(1)
	// The client side of the session: each answer's records move a
	// partition to its high watermark, sent with the next Fetch.
	pos := map[int32]int64{0: 3, 1: 3, 2: 3}
	advance := map[int32]int64{0: 3, 1: 3, 2: 3}
	step := func(ctx context.Context) map[int32]listed {
		t.Helper()
		_, got := fetch(ctx, sid, epoch, advance)
		epoch++
		advance = map[int32]int64{}
		for p, l := range got {
			if l.first < 0 {
				continue
			}
			if l.first != pos[p] {
				t.Errorf("partition %d answered from offset %d, want %d", p, l.first, pos[p])
			}
			pos[p], advance[p] = l.hwm, l.hwm
		}
		return got
	}
	// until steps until partition p's records up to offset off are in.
	until := func(p int32, off int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for pos[p] < off {
			step(ctx)
			if time.Now().After(deadline) {
				t.Fatalf("partition %d is at offset %d, not %d", p, pos[p], off)
			}
		}
	}

	// Node 2 is slow: the answer comes without it, long before it wakes.
	produce(3)
	wake := slowDown(2)
	quick, cancel := context.WithTimeout(ctx, 10*time.Second)
	got = step(quick)
	cancel()
	if _, ok := got[2]; ok || len(got) == 0 {
		t.Errorf("with node 2 asleep: partitions %v answered, want some of 0 and 1 only", got)
	}
	before := len(requestsTo(2))
	close(wake)
	// The next Fetches do not change partition 2: node 2's held answer
	// (from offset 3) answers one of them, and node 2 is not asked again
	// in between.
	until(2, 6)
	if n := len(requestsTo(2)); n != before {
		t.Errorf("node 2 was sent %d more Fetches while its part was held, want none", n-before)
	}
	until(0, 6)
	until(1, 6)

	// A seek on the slow broker's partition while its part is held: the
	// held answer is dropped and node 2 gets a full request (epoch 0)
	// from the new offset. New records on partitions 0 and 1 only, so
	// the Fetch before the seek is answered without node 2's part.
	wake = slowDown(2)
	for p := range int32(2) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("more")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if got := step(ctx); len(got) == 0 {
		t.Error("the Fetch after new records on partitions 0 and 1 listed nothing")
	} else if _, ok := got[2]; ok {
		t.Errorf("partition 2 (nothing new, node 2 slow) was listed: %v", got)
	}
	close(wake) // the full request queues behind node 2's sleeping one, if any
	mark := len(requestsTo(2))
	pos[2], advance[2] = 0, 0
	until(2, 6)
	fulls := 0
	for _, s := range requestsTo(2)[mark:] {
		if s.epoch == 0 {
			fulls++
		}
	}
	if fulls != 1 {
		t.Errorf("node 2 after the seek: %+v, want one full request", requestsTo(2)[mark:])
	}
	scan.assertClean(t)
}
