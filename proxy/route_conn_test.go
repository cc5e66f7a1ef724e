package proxy

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialBrokerConn is a brokerConn to c's first broker.
func dialBrokerConn(t *testing.T, c *kfake.Cluster) *brokerConn {
	t.Helper()
	conn, err := net.Dial("tcp", c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	bc := newBrokerConn(0, conn, "test")
	t.Cleanup(bc.close)
	return bc
}

// callAndWait sends req on bc and waits for its answer.
func callAndWait(t *testing.T, bc *brokerConn, req kmsg.Request) (kmsg.Response, error) {
	t.Helper()
	done := make(chan struct{})
	call := &partCall{node: 0, req: req}
	call.done = func() { close(done) }
	if queued, err := bc.send(call, true); !queued {
		t.Fatalf("send: not queued: %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer in 10s: the reader missed the broker's bytes")
	}
	return call.resp, call.err
}

// The reader waits for the broker's bytes, not for the queue, when no
// call is queued (nextCall): one call at a time, each answered at once,
// exercises the window between the empty queue and the wait, where an
// answer that came in before the wait must still end it.
func TestBrokerConnAnswersOneAtATime(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The reader pauses between its look at the empty queue and its wait,
	// so the answer is in before the wait starts.
	pause := func() { time.Sleep(2 * time.Millisecond) }
	answerWaitHook.Store(&pause)
	t.Cleanup(func() { answerWaitHook.Store(nil) })
	bc := dialBrokerConn(t, c)
	for i := range 200 {
		req := kmsg.NewPtrApiVersionsRequest()
		resp, err := callAndWait(t, bc, req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(resp.(*kmsg.ApiVersionsResponse).ApiKeys) == 0 {
			t.Fatalf("call %d: an ApiVersions answer with no keys", i)
		}
	}
}
