package broker

import "github.com/tollgate-kafka/tollgate/wire"

// The ShareFetch answer is encoded by hand, as Fetch's (fetch_encode.go),
// so that its record batches go from the segment files to the socket
// (sendfile) without passing through the heap. The layout follows kmsg's
// ShareFetchResponse.AppendTo field for field (every version is
// flexible); share_fetch_encode_test.go compares the two byte for byte.
//
// NOTE: a field added to ShareFetchResponse in a new kmsg version must be
// added here too, and the ShareFetch max version raised only then.

// encode builds the answer from sf.resp, sf.parts (in sf.order, grouped
// by topic in first-seen order) and sf.recs; the read results move into
// the body.
func (sf *shareFetch) encode() *fetchBody {
	resp := sf.resp
	e := &fetchEncoder{body: &fetchBody{}, flex: true}
	e.cur = make([]byte, 0, 256)
	e.i32(resp.ThrottleMillis)
	e.i16(resp.ErrorCode)
	e.nullableStr(resp.ErrorMessage)
	if resp.Version >= 1 {
		e.i32(resp.AcquisitionLockTimeoutMillis)
	}
	var tids [][16]byte
	byTopic := map[[16]byte][]partID{}
	for _, k := range sf.order {
		if _, ok := byTopic[k.tid]; !ok {
			tids = append(tids, k.tid)
		}
		byTopic[k.tid] = append(byTopic[k.tid], k)
	}
	served := 0
	e.arrayLen(len(tids))
	for _, tid := range tids {
		e.cur = append(e.cur, tid[:]...)
		ks := byTopic[tid]
		e.arrayLen(len(ks))
		for _, k := range ks {
			rp := sf.parts[k]
			e.i32(rp.Partition)
			e.i16(rp.ErrorCode)
			e.nullableStr(rp.ErrorMessage)
			e.i16(rp.AcknowledgeErrorCode)
			e.nullableStr(rp.AcknowledgeErrorMessage)
			e.i32(rp.CurrentLeader.LeaderID)
			e.i32(rp.CurrentLeader.LeaderEpoch)
			e.emptyTags()
			rs := sf.recs[k]
			fp := wire.FetchedPartition{TopicID: tid, Partition: k.p, ErrorCode: rp.ErrorCode}
			if rs == nil || len(rs.rrs) == 0 {
				e.uvarint(0) // null records, as kmsg writes a nil Records
			} else {
				e.uvarint(uint64(rs.size) + 1)
				e.flush()
				for _, rr := range rs.rrs {
					e.body.segs = append(e.body.segs, fetchSeg{rr: rr})
					e.body.n += rr.Size
				}
				served += rs.size
				fp.Bytes = rs.size
				rs.rrs = nil // owned by the body now
			}
			fp.Records = int(acquiredRanges(rp.AcquiredRecords).count())
			e.body.fetched = append(e.body.fetched, fp)
			e.arrayLen(len(rp.AcquiredRecords))
			for _, ar := range rp.AcquiredRecords {
				e.i64(ar.FirstOffset)
				e.i64(ar.LastOffset)
				e.i16(ar.DeliveryCount)
				e.emptyTags()
			}
			e.emptyTags()
		}
		e.emptyTags()
	}
	e.arrayLen(len(resp.NodeEndpoints))
	for _, ne := range resp.NodeEndpoints {
		e.i32(ne.NodeID)
		e.str(ne.Host)
		e.i32(ne.Port)
		e.nullableStr(ne.Rack)
		e.emptyTags()
	}
	e.emptyTags()
	e.flush()
	sf.c.b.observeBytes(0, served)
	return e.body
}

// nullableStr writes a compact nullable string.
func (e *fetchEncoder) nullableStr(s *string) {
	if s == nil {
		e.uvarint(0)
		return
	}
	e.str(*s)
}
