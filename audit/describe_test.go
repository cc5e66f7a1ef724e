package audit

import (
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// makeBatch builds a real magic-2 record batch of n records, each with a
// value of valueLen bytes, the way a producer writes one.
func makeBatch(n, valueLen int) []byte {
	var recs []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Value: make([]byte, valueLen)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // length varint of a small record is one byte
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{
		Length:          int32(batchHeaderSize - logOverhead + len(recs)),
		Magic:           2,
		LastOffsetDelta: int32(n - 1),
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(n),
		Records:         recs,
	}
	return b.AppendTo(nil)
}

// roundTrip encodes a message and decodes it again, so that Describe
// sees exactly what the gateway would after decoding a frame.
func roundTrip[T interface {
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
	SetVersion(int16)
}](t *testing.T, v T, version int16, fresh T) T {
	t.Helper()
	v.SetVersion(version)
	fresh.SetVersion(version)
	if err := fresh.ReadFrom(v.AppendTo(nil)); err != nil {
		t.Fatalf("decode %T v%d: %v", v, version, err)
	}
	return fresh
}

func TestCountRecords(t *testing.T) {
	two := append(makeBatch(3, 10), makeBatch(4, 100)...)
	cases := []struct {
		name string
		b    []byte
		want int
	}{
		{"empty", nil, 0},
		{"one batch", makeBatch(5, 20), 5},
		{"two batches", two, 7},
		{"truncated second batch (fetch may end mid-batch)", two[:len(two)-10], 3},
		{"short header", makeBatch(5, 20)[:40], 0},
		{"message set v1", messageSetV1(3), 3},
	}
	for _, tc := range cases {
		if got := countRecords(tc.b); got != tc.want {
			t.Errorf("%s: countRecords = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func messageSetV1(n int) []byte {
	var out []byte
	for i := range n {
		m := kmsg.MessageV1{Offset: int64(i), Magic: 1, Value: []byte("v")}
		m.MessageSize = int32(len(m.AppendTo(nil)) - logOverhead)
		out = m.AppendTo(out)
	}
	return out
}

type fakeNames map[[16]byte]string

func (f fakeNames) TopicName(id [16]byte) (string, bool) { n, ok := f[id]; return n, ok }

func TestDescribeProduce(t *testing.T) {
	batch0, batch1 := makeBatch(3, 50), makeBatch(1, 27)
	txn := "txn-1"
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = &txn
	req.Acks = -1
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "orders", Partitions: []kmsg.ProduceRequestTopicPartition{
		{Partition: 0, Records: batch0}, {Partition: 1, Records: batch1},
	}}}
	req = roundTrip(t, req, 9, kmsg.NewPtrProduceRequest())

	resp := kmsg.NewPtrProduceResponse()
	resp.Topics = []kmsg.ProduceResponseTopic{{Topic: "orders", Partitions: []kmsg.ProduceResponseTopicPartition{
		{Partition: 0, BaseOffset: 42}, {Partition: 1, ErrorCode: kerr.NotLeaderForPartition.Code, BaseOffset: -1},
	}}}
	resp = roundTrip(t, resp, 9, kmsg.NewPtrProduceResponse())

	var rec Record
	Describe(&rec, req, resp, nil)
	want := []Topic{{Name: "orders", Partitions: []Partition{
		{Partition: 0, Records: 3, Bytes: len(batch0), Offset: 42},
		{Partition: 1, Records: 1, Bytes: len(batch1), Offset: NoOffset, ErrorCode: kerr.NotLeaderForPartition.Code},
	}}}
	if !reflect.DeepEqual(rec.Topics, want) {
		t.Fatalf("topics = %+v\nwant     %+v", rec.Topics, want)
	}
	if rec.API != "Produce" || rec.Key != 0 || rec.Version != 9 || rec.TransactionalID != txn || rec.Acks == nil || *rec.Acks != -1 {
		t.Fatalf("header fields: %+v", rec)
	}
	if !slices.Equal(rec.ErrorCodes, []int16{kerr.NotLeaderForPartition.Code}) {
		t.Fatalf("error codes = %v", rec.ErrorCodes)
	}
}

func TestDescribeProduceTopicIDs(t *testing.T) {
	id := [16]byte{1, 2, 3}
	unknown := [16]byte{9}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	req.Topics = []kmsg.ProduceRequestTopic{
		{TopicID: id, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 2, Records: makeBatch(2, 5)}}},
		{TopicID: unknown, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: makeBatch(1, 5)}}},
	}
	req = roundTrip(t, req, 13, kmsg.NewPtrProduceRequest())
	var rec Record
	Describe(&rec, req, nil, fakeNames{id: "payments"})
	if len(rec.Topics) != 2 || rec.Topics[0].Name != "payments" || rec.Topics[0].Partitions[0].Records != 2 {
		t.Fatalf("topics = %+v", rec.Topics)
	}
	if got := rec.Topics[1].Name; got != "id:CQAAAAAAAAAAAAAAAAAAAA" {
		t.Fatalf("unresolved id written as %q", got)
	}
}

