package policy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const fuzzPolicy = `
policy:
  default: deny
  rules:
    - {name: g, match: {group: {prefix: g}}, action: deny}
    - {name: x, match: {transactional_id: {regex: "x.*"}}, action: deny}
    - {name: t, match: {topic: {prefix: a}}, action: allow}
    - {name: r, match: {}, rate: {requests_per_second: 100, produce_bytes_per_second: 1MiB, per: client_id}}
    - {name: m, match: {api: [Metadata, ApiVersions]}, action: allow}
`

// FuzzCheck decodes arbitrary bytes as a request body of a key and
// version kmsg knows, and checks it against a policy with topic, group,
// transactional id and rate rules. Invariants: Check never panics; a Deny
// carries a response of the request's key and version that encodes and
// decodes (or Close for acks=0 Produce); a Partial carries a Forward of
// the same key and a Merge that accepts the matching response.
//
// Seeds are in testdata/fuzz/FuzzCheck.
func FuzzCheck(f *testing.F) {
	e := mustParse(f, fuzzPolicy)
	ids := names{{1}: "a1", {2}: "b2"}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		req := kmsg.RequestForKey(key)
		if req == nil || version < 0 || version > req.MaxVersion() {
			return
		}
		req.SetVersion(version)
		if err := req.ReadFrom(body); err != nil {
			return
		}
		s := subj("default", "10.0.0.1", "c", "")
		e.NeedsBody(s, key, version)
		v := e.Check(&Request{Subject: s, Key: key, Version: version, Size: len(body), Body: req, Names: ids})
		switch v.Action {
		case Deny:
			if v.Close {
				return
			}
			if v.Response == nil || v.Response.Key() != key || v.Response.GetVersion() != version {
				t.Fatalf("deny response %v for key %d v%d", v.Response, key, version)
			}
			dec := kmsg.ResponseForKey(key)
			dec.SetVersion(version)
			if err := dec.ReadFrom(v.Response.AppendTo(nil)); err != nil {
				t.Fatalf("deny response does not decode: %v", err)
			}
		case Partial:
			if v.Forward == nil || v.Forward.Key() != key || v.Merge == nil {
				t.Fatalf("partial without forward/merge")
			}
			resp := v.Forward.ResponseKind()
			v.Merge(resp)
			resp.AppendTo(nil)
		}
		e.OnResponse(s, key, len(body), v2time())
	})
}
