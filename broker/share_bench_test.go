package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkShareVsGroupFetch reads the same 20,000 1 KiB records (4
// partitions) with one kgo consumer per iteration: a classic consumer
// group (Fetch, autocommit) and a share group (ShareFetch, every record
// acknowledged as accepted), fsync=never. MB/s side by side; the README
// reports share/group.
func BenchmarkShareVsGroupFetch(b *testing.B) {
	const n = 20000
	_, srv := newBroker(b)
	createTopic(b, srv.addr(), "sb", 4, nil)
	prod := newClient(b, srv.addr(), kgo.ProducerLinger(time.Millisecond), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	value := make([]byte, 1024)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "sb", Value: value}
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	consume := func(b *testing.B, opts ...kgo.Opt) {
		cl := newClient(b, srv.addr(), append([]kgo.Opt{kgo.ConsumeTopics("sb")}, opts...)...)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		got := 0
		for got < n {
			got += len(cl.PollFetches(ctx).Records())
			if ctx.Err() != nil {
				b.Fatalf("read %d of %d", got, n)
			}
		}
		cl.Close()
	}
	groups := 0 // every iteration of every run reads with a new group
	b.Run("group", func(b *testing.B) {
		b.SetBytes(n * int64(len(value)))
		for i := 0; i < b.N; i++ {
			groups++
			consume(b, kgo.ConsumerGroup(fmt.Sprint("g", groups)), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		}
	})
	b.Run("share", func(b *testing.B) {
		b.SetBytes(n * int64(len(value)))
		admin := newClient(b, srv.addr())
		for i := 0; i < b.N; i++ {
			groups++
			group := fmt.Sprint("s", groups)
			b.StopTimer()
			setGroupConfigsB(b, admin, group, "share.auto.offset.reset", "earliest")
			b.StartTimer()
			consume(b, kgo.ShareGroup(group))
		}
	})
}
