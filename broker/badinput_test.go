package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceRaw sends one partition's records with a raw ProduceRequest and
// returns the partition's error code.
func produceRaw(t *testing.T, b *Broker, cl *kgo.Client, topic string, partition int32, records []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic // v12 and below
	if tp := b.lookup(topic); tp != nil {
		rt.TopicID = tp.id // v13+
	}
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func endOffset(t *testing.T, b *Broker, topic string, partition int32) int64 {
	t.Helper()
	p := b.partitionOf(b.lookup(topic), partition)
	if p == nil {
		t.Fatalf("no partition %s/%d", topic, partition)
	}
	return p.log.LogEndOffset()
}

func TestProduceBadInput(t *testing.T) {
	b, srv := newBroker(t)
	small := "1000"
	createTopic(t, srv.addr(), "bad", 2, map[string]*string{"max.message.bytes": &small})
	cl := newClient(t, srv.addr())

	good := makeBatch([]byte("hello"))
	if code := produceRaw(t, b, cl, "bad", 0, good); code != 0 {
		t.Fatalf("good batch: %v", kerr.ErrorForCode(code))
	}
	if got := endOffset(t, b, "bad", 0); got != 1 {
		t.Fatalf("end offset %d after one record", got)
	}

	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-1] ^= 0xff // the CRC no longer matches
	twoBatches := append(bytes.Clone(good), good...)
	// A magic 1 message (Kafka 0.10 format) large enough to pass the length check.
	v1 := []byte{}
	msg := []byte{1, 0}
	msg = binary.BigEndian.AppendUint64(msg, uint64(time.Now().UnixMilli()))
	msg = binary.BigEndian.AppendUint32(msg, 0xffffffff) // null key
	val := bytes.Repeat([]byte("v"), 60)
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(val)))
	msg = append(msg, val...)
	v1 = binary.BigEndian.AppendUint64(v1, 0)
	v1 = binary.BigEndian.AppendUint32(v1, uint32(4+len(msg)))
	v1 = binary.BigEndian.AppendUint32(v1, crc32.ChecksumIEEE(msg))
	v1 = append(v1, msg...)

	cases := []struct {
		name      string
		topic     string
		partition int32
		records   []byte
		want      *kerr.Error
	}{
		{"bad crc", "bad", 0, corrupt, kerr.CorruptMessage},
		{"truncated", "bad", 0, good[:40], kerr.CorruptMessage},
		{"two batches", "bad", 0, twoBatches, kerr.InvalidRecord},
		{"magic 1", "bad", 0, v1, kerr.InvalidRecord},
		{"too large", "bad", 0, makeBatch(bytes.Repeat([]byte("x"), 2000)), kerr.MessageTooLarge},
		{"missing partition", "bad", 7, good, kerr.UnknownTopicOrPartition},
		{"missing topic", "nope", 0, good, kerr.UnknownTopicID}, // kgo sends Produce v13: by id
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code := produceRaw(t, b, cl, tc.topic, tc.partition, tc.records)
			if code != tc.want.Code {
				t.Fatalf("got %v, want %v", kerr.ErrorForCode(code), tc.want)
			}
		})
	}
	if got := endOffset(t, b, "bad", 0); got != 1 {
		t.Fatalf("end offset %d after rejected batches, want 1 (nothing appended)", got)
	}

	// Metadata for an illegal name: INVALID_TOPIC_EXCEPTION, nothing created.
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.AllowAutoTopicCreation = true
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("no spaces allowed")
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if mresp.Topics[0].ErrorCode != kerr.InvalidTopicException.Code || b.lookup("no spaces allowed") != nil {
		t.Fatalf("illegal name: %v", kerr.ErrorForCode(mresp.Topics[0].ErrorCode))
	}
}

func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	openBroker(t, dir)
	b2, err := Open(Config{DataDir: dir})
	if err == nil {
		b2.Close()
		t.Fatal("a second broker opened a data dir that is in use")
	}
}

