package proxy_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestIdleWriterResponseAlreadyThere: the write loop finds its queue
// empty, and the upstream's response arrives before it waits on the
// upstream (the hook holds it in that gap for 20 ms, far longer than
// kfake takes to answer). The response must still be written at once: a
// wait that forgot the readiness the poller saw before it would sit until
// the client gave up (sarama's 30 s read timeout, then a retried
// produce written twice, in one CI run).
func TestIdleWriterResponseAlreadyThere(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "idle"))
	srv := startGateway(t, c)
	proxy.SetIdleHookForTest(func() { time.Sleep(20 * time.Millisecond) })
	t.Cleanup(func() { proxy.SetIdleHookForTest(nil) })
	cl := newClient(t, srv, nil)
	ctx := ctxT(t, 30*time.Second)
	// One request in flight at a time, so nothing but the response
	// itself can wake the write loop.
	for i := range 10 {
		rctx := ctxT(t, 5*time.Second)
		req := kmsg.NewPtrMetadataRequest()
		topic := "idle"
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
		if _, err := req.RequestWith(rctx, cl); err != nil {
			t.Fatalf("request %d: %v (the response waited in the gateway)", i, err)
		}
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
}
