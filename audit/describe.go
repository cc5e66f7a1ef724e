package audit

import (
	"encoding/base64"
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicNames resolves topic ids (KIP-516) to names. Requests at recent
// versions (Produce v13+, Fetch v13+, and others) carry ids instead of
// names; the gateway learns the mapping from Metadata responses.
type TopicNames interface {
	TopicName(id [16]byte) (string, bool)
}

// Describe fills the full-level details of rec from a decoded request
// and, when there is one, its decoded response: topics and partitions,
// record counts and bytes for Produce (from batch headers, nothing is
// decompressed), fetch offsets and bytes returned, the resources an admin
// request touches, the group or transactional id, acks, and the distinct
// non-zero error codes of the response. names may be nil; an id that
// cannot be resolved is written as "id:" plus Kafka's base64 form.
//
// Produce and Fetch, the hot APIs, are described by typed code. Every
// other API is described by walking the kmsg struct by field name
// (Topic, TopicID, Partition, Partitions, Group, TransactionalID,
// ResourceType/ResourceName, ErrorCode), which covers APIs and versions
// added to kmsg later without a change here.
//
// Describe never panics on any request or response kmsg can decode, and
// ignores a response whose key differs from the request's.
//
// Describe copies no strings: topic, group and resource names in rec
// share memory with the decoded messages. That is safe with ReadFrom,
// which copies out of the frame; a caller that decodes with
// UnsafeReadFrom must not reuse the frame buffer while rec is alive (it
// lives on in the queue and in subscribers after Log).
func Describe(rec *Record, req kmsg.Request, resp kmsg.Response, names TopicNames) {
	if req == nil || reflect.ValueOf(req).IsNil() {
		return
	}
	if rec.API == "" {
		rec.Key, rec.Version = req.Key(), req.GetVersion()
		rec.API = APIName(rec.Key)
	}
	if resp != nil && (reflect.ValueOf(resp).IsNil() || resp.Key() != req.Key()) {
		resp = nil
	}
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		if name, version, ok := ClientSoftware(r); ok {
			rec.SoftwareName, rec.SoftwareVersion = name, version
		}
		describeGeneric(rec, req, resp, names)
	case *kmsg.ProduceRequest:
		describeProduce(rec, r, resp, names)
	case *kmsg.FetchRequest:
		describeFetch(rec, r, resp, names)
	default:
		describeGeneric(rec, req, resp, names)
	}
}

// ClientSoftware returns the client software name and version an
// ApiVersions request carries from v3 on (KIP-511); the gateway
// remembers them per connection and puts them in every later record.
func ClientSoftware(req kmsg.Request) (name, version string, ok bool) {
	r, isAV := req.(*kmsg.ApiVersionsRequest)
	if !isAV || r.Version < 3 || r.ClientSoftwareName == "" {
		return "", "", false
	}
	return r.ClientSoftwareName, r.ClientSoftwareVersion, true
}

func topicName(name string, id [16]byte, names TopicNames) string {
	if name != "" || id == ([16]byte{}) {
		return name
	}
	if names != nil {
		if n, ok := names.TopicName(id); ok {
			return n
		}
	}
	// Kafka prints a Uuid as URL-safe base64 without padding.
	return "id:" + base64.RawURLEncoding.EncodeToString(id[:])
}

func describeProduce(rec *Record, r *kmsg.ProduceRequest, resp kmsg.Response, names TopicNames) {
	if r.TransactionID != nil {
		rec.TransactionalID = *r.TransactionID
	}
	acks := r.Acks
	rec.Acks = &acks
	n := 0
	for i := range r.Topics {
		n += len(r.Topics[i].Partitions)
	}
	// One backing array for every partition: one allocation, not one per topic.
	parts := make([]Partition, n)
	rec.Topics = make([]Topic, len(r.Topics))
	for i := range r.Topics {
		t := &r.Topics[i]
		ps := parts[:len(t.Partitions):len(t.Partitions)]
		parts = parts[len(t.Partitions):]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			ps[j] = Partition{Partition: p.Partition, Records: countRecords(p.Records), Bytes: len(p.Records), Offset: NoOffset}
		}
		rec.Topics[i] = Topic{Name: topicName(t.Topic, t.TopicID, names), Partitions: ps}
	}
	pr, ok := resp.(*kmsg.ProduceResponse)
	if !ok {
		return
	}
	for i := range pr.Topics {
		t := &pr.Topics[i]
		rt := rec.findTopic(i, topicName(t.Topic, t.TopicID, names))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			rec.addErrorCode(p.ErrorCode)
			if rt == nil {
				continue
			}
			if rp := rt.findPartition(j, p.Partition); rp != nil {
				rp.ErrorCode = p.ErrorCode
				if p.ErrorCode == 0 {
					rp.Offset = p.BaseOffset
				}
			}
		}
	}
}

