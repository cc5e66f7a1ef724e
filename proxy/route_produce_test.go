package proxy_test

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestSinglePortAcksZeroMalformedCounted: a single-port acks=0 Produce
// whose body does not decode (truncated after its acks) closes the
// connection, as Kafka closes it on an acks=0 failure, and is still
// counted in tollgate_requests_total (outcome no_response) like every
// other acks=0 Produce.
func TestSinglePortAcksZeroMalformedCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, srv, _ := startSinglePort(t, "azm", 3, func(o *proxy.Options) { o.Hooks = metrics.New(reg) })
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 0, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "azm"
	rt.Partitions = append(rt.Partitions, kmsg.NewProduceRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)
	frame = frame[:len(frame)-6] // the topic's partition and tags cut off
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	c, err := net.Dial("tcp", srv.Addr(0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(c, 10*time.Second) {
		t.Fatal("a malformed acks=0 produce did not close the connection")
	}
	ctx := ctxT(t, 10*time.Second)
	want := map[string]string{"api": metrics.APILabel(int16(kmsg.Produce)), "outcome": "no_response"}
	waitFor(t, ctx, "the acks=0 produce to be counted", func() bool {
		return counterValue(t, reg, "tollgate_requests_total", want) == 1
	})
}