func TestTopicNameValidation(t *testing.T) {
	long := string(bytes.Repeat([]byte("a"), 250))
	for _, n := range []string{"", ".", "..", "a/b", "a b", "ü", long} {
		if validateTopicName(n) == nil {
			t.Errorf("%q accepted", n)
		}
	}
	for _, n := range []string{"a", "A.b_c-9", long[:249], "..."} {
		if err := validateTopicName(n); err != nil {
			t.Errorf("%q rejected: %v", n, err)
		}
	}
}

// rawRoundTrip writes one request frame and reads one response body.
func rawRoundTrip(t *testing.T, addr string, key, version int16, body []byte) ([]byte, error) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	frame := binary.BigEndian.AppendUint16(nil, uint16(key))
	frame = binary.BigEndian.AppendUint16(frame, uint16(version))
	frame = binary.BigEndian.AppendUint32(frame, 7)
	frame = binary.BigEndian.AppendUint16(frame, 0xffff) // null client id
	if kmsg.RequestForKey(key) != nil {
		r := kmsg.RequestForKey(key)
		r.SetVersion(version)
		if r.IsFlexible() {
			frame = append(frame, 0)
		}
	}
	frame = append(frame, body...)
	if _, err := nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return nil, err
	}
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, resp); err != nil {
		return nil, err
	}
	if binary.BigEndian.Uint32(resp) != 7 {
		t.Fatalf("correlation id %d", binary.BigEndian.Uint32(resp))
	}
	return resp[4:], nil
}

func TestApiVersionsAndUnsupported(t *testing.T) {
	_, srv := newBroker(t)
	// KIP-511: an ApiVersions version above ours gets a v0 body with
	// UNSUPPORTED_VERSION and our ApiVersions range.
	body, err := rawRoundTrip(t, srv.addr(), 18, 9, []byte{0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0x00, 0x23, 0x00, 0x00, 0x00, 0x01, 0x00, 0x12, 0x00, 0x00, 0x00, 0x04}
	if !bytes.Equal(body, want) {
		t.Fatalf("ApiVersions v9 answer % x, want % x", body, want)
	}

	// Produce advertised from 0 (librdkafka), but v0-2 close the connection.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1.0"
	body, err = rawRoundTrip(t, srv.addr(), 18, 3, req.AppendTo(nil)[0:])
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v3: %v %d", err, resp.ErrorCode)
	}
	keys := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		keys[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if keys[0] != [2]int16{0, 13} || keys[1] != [2]int16{4, 18} || keys[18] != [2]int16{0, 4} {
		t.Fatalf("advertised produce %v fetch %v apiversions %v", keys[0], keys[1], keys[18])
	}
	if keys[11] != [2]int16{0, 9} {
		t.Fatalf("advertised JoinGroup %v, want v0-9", keys[11])
	}
	// KIP-848 groups: both keys and the group.version feature, which
	// clients check before speaking the consumer protocol.
	if keys[68] != [2]int16{0, 1} || keys[69] != [2]int16{0, 1} {
		t.Fatalf("advertised ConsumerGroupHeartbeat %v ConsumerGroupDescribe %v, want v0-1", keys[68], keys[69])
	}
	if len(resp.FinalizedFeatures) != 1 || resp.FinalizedFeatures[0].Name != "group.version" || resp.FinalizedFeatures[0].MaxVersionLevel != 1 {
		t.Fatalf("finalized features %+v, want group.version 1", resp.FinalizedFeatures)
	}

	preq := kmsg.NewPtrProduceRequest()
	preq.Version, preq.Acks = 2, 1
	if _, err := rawRoundTrip(t, srv.addr(), 0, 2, preq.AppendTo(nil)); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("produce v2: %v, want the connection closed", err)
	}
	// An unregistered key closes the connection too.
	if _, err := rawRoundTrip(t, srv.addr(), 76, 0, nil); err == nil {
		t.Fatal("ShareGroupHeartbeat answered")
	}
}
