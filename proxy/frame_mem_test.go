package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestLargeFramesReleasedOnUpstreamFailure: Produce frames read whole
// (a topic rule judges them decoded) and mapped outside the heap
// are all released, also those whose upstream connection broke before
// the answer (the write loop fails on them before accounting them). A
// heap frame left unreleased is collected; a mapped one would be lost
// for good, so the test counts mapped frames still out once the
// gateway stopped. It failed when the write loop released a frame only
// on success.
func TestLargeFramesReleasedOnUpstreamFailure(t *testing.T) {
	mapped, restore := proxy.FramesOffHeapForTest()
	t.Cleanup(restore)
	out := proxy.MappedFramesOutForTest()
	t.Cleanup(func() { // runs after the gateway's shutdown (registered later)
		deadline := time.Now().Add(10 * time.Second)
		for {
			now := proxy.MappedFramesOutForTest()
			if now == out {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d mapped request frames never released", now-out)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	before := mapped()

	const topic = "frames"
	c := startUpstream(t, 1, kfake.SeedTopics(1, topic))
	var dropped atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if dropped.Add(1) > 3 {
			return nil, nil, false
		}
		c.KeepControl()
		return nil, errors.New("test: upstream drops the connection"), true
	})
	srv := startGateway(t, c)
	// A topic rule needs the Produce decoded: its frame is read whole.
	setPolicy(t, srv, "policy:\n  rules:\n    - name: no-forbidden\n      match: { topic: forbidden, api: [Produce] }\n      action: deny\n")
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(0).String()), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(50*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Value: bytes.Repeat([]byte{byte(i)}, 100<<10)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce through the dropped connections: %v", err)
	}
	if n := dropped.Load(); n <= 3 {
		t.Fatalf("the upstream dropped %d Produce connections, want 3 and then answers", n)
	}
	if !proxy.MapsFramesForTest {
		t.Skip("this platform maps no frames")
	}
	if mapped() == before {
		t.Error("no request frame was mapped: the test did not reach the mapped path")
	}
}
