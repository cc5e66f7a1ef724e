package proxy_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestPrincipalMatrix: principals × APIs × topics through SASL, with the
// upstream recording every Produce and Fetch topic it receives. Each cell's
// client-side result must match the policy, and nothing a principal is
// denied — nor anything from an unauthenticated client — reaches the
// backend.
func TestPrincipalMatrix(t *testing.T) {
	topics := []string{"orders", "payments", "audit-log"}
	c := startUpstream(t, 1, kfake.SeedTopics(1, topics...))
	ids := map[[16]byte]string{}
	for _, tp := range topics {
		ids[c.TopicInfo(tp).TopicID] = tp
	}
	name := func(topic string, id [16]byte) string {
		if topic != "" {
			return topic
		}
		return ids[id]
	}
	var mu sync.Mutex
	seen := map[string]bool{} // "Produce:topic", "Fetch:topic" as the upstream received them
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		switch r := req.(type) {
		case *kmsg.ProduceRequest:
			for _, tp := range r.Topics {
				seen["Produce:"+name(tp.Topic, tp.TopicID)] = true
			}
		case *kmsg.FetchRequest:
			for _, tp := range r.Topics {
				seen["Fetch:"+name(tp.Topic, tp.TopicID)] = true
			}
		}
		return nil, nil, false
	})
	users := map[string]string{"alice": "a", "bob": "b", "carol": "c"}
	srv := startGateway(t, c, withSASL(plainServer{users: users}))
	setPolicy(t, srv, `
policy:
  default: deny
  rules:
    - name: alice-everything
      match: { principal: alice }
      action: allow
    - name: bob-orders-only
      match: { principal: bob, topic: orders }
      action: allow
    - name: carol-reads-audit
      match: { principal: carol, api: [consume, Metadata, FindCoordinator], topic: { prefix: audit } }
      action: allow
    - name: metadata-for-all
      match: { api: [Metadata, InitProducerID] }
      action: allow
`)
	allowed := func(user, api, topic string) bool {
		switch user {
		case "alice":
			return true
		case "bob":
			return topic == "orders"
		case "carol":
			return api == "Fetch" && topic == "audit-log"
		}
		return false
	}
	ctx := ctxT(t, 60*time.Second)
	for user, pass := range users {
		for _, topic := range topics {
			cell := fmt.Sprintf("%s/%s", user, topic)
			cl := newClient(t, srv, nil, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()),
				kgo.DisableIdempotentWrite(), kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(3*time.Second))
			err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(user)}).FirstErr()
			if want := allowed(user, "Produce", topic); want != (err == nil) {
				t.Errorf("%s Produce: err %v, allowed %v", cell, err, want)
			} else if !want && !errors.Is(err, kerr.TopicAuthorizationFailed) {
				t.Errorf("%s Produce: %v, want TOPIC_AUTHORIZATION_FAILED", cell, err)
			}
			// A Fetch from offset 0 of partition 0, by hand.
			req := kmsg.NewPtrFetchRequest()
			req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = 10, 1<<20, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, c.TopicInfo(topic).TopicID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("%s Fetch: %v", cell, err)
			}
			code := resp.Topics[0].Partitions[0].ErrorCode
			if want := allowed(user, "Fetch", topic); want != (code == 0) {
				t.Errorf("%s Fetch: error %d, allowed %v", cell, code, want)
			}
			cl.Close()
		}
	}
	// Nobody unauthenticated gets anything through.
	rc := dialRaw(t, srv.Addr(0).String())
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = -1, 1000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "unauthenticated"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = testBatch()
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	if _, _, ok := rc.roundTrip(pr); ok {
		t.Error("an unauthenticated Produce was answered")
	}

	mu.Lock()
	defer mu.Unlock()
	for key := range seen {
		var api, topic string
		for i := range key {
			if key[i] == ':' {
				api, topic = key[:i], key[i+1:]
			}
		}
		if topic == "unauthenticated" {
			t.Errorf("the upstream received %s from an unauthenticated client", key)
		}
		anyAllowed := false
		for user := range users {
			anyAllowed = anyAllowed || allowed(user, api, topic)
		}
		if !anyAllowed {
			t.Errorf("the upstream received %s, which no principal may do", key)
		}
	}
	if !seen["Produce:payments"] || seen["Produce:unauthenticated"] {
		t.Errorf("upstream saw %v: alice's produce to payments should be there", seen)
	}
}
