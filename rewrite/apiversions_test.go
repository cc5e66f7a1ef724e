package rewrite

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/wire"
)

type keyRange struct{ key, min, max int16 }

func apiVersionsBody(version int16, keys []keyRange, prep func(*kmsg.ApiVersionsResponse)) []byte {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = version
	r.ThrottleMillis = 17
	for _, k := range keys {
		r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k.key, MinVersion: k.min, MaxVersion: k.max})
	}
	if prep != nil {
		prep(r)
	}
	return r.AppendTo(nil)
}

func decodeApiVersions(t *testing.T, version int16, body []byte) *kmsg.ApiVersionsResponse {
	t.Helper()
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = version
	if err := r.ReadFrom(body); err != nil {
		t.Fatalf("decode v%d output: %v", version, err)
	}
	return r
}

func ranges(r *kmsg.ApiVersionsResponse) []keyRange {
	var out []keyRange
	for _, k := range r.ApiKeys {
		out = append(out, keyRange{k.ApiKey, k.MinVersion, k.MaxVersion})
	}
	return out
}

func TestApiVersionsClamp(t *testing.T) {
	mustDecode := func(key int16) bool { return key == 2 || key == 201 }
	in := []keyRange{
		{0, 3, 99},    // Produce: min forced to 0, max to kmsg's
		{1, 4, 99},    // Fetch: address-bearing, clamped
		{2, 0, 99},    // ListOffsets: mustDecode, clamped
		{3, 0, 12},    // Metadata below kmsg max: kept
		{17, 0, 5},    // SaslHandshake: max 1 (KAFKA-9577)
		{18, 0, 5},    // ApiVersions: max 4 (KIP-1242 not implemented)
		{19, 2, 99},   // CreateTopics: not decoded, passes untouched
		{55, 0, 9},    // DescribeQuorum: address-bearing
		{78, 9, 12},   // ShareFetch: min above kmsg max, dropped
		{200, 1, 3},   // unknown to kmsg: untouched
		{201, 0, 1},   // unknown and mustDecode: cannot be decoded, dropped
		{19000, 7, 2}, // unknown, odd range: untouched
	}
	for _, v := range []int16{0, 1, 2, 3, 4, 5} {
		out, err := ApiVersions(v, apiVersionsBody(v, in, nil), mustDecode)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		got := decodeApiVersions(t, v, out)
		want := []keyRange{
			{0, 0, wire.MaxVersion(0)},
			{1, 4, wire.MaxVersion(1)},
			{2, 0, wire.MaxVersion(2)},
			{3, 0, 12},
			{17, 0, 1},
			{18, 0, 4},
			{19, 2, 99},
			{55, 0, wire.MaxVersion(55)},
			{200, 1, 3},
			{19000, 7, 2},
		}
		if !slices.Equal(ranges(got), want) {
			t.Errorf("v%d:\n got %v\nwant %v", v, ranges(got), want)
		}
		if v >= 1 && got.ThrottleMillis != 17 {
			t.Errorf("v%d: throttle %d, want 17", v, got.ThrottleMillis)
		}
	}
}

// TestApiVersionsUnsupportedV0Body: an UNSUPPORTED_VERSION answer is a v0
// body whatever the client sent (KIP-511).
func TestApiVersionsUnsupportedV0Body(t *testing.T) {
	// docs/protocol.md §3.2: "I support ApiVersions 0..4" as encoded by kmsg.
	upstream := []byte{0x00, 0x23, 0x00, 0x00, 0x00, 0x01, 0x00, 0x12, 0x00, 0x00, 0x00, 0x05}
	want := []byte{0x00, 0x23, 0x00, 0x00, 0x00, 0x01, 0x00, 0x12, 0x00, 0x00, 0x00, 0x04}
	for _, v := range []int16{3, 4, 5, 6, 99} {
		out, err := ApiVersions(v, upstream, nil)
		if err != nil {
			t.Fatalf("request v%d: %v", v, err)
		}
		if !bytes.Equal(out, want) {
			t.Errorf("request v%d: got % x, want % x", v, out, want)
		}
	}
	if got := UnsupportedApiVersions(); !bytes.Equal(got, want) {
		t.Errorf("UnsupportedApiVersions = % x, want % x", got, want)
	}
}

func TestApiVersionsUnknownVersion(t *testing.T) {
	body := apiVersionsBody(5, []keyRange{{18, 0, 6}}, nil)
	for _, v := range []int16{6, 100, -1} {
		if _, err := ApiVersions(v, body, nil); !errors.Is(err, ErrUnknownVersion) {
			t.Errorf("request v%d, no error 35: err = %v, want ErrUnknownVersion", v, err)
		}
	}
}

