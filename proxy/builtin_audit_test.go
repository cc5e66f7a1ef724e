package proxy_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate-kafka/tollgate/audit"
	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestBuiltinFetchAudit: on the built-in broker, whose Fetch bodies go
// from the segment files to the socket undecoded, the full audit record
// of a Fetch still says how many records and bytes each partition
// returned (they read "0 rec 0 B").
func TestBuiltinFetchAudit(t *testing.T) {
	sink := &syncBuffer{}
	trail, err := audit.New(configs.Audit{Level: "full", Mode: "best-effort", Queue: 10000}, nil, audit.WithSink(sink))
	if err != nil {
		t.Fatal(err)
	}
	srv := startBuiltinWith(t, func(o *proxy.Options) { o.Audit = trail })
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, srv, nil, kgo.DefaultProduceTopic("audited"), kgo.AllowAutoTopicCreation())
	const n = 7
	for range n {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("0123456789")).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := newClient(t, srv, nil, kgo.ConsumeTopics("audited"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("consumer did not read every record")
		}
		got += fs.NumRecords()
	}
	cons.Close()
	var records, bytes int
	waitFor(t, ctx, "Fetch audit records with records and bytes", func() bool {
		records, bytes = 0, 0
		for _, r := range sink.records(t) {
			if r.API != "Fetch" {
				continue
			}
			for _, tp := range r.Topics {
				for _, p := range tp.Partitions {
					records += p.Records
					bytes += p.Bytes
				}
			}
		}
		return records >= n
	})
	if records != n || bytes == 0 {
		t.Fatalf("Fetch audit records report %d records and %d bytes, want %d records and some bytes", records, bytes, n)
	}
}
