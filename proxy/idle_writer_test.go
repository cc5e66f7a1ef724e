package proxy_test

import (
	"encoding/binary"
	"io"
	"net"
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

// TestIdleWriterPokeInTheGap: a request the gateway answers itself
// (an Answerer's DescribeACLs) is queued while the write loop is between
// its empty queue and its wait on the upstream (the hook holds it there).
// The read loop's wake-up comes before the wait begins; the answer must
// still be written, not wait for bytes the upstream will never send.
func TestIdleWriterPokeInTheGap(t *testing.T) {
	c := startUpstream(t, 1, kfake.SeedTopics(1, "idle"))
	srv := startGateway(t, c, func(o *proxy.Options) { o.Answerer = &aclAnswerer{} })
	conn, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f := kmsg.NewRequestFormatter()
	readAnswer := func(what string) {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			t.Fatalf("%s: no answer: %v", what, err)
		}
		if _, err := io.ReadFull(conn, make([]byte, binary.BigEndian.Uint32(size[:]))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	if _, err := conn.Write(f.AppendRequest(nil, md, 1)); err != nil {
		t.Fatal(err)
	}
	readAnswer("Metadata (upstream)")
	// The write loop is idle, waiting on the upstream. From here on, its
	// next idle turn (after the second answer) enters the gap.
	inGap := make(chan struct{}, 16)
	proxy.SetIdleHookForTest(func() {
		select {
		case inGap <- struct{}{}:
		default:
		}
		time.Sleep(200 * time.Millisecond)
	})
	t.Cleanup(func() { proxy.SetIdleHookForTest(nil) })
	if _, err := conn.Write(f.AppendRequest(nil, md, 2)); err != nil {
		t.Fatal(err)
	}
	readAnswer("second Metadata (upstream)")
	select {
	case <-inGap:
	case <-time.After(10 * time.Second):
		t.Fatal("the write loop never went idle")
	}
	acl := kmsg.NewPtrDescribeACLsRequest()
	acl.SetVersion(1)
	acl.ResourceType, acl.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	acl.Operation, acl.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if _, err := conn.Write(f.AppendRequest(nil, acl, 3)); err != nil {
		t.Fatal(err)
	}
	readAnswer("DescribeACLs (answered by the gateway, queued in the gap)")
}
