package proxy_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/proxy"
)

// TestSinglePortFetchAheadConsumer: a kgo consumer reading three
// partitions on three brokers through the one port, a few batches per
// Fetch, gets every record once, in order, while the gateway fetches
// ahead; record sets large enough go through pipes (their batch headers
// peeked at on the way, batch_walk.go) and small ones through memory,
// and in both the client's next Fetches ask what the gateway predicted.
// The same with every partition on one broker (a Fetch of one part).
// With fetch-ahead off, none is sent and the records are the same.
func TestSinglePortFetchAheadConsumer(t *testing.T) {
	for _, c := range []struct {
		name     string
		partMax  int32 // the consumer's max bytes per partition
		value    int   // bytes per record
		perBatch int   // records per produced batch
		off      bool  // fetch_ahead: false
		one      bool  // every partition on broker 0: each Fetch has one part
	}{
		{"piped", 256 << 10, 8 << 10, 12, false, false},  // ~96 KiB batches, record sets over pipeMin
		{"in-memory", 8 << 10, 1 << 10, 3, false, false}, // ~3 KiB batches, record sets under pipeMin
		{"one-broker", 256 << 10, 8 << 10, 12, false, true},
		{"off", 256 << 10, 8 << 10, 12, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			const topic, parts, batches = "ahead", 3, 40
			kc, srv, scan := startSinglePort(t, topic, parts, func(o *proxy.Options) { o.Listeners[0].SinglePort.NoFetchAhead = c.off })
			if c.one {
				for p := range int32(parts) {
					if err := kc.MoveTopicPartition(topic, p, 0); err != nil {
						t.Fatal(err)
					}
				}
			}
			ctx := ctxT(t, 60*time.Second)
			prod := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(time.Minute))
			for p := range int32(parts) {
				for b := range batches {
					for i := range c.perBatch {
						v := make([]byte, c.value)
						copy(v, fmt.Sprintf("p%d-%d", p, b*c.perBatch+i))
						prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: v}, func(_ *kgo.Record, err error) {
							if err != nil {
								t.Errorf("produce: %v", err)
							}
						})
					}
					if err := prod.Flush(ctx); err != nil { // one batch per flush
						t.Fatal(err)
					}
				}
			}
			sent, used, missed := proxy.FetchAheadStats()
			piped, _, _ := proxy.PipeStatsForTest()
			cons := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(c.partMax), kgo.FetchMaxWait(500*time.Millisecond))
			next := map[int32]int64{}
			for total, want := 0, parts*batches*c.perBatch; total < want; {
				fs := cons.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("consumed %d of %d records", total, want)
				}
				fs.EachError(func(tp string, p int32, err error) { t.Errorf("fetch %s[%d]: %v", tp, p, err) })
				fs.EachRecord(func(r *kgo.Record) {
					total++
					if r.Offset != next[r.Partition] {
						t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, next[r.Partition]-1)
					}
					if w := fmt.Sprintf("p%d-%d", r.Partition, r.Offset); string(r.Value[:len(w)]) != w {
						t.Fatalf("partition %d offset %d holds %.12q", r.Partition, r.Offset, r.Value)
					}
					next[r.Partition]++
				})
			}
			sent2, used2, missed2 := proxy.FetchAheadStats()
			t.Logf("fetch-aheads: %d sent, %d used, %d missed", sent2-sent, used2-used, missed2-missed)
			switch {
			case c.off && sent2 != sent:
				t.Errorf("fetch_ahead: false, and %d fetch-aheads were sent", sent2-sent)
			case !c.off && used2 == used:
				t.Error("no fetch-ahead answered a Fetch: the consumer went without")
			}
			switch now, _, _ := proxy.PipeStatsForTest(); {
			case c.name != "in-memory" && now == piped:
				t.Error("no record set went through a pipe: the walk of piped sets was not tested")
			case c.name == "in-memory" && now != piped:
				t.Errorf("%d record sets went through pipes: the walk in memory was not tested alone", now-piped)
			}
			if missed2 != missed {
				t.Errorf("%d fetch-aheads missed: a consumer reading on asks what was predicted", missed2-missed)
			}
			scan.assertClean(t)
		})
	}
}

