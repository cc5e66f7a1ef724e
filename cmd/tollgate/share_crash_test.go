package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareGroupSurvivesKill9: a share consumer accepts records while the
// binary (fsync always) is killed with SIGKILL. After the restart no record
// whose acknowledgement the broker confirmed is delivered again, and every
// other record is delivered (at-least-once).
func TestShareGroupSurvivesKill9(t *testing.T) {
	bin := tollgateBinary(t)
	dir := t.TempDir()
	c, err := startTollgate(t, bin, dir, "127.0.0.1:0", "--fsync", "always")
	if err != nil {
		t.Fatal(err)
	}
	addr := c.addr
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createTestTopic(t, addr, "jobs", 2)
	admin := testClient(t, addr)
	checkAdvertised(t, ctx, admin)
	setShareReset(t, ctx, admin, "workers")
	const n = 400
	prod := testClient(t, addr, kgo.DefaultProduceTopic("jobs"))
	for i := range n {
		prod.Produce(ctx, kgo.StringRecord(fmt.Sprint(i)), func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// confirmed: accepted records whose acknowledgement the broker answered
	// with no error (the broker answers once it is durable).
	var mu sync.Mutex
	ackErrs := 0
	cons := testClient(t, addr, kgo.ConsumeTopics("jobs"), kgo.ShareGroup("workers"), kgo.ShareMaxRecords(20),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rs {
				if r.Err != nil {
					ackErrs++
				}
			}
		}))
	confirmed := map[string]bool{}
	for len(confirmed) < n/2 {
		rs := cons.PollRecords(ctx, 20).Records()
		if ctx.Err() != nil {
			t.Fatalf("accepted %d before the kill", len(confirmed))
		}
		cons.MarkAcks(kgo.AckAccept, rs...)
		if err := cons.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		ok := ackErrs == 0
		mu.Unlock()
		if !ok {
			t.Fatal("an acknowledgement failed before the kill")
		}
		for _, r := range rs {
			confirmed[string(r.Value)] = true
		}
	}
	c.kill()
	go cons.Close() // it cannot reach the broker; do not wait for its final acks
	c = restartOn(t, bin, dir, addr, "--fsync", "always")
	t.Cleanup(func() { c.stop() })

	again := testClient(t, addr, kgo.ConsumeTopics("jobs"), kgo.ShareGroup("workers"))
	got := map[string]bool{}
	for len(got)+len(confirmed) < n {
		for _, r := range again.PollRecords(ctx, 0).Records() {
			if confirmed[string(r.Value)] {
				t.Fatalf("record %s, accepted and confirmed before the kill, delivered again", r.Value)
			}
			got[string(r.Value)] = true
		}
		if ctx.Err() != nil {
			t.Fatalf("after the restart got %d of the %d unconfirmed records", len(got), n-len(confirmed))
		}
	}
}

// setShareReset makes group start at the log start (share.auto.offset.reset).
func setShareReset(t *testing.T, ctx context.Context, cl *kgo.Client, group string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	cf := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cf.Name, cf.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, cf)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("set share.auto.offset.reset: %v %+v", err, resp)
	}
}

// checkAdvertised: the gateway's ApiVersions clamp offers the share-group
// keys, DescribeProducers and DescribeTopicPartitions at the versions the
// built-in broker serves (franz-go needs ShareFetch and ShareAcknowledge
// v2).
func checkAdvertised(t *testing.T, ctx context.Context, cl *kgo.Client) {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int16]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = k.MaxVersion
	}
	for key, want := range map[int16]int16{apis.DescribeProducers: 0, apis.DescribeTopicPartitions: 0,
		apis.ShareGroupHeartbeat: 1, apis.ShareGroupDescribe: 1, apis.ShareFetch: 2, apis.ShareAcknowledge: 2,
		apis.DescribeShareGroupOffsets: 1, apis.AlterShareGroupOffsets: 0, apis.DeleteShareGroupOffsets: 0} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("ApiVersions through the gateway: %s max %d (offered %v), want %d", kmsg.NameForKey(key), v, ok, want)
		}
	}
}
