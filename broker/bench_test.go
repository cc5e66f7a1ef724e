package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduceFetch produces b.N 1 KiB records through kgo (idempotent,
// acks=all) and consumes them back, against the test server.
func BenchmarkProduceFetch(b *testing.B) {
	for _, pol := range []struct {
		name string
		p    storage.FsyncPolicy
	}{{"fsync=never", storage.FsyncNever}, {"fsync=always", storage.FsyncAlways}} {
		b.Run(pol.name, func(b *testing.B) {
			_, srv := newBroker(b, func(c *Config) { c.Fsync = pol.p })
			createTopic(b, srv.addr(), "bench", 4, nil)
			prod := newClient(b, srv.addr(), kgo.ProducerLinger(time.Millisecond))
			value := make([]byte, 1024)
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			var wg sync.WaitGroup
			var firstErr error
			var mu sync.Mutex
			for i := 0; i < b.N; i++ {
				wg.Add(1)
				prod.Produce(context.Background(), &kgo.Record{Topic: "bench", Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					wg.Done()
				})
			}
			wg.Wait()
			if firstErr != nil {
				b.Fatal(firstErr)
			}
			consumeN(b, srv.addr(), "bench", b.N)
		})
	}
}
