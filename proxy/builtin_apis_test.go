package proxy_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/broker"
	"github.com/tollgate-kafka/tollgate/broker/storage"
	"github.com/tollgate-kafka/tollgate/proxy"
)

// startBuiltinNode starts the gateway over a built-in broker with the
// given node id (broker.node_id) and returns the broker too.
func startBuiltinNode(t testing.TB, node int32) (*proxy.Server, *broker.Broker) {
	t.Helper()
	b, err := broker.Open(broker.Config{
		DataDir:          t.TempDir(),
		Fsync:            storage.FsyncNever,
		AutoCreateTopics: true,
		NodeID:           node,
		Logger:           testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("broker close: %v", err)
		}
	})
	return startServer(t, proxy.Options{
		Listeners: []proxy.ListenerOptions{{Name: "test", Listen: "127.0.0.1:0"}},
		Local:     proxy.LocalFunc(func(remote string) proxy.LocalConn { return b.NewConn(remote) }),
		Logger:    testLogger(t),
	}), b
}

// errClosed is what walkRoundTrip returns when the gateway closed the
// connection instead of answering.
var errClosed = errors.New("connection closed without a response")

// walkRoundTrip sends req at its set version on a new connection and
// decodes the answer; errClosed if the connection closed instead.
func walkRoundTrip(addr string, req kmsg.Request) (kmsg.Response, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return nil, err
	}
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("api-walk"))
	if _, err := c.Write(f.AppendRequest(nil, req, 7)); err != nil {
		return nil, errClosed
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("no response: %w", err)
		}
		return nil, errClosed
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, frame); err != nil {
		return nil, fmt.Errorf("truncated response: %w", err)
	}
	if len(frame) < 4 || int32(binary.BigEndian.Uint32(frame)) != 7 {
		return nil, fmt.Errorf("bad correlation id in %x", frame[:min(len(frame), 4)])
	}
	body := frame[4:]
	if req.IsFlexible() && req.Key() != apis.ApiVersions {
		// Response header v1: its tagged fields, skipped.
		b := kbin(body)
		n := b.uvarint()
		for range n {
			b.uvarint() // tag
			b.span(int(b.uvarint()))
		}
		if b.err != nil {
			return nil, fmt.Errorf("response header: %w", b.err)
		}
		body = b.rest
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	return resp, nil
}

// kbinReader is a tiny reader for the response header's tagged fields.
type kbinReader struct {
	rest []byte
	err  error
}

func kbin(b []byte) *kbinReader { return &kbinReader{rest: b} }

func (r *kbinReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.rest)
	if n <= 0 {
		r.err = errors.New("bad uvarint")
		return 0
	}
	r.rest = r.rest[n:]
	return v
}

func (r *kbinReader) span(n int) []byte {
	if n > len(r.rest) {
		r.err = errors.New("short tag")
		return nil
	}
	s := r.rest[:n]
	r.rest = r.rest[n:]
	return s
}

