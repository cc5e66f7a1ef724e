package broker

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchEncodingMatchesKmsg checks the hand encoder against kmsg for
// every served Fetch version: our body must decode with kmsg and re-encode
// to the same bytes, with the values we expect.
func TestFetchEncodingMatchesKmsg(t *testing.T) {
	b := openBroker(t, t.TempDir())
	c := b.NewConn("test")
	defer c.Close()
	s, err := b.checkCreate("enc", 3, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := b.createTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, durable, err := tp.partitions[0].log.Append(makeBatch([]byte("a"), []byte("bb")), storageAppend(time.Now())); err != nil {
			t.Fatal(err)
		} else if durable != nil {
			<-durable
		}
	}
	for v := int16(4); v <= 18; v++ {
		for _, iso := range []int8{0, 1} {
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.MaxBytes, req.IsolationLevel, req.SessionEpoch = v, 1<<20, iso, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "enc", tp.id
			for _, p := range []struct {
				idx int32
				off int64
			}{{0, 0}, {1, 0}, {2, 99}, {9, 0}} { // distinct: repeated partitions are de-duplicated (dedupe.go)
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.idx, p.off, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			body, err := call(c, req)
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			var buf bytes.Buffer
			if n, err := body.WriteTo(&buf); err != nil || int(n) != body.Len() || buf.Len() != body.Len() {
				t.Fatalf("v%d: wrote %d (%v), Len %d", v, n, err, body.Len())
			}
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = v
			if err := resp.ReadFrom(buf.Bytes()); err != nil {
				t.Fatalf("v%d: kmsg cannot decode our body: %v", v, err)
			}
			if again := resp.AppendTo(nil); !bytes.Equal(again, buf.Bytes()) {
				t.Fatalf("v%d iso %d: kmsg re-encodes differently:\nours % x\nkmsg % x", v, iso, buf.Bytes(), again)
			}
			ps := resp.Topics[0].Partitions
			if len(ps) != 4 || ps[0].ErrorCode != 0 || ps[0].HighWatermark != 6 || ps[1].ErrorCode != 0 || len(ps[1].RecordBatches) != 0 ||
				ps[2].ErrorCode != kerr.OffsetOutOfRange.Code || ps[3].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("v%d: unexpected partitions %+v", v, ps)
			}
			// Count the records in the returned batches.
			raw := ps[0].RecordBatches
			n := 0
			for len(raw) > 0 {
				var rb kmsg.RecordBatch
				if err := rb.ReadFrom(raw); err != nil {
					t.Fatalf("v%d: record batch: %v", v, err)
				}
				n += int(rb.NumRecords)
				raw = raw[12+rb.Length:]
			}
			if n != 6 {
				t.Fatalf("v%d: %d records fetched, want 6", v, n)
			}
		}
	}

	// A session id we never gave out: FETCH_SESSION_ID_NOT_FOUND, so the
	// client falls back to sessionless fetches.
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.SessionID, req.SessionEpoch = 12, 42, 3
	body, err := call(c, req)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, _ = body.WriteTo(&buf)
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	if err := resp.ReadFrom(buf.Bytes()); err != nil || resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	if again := resp.AppendTo(nil); !bytes.Equal(again, buf.Bytes()) {
		t.Fatalf("session error body differs from kmsg")
	}
}

func TestFetchLongPoll(t *testing.T) {
	b := openBroker(t, t.TempDir())
	c := b.NewConn("test")
	defer c.Close()
	s, _ := b.checkCreate("poll", 1, 1, nil)
	tp, err := b.createTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	fetchReq := func(wait int32) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 12, wait, 1, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "poll"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}

	// Nothing arrives: the answer comes after about MaxWaitMillis.
	start := time.Now()
	if _, err := call(c, fetchReq(300)); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 250*time.Millisecond || el > 5*time.Second {
		t.Fatalf("empty long poll answered after %v, want ~300ms", el)
	}

	// A record arrives while waiting: the answer comes at once with it.
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _, _ = tp.partitions[0].log.Append(makeBatch([]byte("wake")), storageAppend(time.Now()))
	}()
	start = time.Now()
	body, err := call(c, fetchReq(10000))
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("long poll not woken by a produce (%v)", el)
	}
	var buf bytes.Buffer
	_, _ = body.WriteTo(&buf)
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	if err := resp.ReadFrom(buf.Bytes()); err != nil || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("woken fetch: %v %+v", err, resp.Topics)
	}

	// Closing the connection cancels a pending poll.
	done := make(chan error, 1)
	c2 := b.NewConn("gone")
	req := fetchReq(30000)
	req.Topics[0].Partitions[0].FetchOffset = 1
	go func() { _, err := call(c2, req); done <- err }()
	time.Sleep(50 * time.Millisecond)
	c2.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("cancelled poll answered without error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing the connection did not cancel the poll")
	}
}
