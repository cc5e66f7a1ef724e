package proxy_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tollgate-kafka/tollgate/broker"
	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// backend is one kind of Kafka behind the gateway. The compatibility tests
// run against each, so both backends serve clients through the same
// pipeline (DESIGN.md, principle 8).
type backend struct {
	name string
	// start returns a gateway over a backend holding topic with the given
	// number of partitions, and a check that no backend address leaked.
	start func(t *testing.T, partitions int32, topic string) (*proxy.Server, func(testing.TB, *recorder))
}

var backends = []backend{
	{"upstream", func(t *testing.T, partitions int32, topic string) (*proxy.Server, func(testing.TB, *recorder)) {
		c := startUpstream(t, 3, kfake.SeedTopics(partitions, topic))
		return startGateway(t, c), func(t testing.TB, r *recorder) { r.assertNoLeak(t, c) }
	}},
	{"builtin", func(t *testing.T, partitions int32, topic string) (*proxy.Server, func(testing.TB, *recorder)) {
		srv := startBuiltin(t)
		adm := kadm.NewClient(newClient(t, srv, nil))
		ctx := ctxT(t, 10*time.Second)
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
		return srv, assertBuiltinNoLeak
	}},
}

// startBuiltin starts the gateway over the built-in broker in a temporary
// data directory.
func startBuiltin(t testing.TB) *proxy.Server { return startBuiltinWith(t) }

// startBuiltinWith is startBuiltin with changes to the gateway's options.
func startBuiltinWith(t testing.TB, mod ...func(*proxy.Options)) *proxy.Server {
	t.Helper()
	b, err := broker.Open(broker.Config{
		DataDir:          t.TempDir(),
		Fsync:            storage.FsyncAlways,
		AutoCreateTopics: true,
		Logger:           testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The broker closes after the gateway: cleanups run last-registered first.
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("broker close: %v", err)
		}
	})
	return startServer(t, proxy.Options{
		Listeners: []proxy.ListenerOptions{{Name: "test", Listen: "127.0.0.1:0"}},
		Local:     proxy.LocalFunc(func(remote string) proxy.LocalConn { return b.NewConn(remote) }),
		Logger:    testLogger(t),
	}, mod...)
}

// assertBuiltinNoLeak: the built-in broker names itself "localhost:9092"
// and leaves the real address to the gateway's rewriter, so that string
// must never reach a client.
func assertBuiltinNoLeak(t testing.TB, r *recorder) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if bytes.Contains(r.recv.Bytes(), []byte("localhost")) {
		t.Error("a client received the broker's unrewritten address")
	}
	if r.recv.Len() == 0 {
		t.Error("recorder saw no bytes")
	}
}

func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}