func TestApiVersionsMalformed(t *testing.T) {
	body := apiVersionsBody(3, []keyRange{{0, 0, 9}, {1, 0, 12}}, nil)
	if _, err := ApiVersions(3, body[:len(body)-4], nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
}

func TestApiVersionsTransactionVersion(t *testing.T) {
	withFeatures := func(r *kmsg.ApiVersionsResponse) {
		r.FinalizedFeaturesEpoch = 42
		r.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{
			{Name: "metadata.version", MinVersion: 1, MaxVersion: 27},
			{Name: "transaction.version", MinVersion: 0, MaxVersion: 2},
			{Name: "group.version", MinVersion: 0, MaxVersion: 1},
		}
		r.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{
			{Name: "metadata.version", MinVersionLevel: 27, MaxVersionLevel: 27},
			{Name: "transaction.version", MinVersionLevel: 2, MaxVersionLevel: 2},
			{Name: "group.version", MinVersionLevel: 1, MaxVersionLevel: 1},
		}
	}
	type feat struct {
		name     string
		min, max int16
	}
	supported := func(r *kmsg.ApiVersionsResponse) (out []feat) {
		for _, f := range r.SupportedFeatures {
			out = append(out, feat{f.Name, f.MinVersion, f.MaxVersion})
		}
		return out
	}
	finalized := func(r *kmsg.ApiVersionsResponse) (out []feat) {
		for _, f := range r.FinalizedFeatures {
			out = append(out, feat{f.Name, f.MinVersionLevel, f.MaxVersionLevel})
		}
		return out
	}

	for _, tc := range []struct {
		name          string
		produceMax    int16
		keys          bool // false: Produce absent
		wantSupported []feat
		wantFinalized []feat
	}{
		{"produce v13 keeps TV2", 13, true,
			[]feat{{"metadata.version", 1, 27}, {"transaction.version", 0, 2}, {"group.version", 0, 1}},
			[]feat{{"metadata.version", 27, 27}, {"transaction.version", 2, 2}, {"group.version", 1, 1}}},
		{"produce v12 keeps TV2", 12, true,
			[]feat{{"metadata.version", 1, 27}, {"transaction.version", 0, 2}, {"group.version", 0, 1}},
			[]feat{{"metadata.version", 27, 27}, {"transaction.version", 2, 2}, {"group.version", 1, 1}}},
		{"produce v11 lowers TV to 1", 11, true,
			[]feat{{"metadata.version", 1, 27}, {"transaction.version", 0, 1}, {"group.version", 0, 1}},
			[]feat{{"metadata.version", 27, 27}, {"transaction.version", 1, 1}, {"group.version", 1, 1}}},
		{"no produce lowers TV to 1", 0, false,
			[]feat{{"metadata.version", 1, 27}, {"transaction.version", 0, 1}, {"group.version", 0, 1}},
			[]feat{{"metadata.version", 27, 27}, {"transaction.version", 1, 1}, {"group.version", 1, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := []keyRange{{18, 0, 4}}
			if tc.keys {
				keys = append(keys, keyRange{0, 3, tc.produceMax})
			}
			out, err := ApiVersions(4, apiVersionsBody(4, keys, withFeatures), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := decodeApiVersions(t, 4, out)
			if s := supported(got); !slices.Equal(s, tc.wantSupported) {
				t.Errorf("supported:\n got %v\nwant %v", s, tc.wantSupported)
			}
			if f := finalized(got); !slices.Equal(f, tc.wantFinalized) {
				t.Errorf("finalized:\n got %v\nwant %v", f, tc.wantFinalized)
			}
			if got.FinalizedFeaturesEpoch != 42 {
				t.Errorf("epoch %d, want 42", got.FinalizedFeaturesEpoch)
			}
		})
	}

	// A supported range that starts above level 1 cannot be offered at all.
	out, err := ApiVersions(3, apiVersionsBody(3, []keyRange{{0, 0, 11}}, func(r *kmsg.ApiVersionsResponse) {
		r.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{Name: "transaction.version", MinVersion: 2, MaxVersion: 2}}
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeApiVersions(t, 3, out); len(got.SupportedFeatures) != 0 {
		t.Errorf("supported = %+v, want transaction.version dropped", got.SupportedFeatures)
	}
}

// TestApiVersionsDuplicateKey: a key listed twice keeps its first entry,
// and the feature check sees that entry (found by FuzzApiVersions).
func TestApiVersionsDuplicateKey(t *testing.T) {
	body := apiVersionsBody(3, []keyRange{{0, 3, 13}, {0, 0, 5}, {18, 0, 4}}, func(r *kmsg.ApiVersionsResponse) {
		r.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{{Name: "transaction.version", MinVersionLevel: 2, MaxVersionLevel: 2}}
	})
	out, err := ApiVersions(3, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeApiVersions(t, 3, out)
	if want := []keyRange{{0, 0, 13}, {18, 0, 4}}; !slices.Equal(ranges(got), want) {
		t.Errorf("got %v, want %v", ranges(got), want)
	}
	if f := got.FinalizedFeatures[0]; f.MaxVersionLevel != 2 {
		t.Errorf("transaction.version lowered to %d although the kept Produce entry reaches v13", f.MaxVersionLevel)
	}
}
