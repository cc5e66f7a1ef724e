package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/broker"
	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// autoCreateBackend is a backend that creates topics named in Metadata
// (kfake with AllowAutoTopicCreation, the built-in broker with
// auto_create_topics), with a look at the backend itself, not through
// the gateway, for whether a topic exists.
type autoCreateBackend struct {
	name  string
	start func(t *testing.T) (srv *proxy.Server, exists func(topic string) bool)
}

var autoCreateBackends = []autoCreateBackend{
	{"upstream", func(t *testing.T) (*proxy.Server, func(string) bool) {
		c := startUpstream(t, 3, kfake.AllowAutoTopicCreation(), kfake.SeedTopics(1, "orders"))
		return startGateway(t, c), kfakeHas(t, c)
	}},
	{"single-port", func(t *testing.T) (*proxy.Server, func(string) bool) {
		c := startUpstream(t, 3, kfake.AllowAutoTopicCreation(), kfake.SeedTopics(1, "orders"))
		srv := startGateway(t, c, func(o *proxy.Options) {
			o.Listeners[0].SinglePort = &proxy.SinglePortOptions{VirtualNode: testVirtual}
		})
		return srv, kfakeHas(t, c)
	}},
	{"builtin", func(t *testing.T) (*proxy.Server, func(string) bool) {
		b, err := broker.Open(broker.Config{DataDir: t.TempDir(), Fsync: storage.FsyncAlways, AutoCreateTopics: true, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := b.Close(); err != nil {
				t.Errorf("broker close: %v", err)
			}
		})
		srv := startServer(t, proxy.Options{
			Listeners: []proxy.ListenerOptions{{Name: "test", Listen: "127.0.0.1:0"}},
			Local:     proxy.LocalFunc(func(remote string) proxy.LocalConn { return b.NewConn(remote) }),
			Logger:    testLogger(t),
		})
		adm := kadm.NewClient(newClient(t, srv, nil))
		if _, err := adm.CreateTopic(ctxT(t, 10*time.Second), 1, 1, nil, "orders"); err != nil {
			t.Fatal(err)
		}
		return srv, func(topic string) bool {
			for _, p := range b.PartitionStats() {
				if p.Topic == topic {
					return true
				}
			}
			return false
		}
	}},
}

// kfakeHas asks kfake itself, not through the gateway, whether a topic
// exists: an all-topics Metadata request (which never creates) from a
// fresh client each time (kgo answers a repeated Metadata request from
// its cache for a while).
func kfakeHas(t *testing.T, c *kfake.Cluster) func(string) bool {
	return func(topic string) bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		td, err := kadm.NewClient(cl).ListTopics(ctxT(t, 10*time.Second))
		if err != nil {
			t.Fatalf("list kfake's topics: %v", err)
		}
		return td.Has(topic)
	}
}

// TestPolicyWithholdsAutoCreation (issue 19): a policy that denies
// CreateTopics also denies auto-creation, on every backend. kcat
// (librdkafka) and kgo producing to a new topic get
// UNKNOWN_TOPIC_OR_PARTITION and the topic does not exist on the backend
// afterwards; Metadata v0-3 (which always auto-create) are answered
// at their own version without creating; a deny that matches some names
// withholds creation of those only, also when one request names both
// kinds; and without a deny, auto-creation still works.
func TestPolicyWithholdsAutoCreation(t *testing.T) {
	for _, b := range autoCreateBackends {
		t.Run(b.name, func(t *testing.T) { testWithholdsAutoCreation(t, b) })
	}
}

