package policy

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// noErrorSlot lists key/versions whose response has nowhere to carry an
// error for what the filled request asks: the broker answers those with
// an empty result too (DescribeLogDirs before v3 returns no directories
// when unauthorized, KafkaApis handleDescribeLogDirsRequest).
func noErrorSlot(key, version int16) bool {
	switch key {
	case 35: // DescribeLogDirs
		return version < 3
	}
	return false
}

// TestDenyEveryKey builds a filled request for every key and version kmsg
// knows, denies it with a deny-all rule, and checks that the response is
// for the same key and version, encodes and decodes, and carries the
// error somewhere (or, for acks=0 Produce, that the connection closes).
func TestDenyEveryKey(t *testing.T) {
	e := mustParse(t, "policy:\n  rules:\n    - {name: all, match: {}, action: deny}\n")
	s := subj("default", "10.0.0.1", "c", "")
	checked := 0
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		proto := kmsg.RequestForKey(key)
		if proto == nil {
			continue
		}
		for version := int16(0); version <= proto.MaxVersion(); version++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(version)
			fill(reflect.ValueOf(req).Elem(), 0)
			if p, ok := req.(*kmsg.ProduceRequest); ok {
				p.Acks = -1
			}
			req = roundTrip(t, req)
			v := e.Check(&Request{Subject: s, Key: key, Version: version, Body: req})
			name := kmsg.NameForKey(key)
			if v.Action != Deny || v.Response == nil || v.Close {
				t.Fatalf("%s v%d: verdict %v close %v response %v", name, version, v.Action, v.Close, v.Response)
			}
			if v.Rule != "all" {
				t.Errorf("%s v%d: rule %q", name, version, v.Rule)
			}
			resp := v.Response
			if resp.Key() != key || resp.GetVersion() != version {
				t.Fatalf("%s v%d: response is key %d v%d", name, version, resp.Key(), resp.GetVersion())
			}
			dec := kmsg.ResponseForKey(key)
			dec.SetVersion(version)
			if err := dec.ReadFrom(resp.AppendTo(nil)); err != nil {
				t.Fatalf("%s v%d: response does not decode: %v", name, version, err)
			}
			codes := map[string]int16{}
			errorCodes(reflect.ValueOf(dec), "", codes)
			if len(codes) == 0 && !noErrorSlot(key, version) {
				t.Errorf("%s v%d: the denial is invisible: no error code in %+v", name, version, dec)
			}
			if want, ok := placement(key, version, req); ok {
				for path, code := range want {
					if codes[path] != code {
						t.Errorf("%s v%d: %s = %d, want %d (all: %v)", name, version, path, codes[path], code, codes)
					}
				}
			}
			checked++
		}
	}
	if checked < 350 {
		t.Fatalf("checked %d key/versions; kmsg knows many more", checked)
	}
}

// placement is where docs/protocol.md §4.1 says the error goes, for the
// keys it lists, given the filled request.
func placement(key, version int16, req kmsg.Request) (map[string]int16, bool) {
	topic, group, txn, cluster := kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code,
		kerr.TransactionalIDAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code
	switch key {
	case 0, 1, 2, 21, 23: // Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch
		return map[string]int16{"Topics[].Partitions[].ErrorCode": topic}, true
	case 3:
		return map[string]int16{"Topics[].ErrorCode": topic}, true
	case 8:
		return map[string]int16{"Topics[].Partitions[].ErrorCode": group}, true
	case 9:
		switch {
		case version < 2:
			return map[string]int16{"Topics[].Partitions[].ErrorCode": group}, true
		case version < 8:
			return map[string]int16{"ErrorCode": group}, true
		}
		return map[string]int16{"Groups[].ErrorCode": group}, true
	case 10:
		if version < 4 {
			return map[string]int16{"ErrorCode": group}, true
		}
		return map[string]int16{"Coordinators[].ErrorCode": group}, true
	case 11, 12, 13, 14:
		return map[string]int16{"ErrorCode": group}, true
	case 15, 42:
		return map[string]int16{"Groups[].ErrorCode": group}, true
	case 19, 20, 37:
		return map[string]int16{"Topics[].ErrorCode": topic}, true
	case 22:
		if req.(*kmsg.InitProducerIDRequest).TransactionalID != nil {
			return map[string]int16{"ErrorCode": txn}, true
		}
		return map[string]int16{"ErrorCode": cluster}, true
	case 25, 26:
		return map[string]int16{"ErrorCode": txn}, true
	case 29:
		return map[string]int16{"ErrorCode": cluster}, true
	case 30, 31:
		return map[string]int16{"Results[].ErrorCode": cluster}, true
	case 32, 33, 44: // the filled resource is a TOPIC
		return map[string]int16{"Resources[].ErrorCode": topic}, true
	case 38, 39, 40, 41:
		return map[string]int16{"ErrorCode": kerr.DelegationTokenAuthorizationFailed.Code}, true
	case 68, 76:
		return map[string]int16{"ErrorCode": group}, true
	case 36:
		return map[string]int16{"ErrorCode": kerr.SaslAuthenticationFailed.Code}, true
	}
	return nil, false
}

func TestDenySpecifics(t *testing.T) {
	e := mustParse(t, "policy:\n  rules:\n    - {name: all, match: {}, action: deny}\n")
	s := subj("default", "10.0.0.1", "c", "")

	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version, jg.Group = 9, "g"
	v := e.Check(&Request{Subject: s, Key: 11, Version: 9, Body: jg})
	if r := v.Response.(*kmsg.JoinGroupResponse); r.Generation != -1 || r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("JoinGroup deny = %+v", r)
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version = 4
	v = e.Check(&Request{Subject: s, Key: 22, Version: 4, Body: ip})
	if r := v.Response.(*kmsg.InitProducerIDResponse); r.ProducerID != -1 || r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("InitProducerId deny = %+v", r)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, 1, []string{"tx"}
	v = e.Check(&Request{Subject: s, Key: 10, Version: 4, Body: fc})
	r := v.Response.(*kmsg.FindCoordinatorResponse)
	if len(r.Coordinators) != 1 || r.Coordinators[0].Key != "tx" || r.Coordinators[0].NodeID != -1 || r.Coordinators[0].Port != -1 ||
		r.Coordinators[0].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Errorf("FindCoordinator(txn) deny = %+v", r.Coordinators)
	}
	// acks=0 produce cannot be answered: close.
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks = 9, 0
	p.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0}}}}
	v = e.Check(&Request{Subject: s, Key: 0, Version: 9, Body: p})
	if v.Action != Deny || !v.Close || v.Response != nil {
		t.Errorf("acks=0 deny = %+v", v)
	}
	// A deny decided without a body closes (the caller skipped NeedsBody).
	v = e.Check(&Request{Subject: s, Key: 19, Version: 5})
	if v.Action != Deny || !v.Close {
		t.Errorf("nil-body deny = %+v", v)
	}
	if !e.NeedsBody(s, 19, 5) {
		t.Error("NeedsBody is false for a key a rule denies")
	}
}