// advertised asks the gateway which keys and versions it offers.
func advertised(t testing.TB, addr string) map[int16][2]int16 {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "api-walk", "1"
	resp, err := walkRoundTrip(addr, req)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if av.ErrorCode != 0 {
		t.Fatalf("ApiVersions: %v", kerr.ErrorForCode(av.ErrorCode))
	}
	m := map[int16][2]int16{}
	for _, k := range av.ApiKeys {
		m[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return m
}

// walkRequest is key at version with kmsg's defaults, adjusted only where
// a default asks for no answer at all.
func walkRequest(key, version int16) kmsg.Request {
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	if p, ok := req.(*kmsg.ProduceRequest); ok {
		p.Acks = -1 // acks=0 is answered with nothing, by design
	}
	return req
}

// TestBuiltinAnswersEveryAdvertisedAPI walks the apis table: every key and
// version the gateway over the built-in broker advertises gets an answer
// that decodes, for a request built with kmsg's defaults; every key it
// does not advertise closes the connection, as Kafka closes it for a key
// it has not enabled; an ApiVersions version from the future gets the
// KIP-511 answer. Node 1, as kafka-go's test suite expects.
func TestBuiltinAnswersEveryAdvertisedAPI(t *testing.T) {
	srv, _ := startBuiltinNode(t, 1)
	addr := srv.Addr(0).String()
	adm := kadm.NewClient(newClient(t, srv, nil))
	if _, err := adm.CreateTopic(ctxT(t, 10*time.Second), 2, 1, nil, "walk"); err != nil {
		t.Fatal(err)
	}
	offered := advertised(t, addr)
	var walked, refused int
	for _, info := range apis.All() {
		key := info.Key
		if kmsg.RequestForKey(key) == nil {
			continue
		}
		vr, ok := offered[key]
		if !ok {
			// Not advertised: closed, as Kafka's SocketServer closes a key
			// its listener has not enabled.
			_, err := walkRoundTrip(addr, walkRequest(key, 0))
			if !errors.Is(err, errClosed) {
				t.Errorf("%s (%d) is not advertised but was answered (err %v); Kafka closes the connection", info.Name, key, err)
			}
			refused++
			continue
		}
		for v := vr[0]; v <= vr[1]; v++ {
			_, err := walkRoundTrip(addr, walkRequest(key, v))
			if key == apis.Produce && v <= 2 {
				// Advertised from v0 for librdkafka (KAFKA-18659), closed
				// as Kafka 4.0 closes message-set produces
				// (broker/00_produce.go, docs/protocol.md §7.2).
				if !errors.Is(err, errClosed) {
					t.Errorf("Produce v%d: %v, want the connection closed", v, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s (%d) v%d: %v", info.Name, key, v, err)
			}
			walked++
		}
	}
	t.Logf("%d advertised key versions answered, %d keys not advertised and closed", walked, refused)

	// The keys of issue 20 are advertised (none of them may close).
	for _, k := range []int16{apis.DescribeACLs, apis.CreateACLs, apis.DeleteACLs, apis.AlterReplicaLogDirs,
		apis.ElectLeaders, apis.AlterPartitionAssignments, apis.ListPartitionReassignments,
		apis.DescribeClientQuotas, apis.AlterClientQuotas, apis.DescribeUserSCRAMCredentials, apis.AlterUserSCRAMCredentials,
		apis.CreateDelegationToken, apis.RenewDelegationToken, apis.ExpireDelegationToken, apis.DescribeDelegationToken} {
		if _, ok := offered[k]; !ok {
			t.Errorf("%s (%d) is not advertised", apis.Name(k), k)
		}
	}

	// KIP-511: a newer ApiVersions than ours gets a v0 UNSUPPORTED_VERSION
	// answer with our ApiVersions range.
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	frame := []byte{0, byte(apis.ApiVersions), 0, 99, 0, 0, 0, 1, 0, 1, 'x', 0, 2, 'a', 2, '1', 0}
	c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("ApiVersions v99: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	v0 := kmsg.NewPtrApiVersionsResponse()
	if err := v0.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
	if v0.ErrorCode != kerr.UnsupportedVersion.Code || len(v0.ApiKeys) != 1 || v0.ApiKeys[0].ApiKey != apis.ApiVersions {
		t.Fatalf("ApiVersions v99: want UNSUPPORTED_VERSION with the ApiVersions range, got %+v", v0)
	}
}

// TestBuiltinReplicaAdmin: the single-node answers to leader election,
// partition reassignment and replica log dirs, through kadm and the
// gateway, with the broker as node 1 (the id kadm addresses it by).
func TestBuiltinReplicaAdmin(t *testing.T) {
	srv, _ := startBuiltinNode(t, 1)
	cl := newClient(t, srv, nil, kgo.RetryTimeout(5*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := ctxT(t, 30*time.Second)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "ra"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ra", Partition: 0, Value: []byte("0123456789")}).First(); err != nil {
		t.Fatal(err)
	}

	// Node ids pass 1:1: Metadata names node 1 as broker and leader.
	md, err := adm.Metadata(ctx, "ra")
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].NodeID != 1 || md.Controller != 1 || md.Topics["ra"].Partitions[0].Leader != 1 {
		t.Fatalf("metadata: brokers %+v controller %d", md.Brokers, md.Controller)
	}

	// ElectLeaders: nothing to elect; an unknown partition is named.
	el, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"ra": {0: {}, 1: {}, 9: {}}, "nope": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]error{0: kerr.ElectionNotNeeded, 1: kerr.ElectionNotNeeded, 9: kerr.UnknownTopicOrPartition} {
		if got := el["ra"][p].Err; !errors.Is(got, want) {
			t.Errorf("elect ra/%d: %v, want %v", p, got, want)
		}
	}
	if got := el["nope"][0].Err; !errors.Is(got, kerr.UnknownTopicOrPartition) {
		t.Errorf("elect nope/0: %v", got)
	}
	all, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	for topic, ps := range all {
		if len(ps) != 0 {
			t.Errorf("elect all: %s has results %+v; partitions that need no election are left out", topic, ps)
		}
	}

	// An unknown election type fails the request; a repeated partition is
	// answered once.
	bad := kmsg.NewPtrElectLeadersRequest()
	bt := kmsg.NewElectLeadersRequestTopic()
	bt.Topic, bt.Partitions = "ra", []int32{0, 0, 1}
	bad.Topics = []kmsg.ElectLeadersRequestTopic{bt, bt}
	bad.ElectionType = 7
	bresp, err := bad.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if bresp.ErrorCode != kerr.InvalidRequest.Code || len(bresp.Topics) != 1 || len(bresp.Topics[0].Partitions) != 2 {
		t.Errorf("election type 7: %+v, want INVALID_REQUEST for ra/0 and ra/1 once each", bresp)
	}

	// Reassignment: [1] is the current assignment; anything else is refused.
	ar, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{"ra": {0: {1}, 1: {2}}, "nope": {0: {1}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := ar["ra"][0].Err; e != nil {
		t.Errorf("reassign ra/0 to [1]: %v", e)
	}
	if e := ar["ra"][1].Err; !errors.Is(e, kerr.InvalidReplicaAssignment) {
		t.Errorf("reassign ra/1 to [2]: %v, want INVALID_REPLICA_ASSIGNMENT", e)
	}
	if e := ar["nope"][0].Err; !errors.Is(e, kerr.UnknownTopicOrPartition) {
		t.Errorf("reassign nope/0: %v, want UNKNOWN_TOPIC_OR_PARTITION", e)
	}
	for _, replicas := range [][]int32{{}, {1, 1}} {
		ar, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{"ra": {0: replicas}})
		if err != nil {
			t.Fatal(err)
		}
		if e := ar["ra"][0].Err; !errors.Is(e, kerr.InvalidReplicaAssignment) {
			t.Errorf("reassign ra/0 to %v: %v, want INVALID_REPLICA_ASSIGNMENT", replicas, e)
		}
	}
	cancel := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = "ra"
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = 0, nil
	rt.Partitions = append(rt.Partitions, rp)
	cancel.Topics = append(cancel.Topics, rt)
	cresp, err := cancel.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if e := kerr.ErrorForCode(cresp.Topics[0].Partitions[0].ErrorCode); !errors.Is(e, kerr.NoReassignmentInProgress) {
		t.Errorf("cancel ra/0: %v, want NO_REASSIGNMENT_IN_PROGRESS", e)
	}
	lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"ra": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lr) != 0 {
		t.Errorf("reassignments in progress: %+v", lr)
	}

	// Delegation tokens are not enabled.
	if _, err := adm.DescribeDelegationTokens(ctx); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
		t.Errorf("describe delegation tokens: %v, want DELEGATION_TOKEN_AUTH_DISABLED", err)
	}

	// Log dirs: one dir, the data dir, with the partition's real size; a
	// move to it is done already, a move elsewhere LOG_DIR_NOT_FOUND.
	dirs, err := adm.DescribeBrokerLogDirs(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 1 {
		t.Fatalf("log dirs: %+v", dirs)
	}
	var dir string
	for d := range dirs {
		dir = d
	}
	if p, ok := dirs.Lookup(dir, "ra", 0); !ok || p.Size <= 10 {
		t.Errorf("ra/0 in %s: %+v (found %v), want the bytes written", dir, p, ok)
	}
	var move kadm.AlterReplicaLogDirsReq
	move.Add(dir, kadm.TopicsSet{"ra": {0: {}}, "nope": {0: {}}})
	move.Add("/elsewhere", kadm.TopicsSet{"ra": {1: {}}})
	mr, err := adm.AlterBrokerReplicaLogDirs(ctx, 1, move)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		topic string
		p     int32
		want  error
	}{{"ra", 0, nil}, {"nope", 0, kerr.UnknownTopicOrPartition}, {"ra", 1, kerr.LogDirNotFound}} {
		if got := mr[c.topic][c.p].Err; !errors.Is(got, c.want) && got != c.want {
			t.Errorf("move %s/%d: %v, want %v", c.topic, c.p, got, c.want)
		}
	}
}
