package broker

import (
	"encoding/binary"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetsView is __consumer_offsets read back and decoded with kmsg: the
// latest record of every key, as a compacting reader (Burrow) keeps it.
type offsetsView struct {
	offsets map[string]map[string]map[int32]*kmsg.OffsetCommitValue // nil value: tombstone
	groups  map[string]*kmsg.GroupMetadataValue                     // nil: tombstone
	end     int64
}

// decodeOffsetsRecord applies one __consumer_offsets record to v.
func (v *offsetsView) apply(t *testing.T, key, val []byte) {
	t.Helper()
	if len(key) < 2 {
		t.Fatalf("__consumer_offsets key %x too short", key)
	}
	switch ver := int16(binary.BigEndian.Uint16(key)); ver {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			t.Fatalf("decode OffsetCommitKey %x: %v", key, err)
		}
		var oc *kmsg.OffsetCommitValue
		if val != nil {
			oc = new(kmsg.OffsetCommitValue)
			if err := oc.ReadFrom(val); err != nil {
				t.Fatalf("decode OffsetCommitValue %x: %v", val, err)
			}
		}
		if v.offsets[k.Group] == nil {
			v.offsets[k.Group] = map[string]map[int32]*kmsg.OffsetCommitValue{}
		}
		if v.offsets[k.Group][k.Topic] == nil {
			v.offsets[k.Group][k.Topic] = map[int32]*kmsg.OffsetCommitValue{}
		}
		v.offsets[k.Group][k.Topic][k.Partition] = oc
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			t.Fatalf("decode GroupMetadataKey %x: %v", key, err)
		}
		var gm *kmsg.GroupMetadataValue
		if val != nil {
			gm = new(kmsg.GroupMetadataValue)
			if err := gm.ReadFrom(val); err != nil {
				t.Fatalf("decode GroupMetadataValue %x: %v", val, err)
			}
		}
		v.groups[k.Group] = gm
	default:
		t.Fatalf("__consumer_offsets key version %d", ver)
	}
}

// readOffsetsTopic reads __consumer_offsets with a kgo consumer from the
// start to its current end.
func readOffsetsTopic(t *testing.T, addr string) offsetsView {
	t.Helper()
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, addr))
	ends, err := adm.ListEndOffsets(ctx, offsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	v := offsetsView{offsets: map[string]map[string]map[int32]*kmsg.OffsetCommitValue{}, groups: map[string]*kmsg.GroupMetadataValue{}}
	end, _ := ends.Lookup(offsetsTopic, 0)
	v.end = end.Offset
	if v.end == 0 {
		return v
	}
	cl := newClient(t, addr, kgo.ConsumeTopics(offsetsTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	for last := int64(-1); last < v.end-1; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("read __consumer_offsets: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < v.end {
				v.apply(t, r.Key, r.Value)
			}
			last = r.Offset
		})
	}
	return v
}

