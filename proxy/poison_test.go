package proxy_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batches built byte by byte, with a correct CRC-32C, so that what is
// wrong with them is past every header check (issue 15).

func varint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

// poisonRecord encodes one record with value v at offset delta od.
func poisonRecord(od int64, v string) []byte {
	body := []byte{0}      // attributes
	body = varint(body, 0) // timestamp delta
	body = varint(body, od)
	body = varint(body, -1) // null key
	body = varint(body, int64(len(v)))
	body = append(body, v...)
	body = varint(body, 0) // no headers
	return append(varint(nil, int64(len(body))), body...)
}

// poisonBatch frames records as a v2 batch with the given attributes and
// counts, and a correct CRC-32C.
func poisonBatch(attrs int16, numRecords, lastOffsetDelta int32, records []byte) []byte {
	be := binary.BigEndian
	b := be.AppendUint64(nil, 0)                    // base offset
	b = be.AppendUint32(b, uint32(49+len(records))) // length
	b = be.AppendUint32(b, 0xffffffff)              // leader epoch
	b = append(b, 2)                                // magic
	b = be.AppendUint32(b, 0)                       // CRC, below
	b = be.AppendUint16(b, uint16(attrs))
	b = be.AppendUint32(b, uint32(lastOffsetDelta))
	ts := uint64(time.Now().UnixMilli())
	b = be.AppendUint64(b, ts)
	b = be.AppendUint64(b, ts)
	b = be.AppendUint64(b, 0xffffffffffffffff) // producer id -1
	b = be.AppendUint16(b, 0xffff)
	b = be.AppendUint32(b, 0xffffffff)
	b = be.AppendUint32(b, uint32(numRecords))
	b = append(b, records...)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func gzipped(p []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(p)
	w.Close()
	return buf.Bytes()
}

// rawProduce sends one batch to topic/0 at Produce v9 and returns the
// partition's error code.
func rawProduce(t *testing.T, rc *rawConn, topic string, batch []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	_, resp, ok := rc.roundTrip(req)
	if !ok {
		t.Fatal("the gateway closed the connection on a produce")
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// TestPoisonPillBatchesRefused: each batch that used to be acknowledged
// and then stuck every consumer is refused with Kafka's code, the log end
// does not move, and kgo and kcat read the partition to its end.
func TestPoisonPillBatchesRefused(t *testing.T) {
	srv := startBuiltin(t)
	ctx := ctxT(t, 60*time.Second)
	cl := newClient(t, srv, nil)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "poison"); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, srv.Addr(0).String())
	good := poisonBatch(0, 1, 0, poisonRecord(0, "good-0"))
	if code := rawProduce(t, rc, "poison", good); code != 0 {
		t.Fatalf("good batch: %v", kerr.ErrorForCode(code))
	}
	one := poisonRecord(0, "x")
	cases := []struct {
		name  string
		batch []byte
		want  *kerr.Error
	}{
		{"length varint 5000, 5 bytes follow", poisonBatch(0, 1, 0, append(varint(nil, 5000), one[1:]...)), kerr.InvalidRecord},
		{"one record claimed, no record bytes", poisonBatch(0, 1, 0, nil), kerr.InvalidRecord},
		{"five claimed, one inside", poisonBatch(0, 5, 4, one), kerr.InvalidRecord},
		{"2^31-1 claimed, one inside", poisonBatch(0, 1<<31-1, 1<<31-2, one), kerr.InvalidRecord},
		{"gzip attribute on plain bytes", poisonBatch(1, 1, 0, one), kerr.CorruptMessage},
		{"gzip, five claimed, one inside", poisonBatch(1, 5, 4, gzipped(one)), kerr.InvalidRecord},
	}
	for i, c := range cases {
		if code := rawProduce(t, rc, "poison", c.batch); code != c.want.Code {
			t.Errorf("%s: got %v, want %v", c.name, kerr.ErrorForCode(code), c.want)
		}
		// A good batch after each bad one: the partition keeps working.
		v := fmt.Sprintf("good-%d", i+1)
		if code := rawProduce(t, rc, "poison", poisonBatch(1, 1, 0, gzipped(poisonRecord(0, v)))); code != 0 {
			t.Fatalf("good batch after %s: %v", c.name, kerr.ErrorForCode(code))
		}
	}
	want := len(cases) + 1
	ends, err := adm.ListEndOffsets(ctx, "poison")
	if err != nil {
		t.Fatal(err)
	}
	if end, _ := ends.Lookup("poison", 0); end.Offset != int64(want) {
		t.Fatalf("log end offset %d, want %d (one per good batch)", end.Offset, want)
	}
	consumer := newClient(t, srv, nil, kgo.ConsumeTopics("poison"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < want {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("kgo read %d of %d records: %v", len(got), want, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("kgo fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != want || got[0] != "good-0" || got[want-1] != fmt.Sprintf("good-%d", want-1) {
		t.Fatalf("kgo read %q", got)
	}
	kcatReadsToEnd(t, srv.Addr(0).String(), "poison", want)
}

// kcatReadsToEnd runs kcat (librdkafka) on the partition from the start to
// its end and checks it read n records without an error.
func kcatReadsToEnd(t *testing.T, addr, topic string, n int) {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Log("kcat not installed (make deps installs it); skipping the librdkafka read")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kcat", "-b", addr, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		t.Fatalf("kcat read %d records, want %d:\n%s", len(lines), n, out)
	}
}
