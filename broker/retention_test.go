package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRetentionAfterAlter lowers retention.bytes with AlterConfigs and
// checks that a retention pass deletes old segments.
func TestRetentionAfterAlter(t *testing.T) {
	b, srv := newBroker(t)
	seg := "1024"
	createTopic(t, srv.addr(), "ret", 1, map[string]*string{"segment.bytes": &seg})
	cl := newClient(t, srv.addr(), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := testCtx(t)
	value := make([]byte, 300)
	for i := 0; i < 40; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ret", Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	b.applyRetention(time.Now())
	if start, _ := adm.ListStartOffsets(ctx, "ret"); start["ret"][0].Offset != 0 {
		t.Fatalf("retention deleted data before it was lowered: start %d", start["ret"][0].Offset)
	}
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: kadm.StringPtr("2048")}}, "ret"); err != nil {
		t.Fatal(err)
	}
	b.applyRetention(time.Now())
	start, err := adm.ListStartOffsets(ctx, "ret")
	if err != nil {
		t.Fatal(err)
	}
	if off := start["ret"][0].Offset; off < 20 {
		t.Fatalf("log start offset %d after retention.bytes=2048 of ~13 KB, want most segments gone", off)
	}
	if size := b.partitionOf(b.lookup("ret"), 0).log.Size(); size > 4096 {
		t.Fatalf("partition still %d bytes", size)
	}
}