// waitOffsetsTopic rereads __consumer_offsets until ok accepts it (the
// mirror appends asynchronously) or the test context ends.
func waitOffsetsTopic(t *testing.T, addr string, ok func(offsetsView) error) offsetsView {
	t.Helper()
	ctx := testCtx(t)
	for {
		v := readOffsetsTopic(t, addr)
		err := ok(v)
		if err == nil {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("__consumer_offsets never matched: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// matchesFetch reports whether the topic's latest offsets of group equal
// what OffsetFetch (kadm.FetchOffsets) returns.
func matchesFetch(v offsetsView, want kadm.OffsetResponses, group string) error {
	n := 0
	for topic, ps := range want {
		for p, o := range ps {
			got := v.offsets[group][topic][p]
			if got == nil {
				return fmt.Errorf("%s %s/%d: no record (want offset %d)", group, topic, p, o.At)
			}
			if got.Offset != o.At || got.LeaderEpoch != o.LeaderEpoch || got.Metadata != o.Metadata {
				return fmt.Errorf("%s %s/%d: record %+v, OffsetFetch %+v", group, topic, p, got, o.Offset)
			}
			n++
		}
	}
	live := 0
	for _, ps := range v.offsets[group] {
		for _, oc := range ps {
			if oc != nil {
				live++
			}
		}
	}
	if live != n || n == 0 {
		return fmt.Errorf("%s: %d live offset records, OffsetFetch has %d", group, live, n)
	}
	return nil
}

// TestOffsetsTopicKafkaSchema: offsets committed by a kgo consumer group
// and by kadm.CommitOffsets appear in __consumer_offsets as Kafka's
// OffsetCommitKey/Value records whose latest value per partition equals
// OffsetFetch; the classic group's GroupMetadataValue names its member and
// protocol; a deleted group's offsets and metadata are tombstoned; sarama
// reads the same records; a restart rewrites the current state.
func TestOffsetsTopicKafkaSchema(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	addr := startGateway(t, b)
	const topic = "lagged"
	createTopic(t, addr, topic, 3, nil)
	prod := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	produceValues(t, prod, topic, "v", 0, 30)
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, addr))

	// A classic consumer group reads everything and commits.
	cons := newClient(t, addr, kgo.ConsumerGroup("burrow-watched"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.ClientID("lag-consumer"))
	for n := 0; n < 30; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		n += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	// A standalone group commits through kadm, with metadata.
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 7, LeaderEpoch: 0, Metadata: "m"})
	os.Add(kadm.Offset{Topic: topic, Partition: 2, At: 3, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "admin-set", os); err != nil {
		t.Fatal(err)
	}
	watched, err := adm.FetchOffsets(ctx, "burrow-watched")
	if err != nil {
		t.Fatal(err)
	}
	adminSet, err := adm.FetchOffsets(ctx, "admin-set")
	if err != nil {
		t.Fatal(err)
	}
	memberID, _ := cons.GroupMetadata()
	v := waitOffsetsTopic(t, addr, func(v offsetsView) error {
		if err := matchesFetch(v, watched, "burrow-watched"); err != nil {
			return err
		}
		if err := matchesFetch(v, adminSet, "admin-set"); err != nil {
			return err
		}
		gm := v.groups["burrow-watched"]
		if gm == nil || len(gm.Members) != 1 {
			return fmt.Errorf("group metadata %+v", gm)
		}
		return nil
	})
	gm := v.groups["burrow-watched"]
	if gm.Version != groupMetadataValueVersion || gm.ProtocolType != "consumer" || gm.Protocol == nil || *gm.Protocol != "cooperative-sticky" ||
		gm.Leader == nil || *gm.Leader != memberID || gm.Members[0].MemberID != memberID || gm.Members[0].ClientID != "lag-consumer" ||
		len(gm.Members[0].Subscription) == 0 || len(gm.Members[0].Assignment) == 0 {
		t.Fatalf("group metadata %+v, member %s", gm, memberID)
	}
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(gm.Members[0].Subscription); err != nil || len(sub.Topics) != 1 || sub.Topics[0] != topic {
		t.Fatalf("subscription %+v: %v", sub, err)
	}
	if oc := v.offsets["admin-set"][topic][0]; oc.Version != offsetCommitValueVersion || oc.CommitTimestamp == 0 {
		t.Fatalf("offset value %+v", oc)
	}

	// Compacted, with Kafka's offsets.topic.segment.bytes.
	rcs, err := adm.DescribeTopicConfigs(ctx, offsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(offsetsTopic, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfgs := map[string]string{}
	for _, c := range rc.Configs {
		cfgs[c.Key] = c.MaybeValue()
	}
	if cfgs["cleanup.policy"] != "compact" || cfgs["segment.bytes"] != offsetsTopicSegmentBytes {
		t.Fatalf("__consumer_offsets configs: cleanup.policy %q, segment.bytes %q", cfgs["cleanup.policy"], cfgs["segment.bytes"])
	}

	// Deleting a group tombstones its offsets; the group leaving empties
	// its metadata.
	cons.Close()
	if _, err := adm.DeleteGroup(ctx, "admin-set"); err != nil {
		t.Fatal(err)
	}
	v = waitOffsetsTopic(t, addr, func(v offsetsView) error {
		for p, oc := range v.offsets["admin-set"][topic] {
			if oc != nil {
				return fmt.Errorf("admin-set %s/%d not tombstoned: %+v", topic, p, oc)
			}
		}
		if gm := v.groups["burrow-watched"]; gm == nil || len(gm.Members) != 0 || gm.Protocol != nil {
			return fmt.Errorf("left group's metadata %+v", gm)
		}
		return nil
	})
	if len(v.offsets["admin-set"][topic]) != 2 {
		t.Fatalf("admin-set records %+v", v.offsets["admin-set"])
	}

	// A non-franz reader (sarama) sees the same records.
	seen := readSarama(t, addr, offsetsTopic, v.end)
	sv := offsetsView{offsets: map[string]map[string]map[int32]*kmsg.OffsetCommitValue{}, groups: map[string]*kmsg.GroupMetadataValue{}}
	for k, rs := range seen {
		sv.apply(t, []byte(k), rs[len(rs)-1].value)
	}
	if err := matchesFetch(sv, watched, "burrow-watched"); err != nil {
		t.Fatalf("sarama: %v", err)
	}

	// And librdkafka (kcat) reads every record, keys and values in Kafka's
	// encoding.
	if _, err := exec.LookPath("kcat"); err == nil {
		out, err := exec.CommandContext(ctx, "kcat", "-b", addr, "-C", "-t", offsetsTopic, "-o", "beginning", "-e", "-q",
			"-f", "%o %K %S\n").CombinedOutput()
		if err != nil {
			t.Fatalf("kcat: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if int64(len(lines)) != v.end || !strings.HasPrefix(lines[len(lines)-1], fmt.Sprint(v.end-1, " ")) {
			t.Fatalf("kcat read %d records, want %d:\n%s", len(lines), v.end, out)
		}
	} else {
		t.Log("kcat not installed; sarama only")
	}

	// A restart rewrites the live state (what a full queue lost comes back).
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := openBroker(t, dir)
	addr2 := startGateway(t, b2)
	after := readOffsetsTopic(t, addr2)
	if after.end <= v.end {
		t.Fatalf("restart appended nothing: end %d, was %d", after.end, v.end)
	}
	if err := matchesFetch(after, watched, "burrow-watched"); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if b2.OffsetsTopicDropped() != 0 {
		t.Fatalf("dropped %d", b2.OffsetsTopicDropped())
	}
}

// TestOffsetsMirrorQueueFullDrops: a full queue drops and counts, never
// blocks.
func TestOffsetsMirrorQueueFullDrops(t *testing.T) {
	b := openBroker(t, t.TempDir())
	m := &offsetsMirror{b: b, q: make(chan []mirrorRecord, 1)}
	rec := offsetCommitRecord("g", "t", 0, &committed{Offset: 1})
	m.enqueue([]mirrorRecord{rec})
	m.enqueue([]mirrorRecord{rec, rec})
	if got := m.dropped.Load(); got != 2 {
		t.Fatalf("dropped %d, want 2", got)
	}
}

// TestOffsetsTopicKIP848AndTxn: offsets committed by a KIP-848 kgo
// consumer and by a kgo GroupTransactSession (TxnOffsetCommit, applied on
// EndTxn commit) reach __consumer_offsets equal to OffsetFetch; KIP-848
// groups write no classic GroupMetadataValue.
func TestOffsetsTopicKIP848AndTxn(t *testing.T) {
	b := cgBroker(t)
	addr := startGateway(t, b)
	const in, out = "src848", "dst848"
	createTopic(t, addr, in, 2, nil)
	createTopic(t, addr, out, 1, nil)
	produceValues(t, newClient(t, addr, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), in, "v", 0, 20)
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, addr))

	cons := newClient(t, addr, kgo.ConsumerGroup("new-protocol"), kgo.ConsumeTopics(in), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	for n := 0; n < 20; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		n += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("eos"), kgo.ConsumerGroup("eos-group"),
		kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for n := 0; n < 20; {
		fs := sess.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: out, Value: r.Value}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil || !committed {
			t.Fatalf("end transaction: committed %v, %v", committed, err)
		}
		n += fs.NumRecords()
	}
	for _, g := range []string{"new-protocol", "eos-group"} {
		want, err := adm.FetchOffsets(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		v := waitOffsetsTopic(t, addr, func(v offsetsView) error { return matchesFetch(v, want, g) })
		if g == "new-protocol" && v.groups[g] != nil {
			t.Fatalf("KIP-848 group has classic metadata %+v", v.groups[g])
		}
	}
}

// BenchmarkOffsetCommitMirror: OffsetCommit (10 partitions, standalone
// group, FsyncNever) with the __consumer_offsets mirror on, beside the
// same broker with it off, in one run.
//
//	go test -run '^$' -bench OffsetCommitMirror -benchtime 20000x ./broker
func BenchmarkOffsetCommitMirror(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("mirror=%v", on), func(b *testing.B) {
			br := openBroker(b, b.TempDir())
			addr := startGateway(b, br)
			createTopic(b, addr, "bench", 10, nil)
			if !on {
				br.mirror = nil // enqueue on nil does nothing
			}
			c := br.NewConn("bench")
			defer c.Close()
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version, req.Group, req.Generation = 8, "bench-group", -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = "bench"
			for p := range int32(10) {
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
			b.ResetTimer()
			for i := range b.N {
				for p := range rt.Partitions {
					req.Topics[0].Partitions[p].Offset = int64(i)
				}
				resp := mustCall[*kmsg.OffsetCommitResponse](b, c, req)
				if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
					b.Fatalf("commit error %d", ec)
				}
			}
			b.ReportMetric(float64(br.OffsetsTopicDropped()), "dropped")
		})
	}
}

// TestOffsetsMirrorOversized: records are split into batches under the
// topic's max.message.bytes; one record over it is dropped and counted,
// and the records around it are still written and readable.
func TestOffsetsMirrorOversized(t *testing.T) {
	b := openBroker(t, t.TempDir())
	addr := startGateway(t, b)
	big := make([]byte, 300<<10)
	huge := make([]byte, 2<<20)
	var recs []mirrorRecord
	for i := range 3 {
		recs = append(recs, mirrorRecord{key: groupMetadataKey(fmt.Sprint("big", i)), val: big})
	}
	recs = append(recs, mirrorRecord{key: groupMetadataKey("huge"), val: huge})
	recs = append(recs, offsetCommitRecord("after", "t", 0, &committed{Offset: 9, LeaderEpoch: -1}))
	if got := batchLen(recs); got != 1 {
		t.Fatalf("batchLen of 300 KiB records = %d, want 1", got)
	}
	before := readOffsetsTopic(t, addr).end
	b.mirror.write(recs)
	if d := b.OffsetsTopicDropped(); d != 1 {
		t.Fatalf("dropped %d, want 1", d)
	}
	cl := newClient(t, addr, kgo.ConsumeTopics(offsetsTopic), kgo.ConsumeResetOffset(kgo.NewOffset().At(before)), kgo.FetchMaxBytes(8<<20))
	keys := map[string]int{}
	for n := 0; n < 4; {
		fs := cl.PollFetches(testCtx(t))
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { keys[string(r.Key[2:])] = len(r.Value); n++ })
	}
	if len(keys) != 4 || keys["\x00\x04big0"] != len(big) || keys["\x00\x05after\x00\x01t\x00\x00\x00\x00"] == 0 {
		t.Fatalf("records read: %v", keys)
	}
}

// TestOffsetsTopicCompacted: the cleaner compacts __consumer_offsets like
// any compact topic: after 300 commits of one partition and a cleaning,
// far fewer records remain and the latest still equals OffsetFetch.
func TestOffsetsTopicCompacted(t *testing.T) {
	b := openBroker(t, t.TempDir(), manualCleaner)
	addr := startGateway(t, b)
	createTopic(t, addr, "churn", 1, nil)
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, addr))
	alter := []kadm.AlterConfig{{Name: "segment.bytes", Value: kadm.StringPtr("2048")},
		{Name: "min.cleanable.dirty.ratio", Value: kadm.StringPtr("0.01")}}
	if _, err := adm.AlterTopicConfigs(ctx, alter, offsetsTopic); err != nil {
		t.Fatal(err)
	}
	const commits = 300
	for i := range commits {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "churn", Partition: 0, At: int64(i), LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, "churner", os); err != nil {
			t.Fatal(err)
		}
	}
	want, err := adm.FetchOffsets(ctx, "churner")
	if err != nil {
		t.Fatal(err)
	}
	waitOffsetsTopic(t, addr, func(v offsetsView) error { return matchesFetch(v, want, "churner") })
	// The mirror appends what queued up as one batch: on a loaded
	// machine most of the commits can land in one large batch in the
	// active segment, which no cleaner touches. One more commit, appended
	// once that batch is visible, rolls it into a cleanable segment.
	var last kadm.Offsets
	last.Add(kadm.Offset{Topic: "churn", Partition: 0, At: commits, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "churner", last); err != nil {
		t.Fatal(err)
	}
	if want, err = adm.FetchOffsets(ctx, "churner"); err != nil {
		t.Fatal(err)
	}
	waitOffsetsTopic(t, addr, func(v offsetsView) error { return matchesFetch(v, want, "churner") })
	if n := b.cleanAll(time.Now(), true); n == 0 {
		t.Fatal("cleaner cleaned nothing")
	}
	recs := readToEnd(t, addr, offsetsTopic, 0)
	if len(recs) >= commits/2 {
		t.Fatalf("%d records after cleaning %d commits", len(recs), commits)
	}
	v := offsetsView{offsets: map[string]map[string]map[int32]*kmsg.OffsetCommitValue{}, groups: map[string]*kmsg.GroupMetadataValue{}}
	for _, r := range recs {
		v.apply(t, r.Key, r.Value)
	}
	if err := matchesFetch(v, want, "churner"); err != nil {
		t.Fatalf("after cleaning: %v", err)
	}
}