func testWithholdsAutoCreation(t *testing.T, b autoCreateBackend) {
	srv, exists := b.start(t)
	addr := srv.Addr(0).String()
	setPolicy(t, srv, `
policy:
  default: allow
  rules:
    - name: no-create-locked
      match: { api: [CreateTopics], topic: { prefix: locked. } }
      action: deny
`)
	t.Run("kgo", func(t *testing.T) {
		err := produceAutoCreate(t, srv, "locked.kgo")
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Errorf("produce to locked.kgo: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
		}
		if exists("locked.kgo") {
			t.Error("locked.kgo was auto-created on the backend despite the CreateTopics deny")
		}
	})
	t.Run("kcat", func(t *testing.T) {
		out, err := kcatTry(t, "m\n", "-b", addr, "-t", "locked.kcat", "-P", "-X", "topic.metadata.propagation.max.ms=1000")
		if err == nil || !strings.Contains(out, "Unknown topic") {
			t.Errorf("kcat -P -t locked.kcat: %v, want a delivery failure for an unknown topic:\n%s", err, out)
		}
		if exists("locked.kcat") {
			t.Error("locked.kcat was auto-created on the backend despite the CreateTopics deny")
		}
	})
	t.Run("metadata-v0-v3", func(t *testing.T) {
		// The requests below name orders, which the client may create,
		// with a topic it may not: once the gateway has seen orders
		// exist (here in an all-topics answer) they go whole, creation
		// withheld (see "mixed" for a new one).
		if _, err := kadm.NewClient(newClient(t, srv, nil)).ListTopics(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		for mv := int16(0); mv <= 3; mv++ {
			v := kversion.V1_0_0()
			v.SetMaxKeyVersion(int16(kmsg.Metadata), mv)
			cl := newClient(t, srv, nil, kgo.MaxVersions(v))
			topic := fmt.Sprintf("locked.v%d", mv)
			req := kmsg.NewPtrMetadataRequest()
			for _, name := range []string{topic, "orders"} {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(name)
				req.Topics = append(req.Topics, rt)
			}
			resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
			if err != nil {
				t.Fatalf("metadata v%d: %v", mv, err)
			}
			if resp.Version != mv || len(resp.Brokers) == 0 {
				t.Errorf("metadata v%d: answered at v%d with %d brokers", mv, resp.Version, len(resp.Brokers))
			}
			got := map[string]int16{}
			for _, rt := range resp.Topics {
				got[*rt.Topic] = rt.ErrorCode
				if *rt.Topic == "orders" && (rt.ErrorCode != 0 || len(rt.Partitions) != 1) {
					t.Errorf("metadata v%d: existing topic orders: error %d, %d partitions", mv, rt.ErrorCode, len(rt.Partitions))
				}
			}
			if c, ok := got[topic]; !ok || c != kerr.UnknownTopicOrPartition.Code {
				t.Errorf("metadata v%d: %s answered %d (present %v), want UNKNOWN_TOPIC_OR_PARTITION", mv, topic, c, ok)
			}
			if exists(topic) {
				t.Errorf("metadata v%d auto-created %s despite the CreateTopics deny", mv, topic)
			}
		}
	})
	t.Run("allowed-names", func(t *testing.T) {
		if err := produceAutoCreate(t, srv, "open.kgo"); err != nil {
			t.Errorf("produce to open.kgo (creation allowed): %v", err)
		}
		if !exists("open.kgo") {
			t.Error("open.kgo was not auto-created: the deny on locked.* withheld it")
		}
	})
	t.Run("mixed", func(t *testing.T) {
		// One producer, one request naming a topic it may create and one
		// it may not: the first is created, the second is not.
		cl := newClient(t, srv, nil, kgo.AllowAutoTopicCreation(), kgo.UnknownTopicRetries(1), kgo.DisableIdempotentWrite())
		res := cl.ProduceSync(ctxT(t, 30*time.Second),
			&kgo.Record{Topic: "open.mixed", Value: []byte("v")}, &kgo.Record{Topic: "locked.mixed", Value: []byte("v")})
		for _, r := range res {
			switch r.Record.Topic {
			case "open.mixed":
				if r.Err != nil {
					t.Errorf("produce to open.mixed (creation allowed): %v", r.Err)
				}
			case "locked.mixed":
				if !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
					t.Errorf("produce to locked.mixed: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
				}
			}
		}
		if !exists("open.mixed") {
			t.Error("open.mixed was not auto-created: a request also naming locked.mixed withheld it")
		}
		if exists("locked.mixed") {
			t.Error("locked.mixed was auto-created despite the CreateTopics deny")
		}
	})
	t.Run("no-deny", func(t *testing.T) {
		setPolicy(t, srv, `
policy:
  default: allow
  rules:
    - name: no-delete
      match: { api: [DeleteTopics] }
      action: deny
`)
		if err := produceAutoCreate(t, srv, "locked.later"); err != nil {
			t.Errorf("produce to locked.later without a CreateTopics deny: %v", err)
		}
		if _, err := kcatTry(t, "m\n", "-b", addr, "-t", "locked.kcat2", "-P"); err != nil {
			t.Errorf("kcat -P without a CreateTopics deny: %v", err)
		}
		for _, topic := range []string{"locked.later", "locked.kcat2"} {
			if !exists(topic) {
				t.Errorf("%s was not auto-created without a CreateTopics deny", topic)
			}
		}
	})
	t.Run("default-deny", func(t *testing.T) {
		// Kafka with an authorizer: no CREATE ACL, no auto-creation.
		setPolicy(t, srv, `
policy:
  default: deny
  rules:
    - name: clients
      match: { api: [Metadata, Produce, InitProducerId, FindCoordinator, ListOffsets] }
      action: allow
`)
		err := produceAutoCreate(t, srv, "fresh.kgo")
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Errorf("produce to fresh.kgo under default deny: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
		}
		if exists("fresh.kgo") {
			t.Error("fresh.kgo was auto-created although the default denies CreateTopics")
		}
	})
}

// produceAutoCreate produces one record with a client that asks for
// auto-creation, giving up after one unknown-topic retry.
func produceAutoCreate(t *testing.T, srv *proxy.Server, topic string) error {
	t.Helper()
	cl := newClient(t, srv, nil, kgo.AllowAutoTopicCreation(), kgo.UnknownTopicRetries(1), kgo.DisableIdempotentWrite())
	return cl.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

// kcatTry runs kcat and returns its stdout and stderr, and its error
// (kcat exits non-zero when a message was not delivered).
func kcatTry(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (make deps installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// TestAutoCreationWithheldAudited: like other partial decisions, a
// Metadata request whose auto-creation the policy withheld is forwarded,
// and its audit record names the CreateTopics rule.
func TestAutoCreationWithheldAudited(t *testing.T) {
	c := startUpstream(t, 1, kfake.AllowAutoTopicCreation())
	sink := &syncBuffer{}
	trail, err := audit.New(configs.Audit{Level: "full", Mode: "best-effort", Queue: 10000}, nil, audit.WithSink(sink))
	if err != nil {
		t.Fatal(err)
	}
	srv := startGateway(t, c, func(o *proxy.Options) { o.Audit = trail })
	setPolicy(t, srv, "policy:\n  rules:\n    - name: no-create\n      match: { api: [CreateTopics] }\n      action: deny\n")
	if err := produceAutoCreate(t, srv, "audited.new"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("produce to audited.new: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	trail.Close() // flush the queue
	n := 0
	for _, r := range sink.records(t) {
		if r.Event != audit.EventRequest || r.API != "Metadata" || len(r.Topics) == 0 {
			continue
		}
		n++
		if r.Rule != "no-create" || r.Decision != audit.Forwarded {
			t.Errorf("Metadata record for %v: rule %q decision %q, want no-create, forwarded", r.Topics, r.Rule, r.Decision)
		}
	}
	if n == 0 {
		t.Error("no audit record of a Metadata request naming the topic")
	}
	if kfakeHas(t, c)("audited.new") {
		t.Error("audited.new was auto-created")
	}
}