func TestDescribeFetch(t *testing.T) {
	req := kmsg.NewPtrFetchRequest()
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "orders", Partitions: []kmsg.FetchRequestTopicPartition{
		{Partition: 0, FetchOffset: 100}, {Partition: 3, FetchOffset: 0},
	}}}
	req = roundTrip(t, req, 11, kmsg.NewPtrFetchRequest())
	data := append(makeBatch(4, 30), makeBatch(2, 30)...)
	resp := kmsg.NewPtrFetchResponse()
	resp.Topics = []kmsg.FetchResponseTopic{
		{Topic: "orders", Partitions: []kmsg.FetchResponseTopicPartition{
			{Partition: 0, RecordBatches: data}, {Partition: 3, ErrorCode: kerr.OffsetOutOfRange.Code},
		}},
		// A fetch session answers for a partition this request did not list.
		{Topic: "audit", Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 1, RecordBatches: makeBatch(1, 1)}}},
	}
	resp = roundTrip(t, resp, 11, kmsg.NewPtrFetchResponse())
	var rec Record
	Describe(&rec, req, resp, nil)
	want := []Topic{
		{Name: "orders", Partitions: []Partition{
			{Partition: 0, Offset: 100, Records: 6, Bytes: len(data)},
			{Partition: 3, Offset: 0, ErrorCode: kerr.OffsetOutOfRange.Code},
		}},
		{Name: "audit", Partitions: []Partition{{Partition: 1, Offset: NoOffset, Records: 1, Bytes: len(makeBatch(1, 1))}}},
	}
	if !reflect.DeepEqual(rec.Topics, want) {
		t.Fatalf("topics = %+v\nwant     %+v", rec.Topics, want)
	}
	if !slices.Equal(rec.ErrorCodes, []int16{kerr.OffsetOutOfRange.Code}) {
		t.Fatalf("error codes = %v", rec.ErrorCodes)
	}
}