// TestSinglePortFetchAheadSeek: a client that does not ask what was
// predicted (it seeks back) gets its records from where it asked, not
// the fetch-ahead's answer, and that broker's session starts again with
// a full request.
func TestSinglePortFetchAheadSeek(t *testing.T) {
	const topic, parts, perPart = "seek", 3, 6
	c, srv, scan := startSinglePort(t, topic, parts) // partition p led by node p
	tap := tapFetch(c)
	ctx := ctxT(t, 30*time.Second)
	prod := newClient(t, srv, nil, kgo.Dialer(scan.dial), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(parts) {
		for i := range perPart { // a batch each
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	raw := newClient(t, srv, nil, kgo.Dialer(scan.dial))
	_, id := topicID(t, ctx, raw, topic)
	// fetch asks one batch a partition (max bytes 1: KIP-74's one batch)
	// and returns the first offset of each partition's records.
	fetch := func(sid, epoch int32, offsets map[int32]int64) (int32, map[int32]int64) {
		t.Helper()
		r := sessionFetch(topic, id, parts, 200, sid, epoch, offsets)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].PartitionMaxBytes = 1
			}
		}
		kr, err := raw.Broker(testVirtual).Request(ctx, r)
		if err != nil {
			t.Fatalf("fetch epoch %d: %v", epoch, err)
		}
		resp := kr.(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch epoch %d: error %d", epoch, resp.ErrorCode)
		}
		first := map[int32]int64{}
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if len(p.RecordBatches) >= 8 {
					first[p.Partition] = int64(binary.BigEndian.Uint64(p.RecordBatches))
				}
			}
		}
		return resp.SessionID, first
	}
	sid, got := fetch(0, 0, map[int32]int64{0: 0, 1: 0, 2: 0})
	if len(got) != parts {
		t.Fatalf("full fetch: records of %v, want all 3 partitions", got)
	}
	// Read on, one batch a step, as a consumer does: each partition
	// answered moves to its next offset with the next Fetch.
	pos := map[int32]int64{0: 1, 1: 1, 2: 1}
	epoch := int32(1)
	sent, used, missed := proxy.FetchAheadStats()
	step := func(advance map[int32]int64) map[int32]int64 {
		t.Helper()
		_, got := fetch(sid, epoch, advance)
		epoch++
		for p, off := range got {
			if off != pos[p] {
				t.Fatalf("partition %d answered from offset %d, want %d", p, off, pos[p])
			}
			pos[p]++
		}
		return got
	}
	// Until a fetch-ahead was used, and then an answer carries partition
	// 0 with more to read: node 0 has a fetch-ahead out (asked before that
	// answer was delivered).
	advance := map[int32]int64{0: 1, 1: 1, 2: 1}
	for deadline := time.Now().Add(10 * time.Second); ; {
		got := step(advance)
		advance = map[int32]int64{}
		for p := range got {
			advance[p] = pos[p]
		}
		_, u, _ := proxy.FetchAheadStats()
		if _, ok := got[0]; ok && pos[0] < perPart && u > used {
			break
		}
		if pos[0] >= perPart || time.Now().After(deadline) {
			t.Fatalf("partition 0 at offset %d: no answer left it more to read", pos[0])
		}
	}
	if s, u, _ := proxy.FetchAheadStats(); s == sent || u == used {
		t.Fatalf("reading on: %d fetch-aheads sent, %d used; want some of each", s-sent, u-used)
	}
	// Seek partition 0 back to offset 0 (and leave the others): the
	// records come from 0, whatever was fetched ahead for node 0.
	mark := len(tap.snapshot())
	pos[0] = 0
	advance[0] = 0
	for deadline := time.Now().Add(10 * time.Second); ; {
		got := step(advance)
		advance = map[int32]int64{}
		for p := range got {
			advance[p] = pos[p]
		}
		if _, ok := got[0]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("partition 0 was not answered after the seek")
		}
	}
	if _, _, m := proxy.FetchAheadStats(); m == missed {
		t.Error("the seek missed no fetch-ahead: node 0's was not in the way (the test checked nothing)")
	}
	full := false
	for _, f := range tap.snapshot()[mark:] {
		full = full || (f.node == 0 && f.epoch == 0)
	}
	if !full {
		t.Error("node 0 got no full request after its fetch-ahead was dropped")
	}
	scan.assertClean(t)
}
