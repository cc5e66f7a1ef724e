package proxy

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An error that says the leaders may be out of date marks the view
// stale without emptying it: other sessions keep routing on the leaders
// it knew until a whole-cluster Metadata answer replaces them, which also
// drops the topics it no longer lists.
func TestViewStaleKeepsLeaders(t *testing.T) {
	v := newClusterView(&Server{})
	v.leaders["kept"] = map[int32]int32{0: 1}
	v.leaders["deleted"] = map[int32]int32{0: 2}
	v.invalidate(true, nil)
	if n, ok := v.leader("kept", 0); !ok || n != 1 || !v.isStale() {
		t.Fatalf("after invalidate: leader %d (known %v), stale %v; want the old leader and stale", n, ok, v.isStale())
	}
	md := kmsg.NewPtrMetadataResponse()
	tp := kmsg.NewMetadataResponseTopic()
	tp.Topic = kmsg.StringPtr("kept")
	p := kmsg.NewMetadataResponseTopicPartition()
	p.Partition, p.Leader = 0, 2
	tp.Partitions = append(tp.Partitions, p)
	md.Topics = append(md.Topics, tp)
	v.learnMetadata(md)
	v.forgetTopicsNotIn(md)
	if n, _ := v.leader("kept", 0); n != 2 || v.isStale() {
		t.Errorf("after the refresh: leader %d, stale %v; want 2 and fresh", n, v.isStale())
	}
	if _, ok := v.leader("deleted", 0); ok {
		t.Error("a topic the whole-cluster answer no longer lists kept its leader")
	}
}

// A lookup waiting for the view's connection gives up at its own
// deadline, and one whose deadline passed while it waited sends nothing
// and leaves the connection up for the others.
func TestViewLookupWaitBounded(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	conn, err := net.Dial("tcp", c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	v := newClusterView(&Server{})
	v.conn = newBrokerConn(0, conn, "test")
	t.Cleanup(v.conn.close)

	v.rt <- struct{}{} // another lookup holds the connection
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := v.roundTrip(ctx, kmsg.NewPtrMetadataRequest())
		got <- err
	}()
	cancel()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a waiter whose context ended: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a waiter whose context ended still waits for the connection")
	}
	v.unlockRT()

	expired, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := v.lockRT(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := v.sendLocked(expired, kmsg.NewPtrMetadataRequest()); !errors.Is(err, context.Canceled) {
		t.Fatalf("send with an expired context: %v", err)
	}
	v.unlockRT()
	if v.conn.isFailed() {
		t.Fatal("a caller whose deadline had passed closed the shared connection")
	}
	if _, err := v.roundTrip(context.Background(), kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("the connection after: %v", err)
	}
}
