package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDeleteThenAutoCreate: a topic auto-created by a Metadata request
// that races the DeleteTopics of the same name starts empty, and its
// folders exist. Before, the new topic opened the deleted one's folders
// (their names do not change), recovered its records, and then lost the
// folders to the delete's removal (kafka-go's own suite did this).
func TestDeleteThenAutoCreate(t *testing.T) {
	b, srv := newBroker(t)
	ctx := testCtx(t)
	cl := newClient(t, srv.addr(), kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	meta := newClient(t, srv.addr()) // its own connection: a request on the delete's would wait its turn
	for i := range 60 {
		topic := fmt.Sprintf("again-%d", i)
		createTopic(t, srv.addr(), topic, 1, nil)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("from the deleted topic")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := adm.DeleteTopics(ctx, topic); err != nil {
				t.Error(err)
			}
		}()
		for range 20 { // auto-creating Metadata requests while the delete runs
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics, req.AllowAutoTopicCreation = append(req.Topics, rt), true
			if _, err := req.RequestWith(ctx, meta); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		if b.lookup(topic) == nil { // the delete came last: nothing to check this round
			continue
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if end := ends[topic][0].Offset; end != 0 {
			t.Fatalf("round %d: the topic created after a delete holds %d records of the deleted one", i, end)
		}
		if _, err := os.Stat(filepath.Join(b.cfg.DataDir, partitionDir(topic, 0))); err != nil {
			t.Fatalf("round %d: the new topic's folder: %v", i, err)
		}
	}
}
