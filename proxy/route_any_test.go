package proxy_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/metrics"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestSinglePortBrokerConfigs: a broker config resource naming the
// virtual node is described from whichever upstream broker answers (each
// refuses an id other than its own, so the gateway renames it both ways),
// and an alter of it is refused with the reason while the rest of the
// same request applies.
func TestSinglePortBrokerConfigs(t *testing.T) {
	const topic = "bc"
	c, srv, scan := startSinglePort(t, topic, 3)
	ctx := ctxT(t, 60*time.Second)
	nodes := countNodes(c, kmsg.DescribeConfigs)
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	adm := kadm.NewClient(cl)
	for i := range 6 { // round robin: every broker answers one of them
		rcs, err := adm.DescribeBrokerConfigs(ctx, testVirtual)
		if err != nil {
			t.Fatalf("describe %d: %v", i, err)
		}
		rc, err := rcs.On(strconv.Itoa(testVirtual), nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe %d: the virtual broker's configs: %v / %v (%+v)", i, err, rc.Err, rcs)
		}
		if len(rc.Configs) == 0 {
			t.Fatalf("describe %d: no configs for the virtual broker", i)
		}
		if !hasConfig(rc.Configs, "broker.id", strconv.Itoa(testVirtual)) {
			t.Errorf("describe %d: broker.id is not the virtual node's: %+v", i, rc.Configs)
		}
	}
	nodes.assertAll(t, 3)

	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
		key  string
	}{{kmsg.ConfigResourceTypeBroker, strconv.Itoa(testVirtual), "log.retention.ms"}, {kmsg.ConfigResourceTypeTopic, topic, "retention.ms"}} {
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = r.typ, r.name
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = r.key, kmsg.StringPtr("3600000")
		res.Configs = append(res.Configs, cfg)
		req.Resources = append(req.Resources, res)
	}
	raw, err := cl.Broker(testVirtual).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]kmsg.IncrementalAlterConfigsResponseResource{}
	for _, r := range raw.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		got[r.ResourceName] = r
	}
	if b, ok := got[strconv.Itoa(testVirtual)]; !ok || !errors.Is(kerr.ErrorForCode(b.ErrorCode), kerr.InvalidRequest) ||
		b.ErrorMessage == nil || !strings.Contains(*b.ErrorMessage, "cluster-wide default") {
		t.Errorf("altering the virtual broker: %+v (present %v), want INVALID_REQUEST with the reason", b, ok)
	}
	if tp, ok := got[topic]; !ok || tp.ErrorCode != 0 {
		t.Errorf("the topic alter in the same request: %+v (present %v), want it applied", tp, ok)
	}
	trc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := trc.On(topic, nil); err != nil || !hasConfig(v.Configs, "retention.ms", "3600000") {
		t.Errorf("topic retention.ms after the alter: %+v, %v", v, err)
	}
	scan.assertClean(t)
}