func describeFetch(rec *Record, r *kmsg.FetchRequest, resp kmsg.Response, names TopicNames) {
	rec.Topics = make([]Topic, len(r.Topics))
	for i := range r.Topics {
		t := &r.Topics[i]
		ps := make([]Partition, len(t.Partitions))
		for j := range t.Partitions {
			ps[j] = Partition{Partition: t.Partitions[j].Partition, Offset: t.Partitions[j].FetchOffset}
		}
		rec.Topics[i] = Topic{Name: topicName(t.Topic, t.TopicID, names), Partitions: ps}
	}
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return
	}
	rec.addErrorCode(fr.ErrorCode)
	for i := range fr.Topics {
		t := &fr.Topics[i]
		name := topicName(t.Topic, t.TopicID, names)
		rt := rec.findTopic(i, name)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			rec.addErrorCode(p.ErrorCode)
			if len(p.RecordBatches) == 0 && p.ErrorCode == 0 {
				continue
			}
			// An incremental fetch session (KIP-227) answers for
			// partitions the request did not list: add them.
			if rt == nil {
				rec.Topics = append(rec.Topics, Topic{Name: name})
				rt = &rec.Topics[len(rec.Topics)-1]
			}
			rp := rt.findPartition(j, p.Partition)
			if rp == nil {
				rt.Partitions = append(rt.Partitions, Partition{Partition: p.Partition, Offset: NoOffset})
				rp = &rt.Partitions[len(rt.Partitions)-1]
			}
			rp.Bytes += len(p.RecordBatches)
			rp.Records += countRecords(p.RecordBatches)
			rp.ErrorCode = p.ErrorCode
		}
	}
}

// findTopic returns the record's topic with name, trying index hint first:
// responses list topics in request order, so the hint nearly always hits
// and a 1000-topic response is not matched in quadratic time.
func (r *Record) findTopic(hint int, name string) *Topic {
	if i := r.topicIndex(hint, name); i >= 0 {
		return &r.Topics[i]
	}
	return nil
}

func (r *Record) topicIndex(hint int, name string) int {
	if hint >= 0 && hint < len(r.Topics) && r.Topics[hint].Name == name {
		return hint
	}
	for i := range r.Topics {
		if r.Topics[i].Name == name {
			return i
		}
	}
	return -1
}

func (t *Topic) findPartition(hint int, p int32) *Partition {
	if hint >= 0 && hint < len(t.Partitions) && t.Partitions[hint].Partition == p {
		return &t.Partitions[hint]
	}
	for i := range t.Partitions {
		if t.Partitions[i].Partition == p {
			return &t.Partitions[i]
		}
	}
	return nil
}

// AddFetchResult records what a streamed Fetch response returned for one
// partition — the gateway moves Fetch record bytes socket to socket and
// never holds the response, so it reports sizes instead of a decoded
// response: bytes returned and the partition's error code (records are
// not counted for streamed responses). Call it after Describe(rec, req,
// nil), which fills the requested offsets.
func AddFetchResult(rec *Record, topic string, partition int32, bytes int, errorCode int16) {
	rec.addErrorCode(errorCode)
	if bytes == 0 && errorCode == 0 {
		return
	}
	rt := rec.findTopic(-1, topic)
	if rt == nil {
		rec.Topics = append(rec.Topics, Topic{Name: topic})
		rt = &rec.Topics[len(rec.Topics)-1]
	}
	rp := rt.findPartition(-1, partition)
	if rp == nil {
		rt.Partitions = append(rt.Partitions, Partition{Partition: partition, Offset: NoOffset})
		rp = &rt.Partitions[len(rt.Partitions)-1]
	}
	rp.Bytes += bytes
	rp.ErrorCode = errorCode
}

// AddFetchRecords adds the records a streamed Fetch response returned for
// one partition, when the backend knows them (the built-in broker). Call
// it after AddFetchResult for the same partition.
func AddFetchRecords(rec *Record, topic string, partition int32, records int) {
	if records <= 0 {
		return
	}
	if rt := rec.findTopic(-1, topic); rt != nil {
		if rp := rt.findPartition(-1, partition); rp != nil {
			rp.Records += records
		}
	}
}