func TestDescribeAdminAndGroups(t *testing.T) {
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "a", NumPartitions: 3, ReplicationFactor: 1}, {Topic: "b", NumPartitions: 1, ReplicationFactor: 1}}
	ctResp := kmsg.NewPtrCreateTopicsResponse()
	ctResp.Topics = []kmsg.CreateTopicsResponseTopic{{Topic: "a"}, {Topic: "b", ErrorCode: kerr.TopicAlreadyExists.Code}}

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group = "billing"
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 10}, {Partition: 5, Offset: 11}}}}
	ocResp := kmsg.NewPtrOffsetCommitResponse()
	ocResp.Topics = []kmsg.OffsetCommitResponseTopic{{Topic: "orders", Partitions: []kmsg.OffsetCommitResponseTopicPartition{{Partition: 0}, {Partition: 5, ErrorCode: kerr.OffsetMetadataTooLarge.Code}}}}

	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group = "billing"
	jg.ProtocolType = "consumer"
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
	jgResp := kmsg.NewPtrJoinGroupResponse()
	jgResp.ErrorCode = kerr.MemberIDRequired.Code

	txn := "tx-7"
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID = &txn

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"}, {ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"}}

	acl := kmsg.NewPtrCreateACLsRequest()
	acl.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "orders", Principal: "User:alice", Host: "*"}}

	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"g1", "g2"}

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"old"}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType = 1
	fc.CoordinatorKeys = []string{"tx-9"}

	apt := kmsg.NewPtrAddPartitionsToTxnRequest()
	apt.TransactionalID = "tx-3"
	apt.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "orders", Partitions: []int32{1, 2}}}

	cases := []struct {
		name    string
		version int16
		req     kmsg.Request
		resp    kmsg.Response
		want    Record
	}{
		{"CreateTopics", 5, ct, ctResp, Record{
			Topics:     []Topic{{Name: "a"}, {Name: "b"}},
			Resources:  []string{"topic:a", "topic:b"},
			ErrorCodes: []int16{kerr.TopicAlreadyExists.Code},
		}},
		{"OffsetCommit", 8, oc, ocResp, Record{
			Group: "billing",
			Topics: []Topic{{Name: "orders", Partitions: []Partition{
				{Partition: 0, Offset: NoOffset}, {Partition: 5, Offset: NoOffset, ErrorCode: kerr.OffsetMetadataTooLarge.Code},
			}}},
			ErrorCodes: []int16{kerr.OffsetMetadataTooLarge.Code},
		}},
		{"JoinGroup", 9, jg, jgResp, Record{Group: "billing", ErrorCodes: []int16{kerr.MemberIDRequired.Code}}},
		{"InitProducerID", 4, ip, kmsg.NewPtrInitProducerIDResponse(), Record{TransactionalID: "tx-7"}},
		{"DescribeConfigs", 4, dc, nil, Record{Resources: []string{"topic:orders", "broker:1"}}},
		{"CreateACLs", 3, acl, nil, Record{Resources: []string{"acl:topic:orders"}}},
		{"DeleteGroups", 2, dg, nil, Record{Group: "g1", Resources: []string{"group:g1", "group:g2"}}},
		{"DeleteTopics v5 names", 5, dt, nil, Record{Topics: []Topic{{Name: "old"}}, Resources: []string{"topic:old"}}},
		{"FindCoordinator v4 txn", 4, fc, nil, Record{TransactionalID: "tx-9"}},
		{"AddPartitionsToTxn v3", 3, apt, nil, Record{TransactionalID: "tx-3", Topics: []Topic{{Name: "orders", Partitions: []Partition{{Partition: 1, Offset: NoOffset}, {Partition: 2, Offset: NoOffset}}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := decodeReq(t, tc.req, tc.version)
			var resp kmsg.Response
			if tc.resp != nil {
				resp = decodeResp(t, tc.resp, tc.version)
			}
			var rec Record
			Describe(&rec, req, resp, nil)
			tc.want.API, tc.want.Key, tc.want.Version = APIName(tc.req.Key()), tc.req.Key(), tc.version
			if !reflect.DeepEqual(rec, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", rec, tc.want)
			}
		})
	}
}

func decodeReq(t *testing.T, r kmsg.Request, v int16) kmsg.Request {
	t.Helper()
	r.SetVersion(v)
	out := kmsg.RequestForKey(r.Key())
	out.SetVersion(v)
	if err := out.ReadFrom(r.AppendTo(nil)); err != nil {
		t.Fatalf("decode %T v%d: %v", r, v, err)
	}
	return out
}

func decodeResp(t *testing.T, r kmsg.Response, v int16) kmsg.Response {
	t.Helper()
	r.SetVersion(v)
	out := kmsg.ResponseForKey(r.Key())
	out.SetVersion(v)
	if err := out.ReadFrom(r.AppendTo(nil)); err != nil {
		t.Fatalf("decode %T v%d: %v", r, v, err)
	}
	return out
}

func TestDescribeIgnoresMismatchedResponse(t *testing.T) {
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group = "g"
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.ErrorCode = 27
	var rec Record
	Describe(&rec, jg, resp, nil)
	if rec.Group != "g" || len(rec.ErrorCodes) != 0 {
		t.Fatalf("record = %+v", rec)
	}
	Describe(&rec, nil, nil, nil) // no request: nothing to do, no panic
}

func TestClientSoftware(t *testing.T) {
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "franz-go", "1.22.3"
	req := decodeReq(t, av, 3)
	var rec Record
	Describe(&rec, req, nil, nil)
	if rec.SoftwareName != "franz-go" || rec.SoftwareVersion != "1.22.3" || rec.API != "ApiVersions" {
		t.Fatalf("record = %+v", rec)
	}
	// v2 has no software fields.
	if _, _, ok := ClientSoftware(decodeReq(t, av, 2)); ok {
		t.Fatal("ClientSoftware found a name in ApiVersions v2")
	}
}