func hasConfig(cs []kadm.Config, name, value string) bool {
	for _, c := range cs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

// TestSinglePortOffersNoPerBrokerAdmin: the keys that name replicas, log
// directories or controller voters by broker id are not offered; the
// ones this test needs are.
func TestSinglePortOffersNoPerBrokerAdmin(t *testing.T) {
	_, srv, _ := startSinglePort(t, "nb", 1)
	ctx := ctxT(t, 30*time.Second)
	vs, err := kadm.NewClient(newClient(t, srv, nil)).ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v := vs[testVirtual]
	for _, k := range []kmsg.Key{kmsg.AlterReplicaLogDirs, kmsg.AlterPartitionAssignments, kmsg.DescribeQuorum} {
		if _, ok := v.KeyMaxVersion(int16(k)); ok {
			t.Errorf("single-port offers %s", k.Name())
		}
	}
	for _, k := range []kmsg.Key{kmsg.DescribeConfigs, kmsg.IncrementalAlterConfigs, kmsg.GetTelemetrySubscriptions, kmsg.ListPartitionReassignments} {
		if _, ok := v.KeyMaxVersion(int16(k)); !ok {
			t.Errorf("single-port does not offer %s", k.Name())
		}
	}
}

// TestSinglePortTelemetrySticky: a broker knows only the KIP-714
// subscriptions it handed out, so one client connection's telemetry
// requests all reach one upstream broker while other requests rotate.
func TestSinglePortTelemetrySticky(t *testing.T) {
	c, srv, scan := startSinglePort(t, "tel", 3)
	ctx := ctxT(t, 30*time.Second)
	nodes := countNodes(c, kmsg.GetTelemetrySubscriptions, kmsg.DescribeConfigs)
	cl := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	b := cl.Broker(testVirtual)
	for i := range 6 {
		if _, err := b.Request(ctx, kmsg.NewPtrGetTelemetrySubscriptionsRequest()); err != nil {
			t.Fatalf("telemetry %d: %v", i, err)
		}
		dc := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(testVirtual)
		dc.Resources = append(dc.Resources, res)
		if _, err := b.Request(ctx, dc); err != nil {
			t.Fatalf("describe %d: %v", i, err)
		}
	}
	nodes.mu.Lock()
	tel, other := nodes.seen[int16(kmsg.GetTelemetrySubscriptions)], nodes.seen[int16(kmsg.DescribeConfigs)]
	nodes.mu.Unlock()
	if len(tel) != 1 {
		t.Errorf("telemetry reached brokers %v, want one", tel)
	}
	if len(other) < 2 {
		t.Errorf("DescribeConfigs reached brokers %v: the control (rotation) did not rotate", other)
	}
	scan.assertClean(t)
}

// TestSinglePortEventsCounted: a routing event a client can cause at
// will (here: more share sessions on one connection than the gateway
// keeps) is answered as a broker would and counted in
// tollgate_single_port_events_total.
func TestSinglePortEventsCounted(t *testing.T) {
	const topic = "ev"
	reg := prometheus.NewRegistry()
	_, srv, _ := startSinglePort(t, topic, 3, func(o *proxy.Options) { o.Hooks = metrics.New(reg) })
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, srv, nil)
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	b, g := cl.Broker(testVirtual), "ev-group"
	open := func(member string) int16 {
		r := kmsg.NewPtrShareFetchRequest()
		r.GroupID, r.MemberID, r.MaxWaitMillis, r.MaxBytes, r.MaxRecords, r.BatchSize = &g, &member, 1, 1<<20, 10, 10
		tp := kmsg.NewShareFetchRequestTopic()
		tp.TopicID = md.Topics[topic].ID
		tp.Partitions = append(tp.Partitions, kmsg.NewShareFetchRequestTopicPartition())
		r.Topics = append(r.Topics, tp)
		resp, err := r.RequestWith(ctx, b)
		if err != nil {
			t.Fatalf("share fetch of %s: %v", member, err)
		}
		return resp.ErrorCode
	}
	refused := 0
	for i := range 20 {
		if code := open(fmt.Sprintf("member-%d", i)); code == kerr.ShareSessionLimitReached.Code {
			refused++
		} else if code != 0 {
			t.Fatalf("session %d: %v", i, kerr.ErrorForCode(code))
		}
	}
	if refused == 0 {
		t.Fatal("20 share sessions on one connection were all kept")
	}
	if got := counterValue(t, reg, "tollgate_single_port_events_total", map[string]string{"event": "share_session_limit"}); got != float64(refused) {
		t.Errorf("share_session_limit counted %v, refused %d", got, refused)
	}
}

// TestSinglePortControllerKeys: topic admin goes to the controller the
// latest Metadata named (kfake, like a ZooKeeper-era cluster, answers
// NOT_CONTROLLER from any other broker), so every request succeeds the
// first time instead of after retries that happen to hit it.
func TestSinglePortControllerKeys(t *testing.T) {
	c, srv, scan := startSinglePort(t, "ck", 3)
	ctx := ctxT(t, 30*time.Second)
	nodes := countNodes(c, kmsg.CreateTopics, kmsg.CreatePartitions, kmsg.DeleteTopics)
	adm := kadm.NewClient(newClient(t, srv, nil, kgo.Dialer(scan.dial)))
	for i := range 4 {
		topic := fmt.Sprintf("ck-%d", i)
		if r, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, r.Err)
		}
		if r, err := adm.CreatePartitions(ctx, 1, topic); err != nil || r.Error() != nil {
			t.Fatalf("add a partition to %s: %v %v", topic, err, r.Error())
		}
		if r, err := adm.DeleteTopic(ctx, topic); err != nil || r.Err != nil {
			t.Fatalf("delete %s: %v %v", topic, err, r.Err)
		}
	}
	nodes.mu.Lock()
	defer nodes.mu.Unlock()
	for _, k := range []kmsg.Key{kmsg.CreateTopics, kmsg.CreatePartitions, kmsg.DeleteTopics} {
		if seen := nodes.seen[int16(k)]; len(seen) != 1 || seen[2] != 4 {
			t.Errorf("%s reached %v, want only the controller (node 2), 4 times", k.Name(), seen)
		}
	}
	scan.assertClean(t)
}
