package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	srv := startServer(t, b)
	ret := "86400000"
	createTopic(t, srv.addr(), "durable", 2, map[string]*string{"retention.ms": &ret})
	cl := newClient(t, srv.addr())
	var recs []*kgo.Record
	for i := 0; i < 100; i++ {
		recs = append(recs, &kgo.Record{Topic: "durable", Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid1 := initProducerID(t, cl)
	idBefore := b.lookup("durable").id
	cl.Close()
	srv.close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b2 := openBroker(t, dir)
	srv2 := startServer(t, b2)
	if got := b2.lookup("durable"); got == nil || got.id != idBefore || len(got.partitions) != 2 {
		t.Fatalf("topic after restart: %+v", got)
	}
	got := consumeN(t, srv2.addr(), "durable", 100)
	if len(got) != 100 {
		t.Fatalf("%d records after restart", len(got))
	}
	cl2 := newClient(t, srv2.addr())
	rcs, err := kadm.NewClient(cl2).DescribeTopicConfigs(testCtx(t), "durable")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("durable", nil)
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" && c.MaybeValue() != ret {
			t.Fatalf("retention.ms after restart: %q", c.MaybeValue())
		}
	}
	if pid2 := initProducerID(t, cl2); pid2 <= pid1 {
		t.Fatalf("producer id %d after restart reuses ids up to %d", pid2, pid1)
	}
}

func initProducerID(t *testing.T, cl *kgo.Client) int64 {
	t.Helper()
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(testCtx(t), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %d", err, resp.ErrorCode)
	}
	return resp.ProducerID
}
