package proxy_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSinglePortOffsetsLeaderRemoved: when the leader the view names
// cannot be dialled (kfake removed it), ListOffsets, OffsetForLeaderEpoch
// and DeleteRecords answer its partitions NOT_LEADER_OR_FOLLOWER on a
// connection that stays open, and once the view relearns, every
// partition is answered by its new leader.
func TestSinglePortOffsetsLeaderRemoved(t *testing.T) {
	const topic, parts = "lr", 3
	for _, k := range []struct {
		name string
		req  func() kmsg.Request
	}{
		{"ListOffsets", listOffsetsReq},
		{"OffsetForLeaderEpoch", offsetForLeaderEpochReq},
		{"DeleteRecords", deleteRecordsReq},
	} {
		t.Run(k.name, func(t *testing.T) {
			c, srv, scan := startSinglePort(t, topic, parts)
			ctx := ctxT(t, 30*time.Second)
			// The view learns the leaders from a client's Metadata.
			before := newClient(t, srv, nil, kgo.Dialer(scan.dial))
			resp, err := before.Broker(testVirtual).Request(ctx, k.req())
			if codes := partitionCodes(resp); err != nil || len(codes) != parts {
				t.Fatalf("before: %v %v", codes, err)
			}
			if err := c.RemoveNode(2); err != nil { // it led partition 2
				t.Fatal(err)
			}
			// A raw connection sends no Metadata, so the view still names
			// node 2 and the gateway's dial to it fails.
			rc := dialRaw(t, srv.Addr(0).String())
			ask := func() map[int32]int16 {
				t.Helper()
				_, resp, ok := rc.roundTrip(k.req())
				if !ok {
					t.Fatal("the gateway closed the connection")
				}
				return partitionCodes(resp)
			}
			if codes := ask(); codes[2] != kerr.NotLeaderForPartition.Code || len(codes) != parts {
				t.Fatalf("with the old leader gone: codes %v, want partition 2 NOT_LEADER_OR_FOLLOWER and all %d listed", codes, parts)
			}
			for codes := ask(); codes[0] != 0 || codes[1] != 0 || codes[2] != 0; codes = ask() {
				select {
				case <-ctx.Done():
					t.Fatalf("the view never relearned: %v", codes)
				case <-time.After(50 * time.Millisecond):
				}
			}
			scan.assertClean(t)
		})
	}
}

// partitionCodes maps each answered partition to its error code.
func partitionCodes(resp kmsg.Response) map[int32]int16 {
	out := map[int32]int16{}
	switch r := resp.(type) {
	case *kmsg.ListOffsetsResponse:
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				out[p.Partition] = p.ErrorCode
			}
		}
	case *kmsg.OffsetForLeaderEpochResponse:
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				out[p.Partition] = p.ErrorCode
			}
		}
	case *kmsg.DeleteRecordsResponse:
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				out[p.Partition] = p.ErrorCode
			}
		}
	}
	return out
}

func listOffsetsReq() kmsg.Request {
	r := kmsg.NewPtrListOffsetsRequest()
	r.SetVersion(7)
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "lr"
	for p := range int32(3) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r
}

func offsetForLeaderEpochReq() kmsg.Request {
	r := kmsg.NewPtrOffsetForLeaderEpochRequest()
	r.SetVersion(4)
	r.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "lr"
	for p := range int32(3) {
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p, -1, 0
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r
}

func deleteRecordsReq() kmsg.Request {
	r := kmsg.NewPtrDeleteRecordsRequest()
	r.SetVersion(2)
	r.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "lr"
	for p := range int32(3) {
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = p, 0
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r
}
