package audit

import (
	"encoding/json"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDescribe decodes a random request and response body with kmsg at a
// random key and version, and describes them. Invariants:
//   - Describe never panics, on a complete or a partly decoded message;
//   - the described record encodes to valid JSON at both levels.
//
// Seeds in testdata/fuzz/FuzzDescribe are real Produce, Fetch, admin and
// group messages.
func FuzzDescribe(f *testing.F) {
	f.Fuzz(func(t *testing.T, key, version int16, reqBody, respBody []byte) {
		req := kmsg.RequestForKey(key)
		if req == nil {
			return
		}
		if version < 0 || version > req.MaxVersion() {
			version = req.MaxVersion()
		}
		req.SetVersion(version)
		_ = req.ReadFrom(reqBody) // a partly decoded message must be safe too
		var resp kmsg.Response
		if len(respBody) > 0 {
			resp = req.ResponseKind()
			resp.SetVersion(version)
			_ = resp.ReadFrom(respBody)
		}
		rec := &Record{Event: EventRequest}
		Describe(rec, req, resp, fakeNames{})
		for _, full := range []bool{true, false} {
			if b := rec.AppendJSON(nil, full); !json.Valid(b) {
				t.Fatalf("invalid JSON: %s", b)
			}
		}
	})
}
