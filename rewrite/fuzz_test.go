package rewrite

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/wire"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the seed corpora in testdata/fuzz")

// oddHidden hides every odd node of both kinds, so fuzzing exercises the
// hiding paths as well as the mapping ones.
func oddHidden() *testMapper { return &testMapper{hideOdd: true} }

// FuzzResponse feeds arbitrary key, version and body to Response.
//
// Invariants:
//   - it never panics;
//   - changed=false returns the input slice itself;
//   - a changed body decodes with kmsg at the same version;
//   - whenever the output decodes, every endpoint in it has no host or the
//     gateway address of an even node (odd nodes are hidden), and an errored
//     FindCoordinator entry has no host. For Produce and Fetch this checks
//     the hand-written pre-check against kmsg: a body it passes on unchanged
//     must show kmsg no endpoint at all.
//
// An unchanged Produce or Fetch body that kmsg rejects is allowed: the
// pre-check validates only what it walks (the gateway's rule: "decode only what
// you must"), and such a body carries no endpoint either way.
func FuzzResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		out, changed, err := Response(key, version, body, oddHidden())
		if err != nil {
			return
		}
		if !changed && !sameSlice(out, body) {
			t.Fatal("changed=false but a new slice was returned")
		}
		if !Needs(key, version) {
			return
		}
		got, derr := decode(key, version, out)
		if derr != nil {
			if changed {
				t.Fatalf("rewritten body does not decode: %v", derr)
			}
			if key != 0 && key != 1 {
				t.Fatalf("unchanged key %d body passed on although kmsg rejects it: %v", key, derr)
			}
			return
		}
		checkAllMapped(t, got)
	})
}

// checkAllMapped fails on an endpoint that is neither empty nor mapped.
func checkAllMapped(t *testing.T, resp kmsg.Response) {
	t.Helper()
	walkEndpoints(reflect.ValueOf(resp), -1, func(s reflect.Value, node int32) {
		host, port, _ := endpointFields(s)
		h := host.String()
		if h == "" {
			return
		}
		if ec := s.FieldByName("ErrorCode"); ec.IsValid() && (ec.Int() != 0 || node < 0) {
			t.Fatalf("errored coordinator entry carries host %q", h)
		}
		var p int64
		if port.Kind() == reflect.Uint16 {
			p = int64(port.Uint())
		} else {
			p = port.Int()
		}
		if node%2 != 0 || h != gwHost(node) || p != int64(gwPort(node)) {
			t.Fatalf("%T: node %d left at %s:%d", resp, node, h, p)
		}
	})
}

// FuzzPrecheck checks the Produce/Fetch pre-check against kmsg directly,
// so the fuzzer spends its time on the two hot-path layouts.
//
// Invariant: when withoutEndpoints says a body has no endpoints, kmsg either
// rejects the body or decodes no Brokers from it.
func FuzzPrecheck(f *testing.F) {
	f.Fuzz(func(t *testing.T, fetch bool, version int16, body []byte) {
		key := int16(0)
		if fetch {
			key = 1
		}
		if !withoutEndpoints(key, version, body) {
			return
		}
		r, err := decode(key, version, body)
		if err != nil {
			return
		}
		var n int
		switch r := r.(type) {
		case *kmsg.ProduceResponse:
			n = len(r.Brokers)
		case *kmsg.FetchResponse:
			n = len(r.Brokers)
		}
		if n != 0 {
			t.Fatalf("pre-check missed %d endpoints in %s v%d", n, kmsg.NameForKey(key), version)
		}
	})
}

// FuzzApiVersions feeds arbitrary request versions and bodies to
// ApiVersions.
//
// Invariants: it never panics; an answer decodes at the version the client
// reads it at (v0 for UNSUPPORTED_VERSION, KIP-511); every address-bearing
// key and every key with a fixed cap is within its cap; Produce min is 0;
// transaction.version stays below 2 when Produce ends below v12.
func FuzzApiVersions(f *testing.F) {
	f.Fuzz(func(t *testing.T, requestVersion int16, body []byte) {
		out, err := ApiVersions(requestVersion, body, func(key int16) bool { return key%3 == 0 })
		if err != nil {
			return
		}
		v := requestVersion
		if len(out) >= 2 && binary.BigEndian.Uint16(out) == errUnsupportedVersion {
			v = 0
		}
		r := kmsg.NewPtrApiVersionsResponse()
		r.Version = v
		if err := r.ReadFrom(out); err != nil {
			t.Fatalf("output does not decode at v%d: %v", v, err)
		}
		produceMax := int16(-1)
		for _, k := range r.ApiKeys {
			clamped := needsAnyVersion(k.ApiKey) || k.ApiKey%3 == 0 || k.ApiKey == 17 || k.ApiKey == 18
			if clamped && (k.MaxVersion > wire.MaxVersion(k.ApiKey) || k.MaxVersion < k.MinVersion) {
				t.Fatalf("key %d advertised %d..%d, kmsg max %d", k.ApiKey, k.MinVersion, k.MaxVersion, wire.MaxVersion(k.ApiKey))
			}
			switch k.ApiKey {
			case 0:
				produceMax = k.MaxVersion
				if k.MinVersion != 0 {
					t.Fatalf("Produce min %d", k.MinVersion)
				}
			case 17:
				if k.MaxVersion > 1 {
					t.Fatalf("SaslHandshake max %d", k.MaxVersion)
				}
			case 18:
				if k.MaxVersion > 4 {
					t.Fatalf("ApiVersions max %d", k.MaxVersion)
				}
			}
		}
		if produceMax >= 12 {
			return
		}
		for _, ft := range r.FinalizedFeatures {
			if ft.Name == "transaction.version" && ft.MaxVersionLevel > 1 {
				t.Fatalf("finalized transaction.version %d with Produce max %d", ft.MaxVersionLevel, produceMax)
			}
		}
		for _, ft := range r.SupportedFeatures {
			if ft.Name == "transaction.version" && ft.MaxVersion > 1 {
				t.Fatalf("supported transaction.version %d with Produce max %d", ft.MaxVersion, produceMax)
			}
		}
	})
}

// TestWriteFuzzSeeds regenerates testdata/fuzz with -update-seeds: every
// handled response at its first, a middle and its last version, Produce and
// Fetch without endpoints, and ApiVersions bodies.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("run with -update-seeds to regenerate the seed corpora")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzResponse")
	for _, c := range rwCases() {
		maxV := wire.MaxVersion(c.key)
		for _, v := range []int16{0, maxV / 2, maxV} {
			writeSeed(t, dir, fmt.Sprintf("%s_v%d", c.name, v), c.key, v, c.build(v).AppendTo(nil))
		}
	}
	for _, v := range []int16{9, 13} {
		r := fetchless(kmsg.NewPtrProduceResponse())
		r.SetVersion(v)
		writeSeed(t, dir, fmt.Sprintf("ProduceNoEndpoints_v%d", v), int16(0), v, r.AppendTo(nil))
	}
	for _, v := range []int16{12, 16, 18} {
		r := fetchless(kmsg.NewPtrFetchResponse())
		r.SetVersion(v)
		writeSeed(t, dir, fmt.Sprintf("FetchNoEndpoints_v%d", v), int16(1), v, r.AppendTo(nil))
	}

	dir = filepath.Join("testdata", "fuzz", "FuzzPrecheck")
	for _, c := range rwCases()[:2] {
		for v := int16(9); v <= wire.MaxVersion(c.key); v++ {
			writeSeed(t, dir, fmt.Sprintf("%s_v%d", c.name, v), c.key == 1, v, c.build(v).AppendTo(nil))
			r := fetchless(kmsg.ResponseForKey(c.key))
			r.SetVersion(v)
			writeSeed(t, dir, fmt.Sprintf("%sNoEndpoints_v%d", c.name, v), c.key == 1, v, r.AppendTo(nil))
		}
	}

	dir = filepath.Join("testdata", "fuzz", "FuzzApiVersions")
	keys := []keyRange{{0, 3, 13}, {1, 4, 20}, {3, 0, 13}, {17, 0, 1}, {18, 0, 5}, {300, 0, 1}}
	for _, v := range []int16{0, 3, 5} {
		body := apiVersionsBody(v, keys, func(r *kmsg.ApiVersionsResponse) {
			r.FinalizedFeaturesEpoch = 3
			r.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{Name: "transaction.version", MinVersion: 0, MaxVersion: 2}}
			r.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{{Name: "transaction.version", MinVersionLevel: 2, MaxVersionLevel: 2}}
		})
		writeSeed(t, dir, fmt.Sprintf("v%d", v), v, body)
	}
	writeSeed(t, dir, "unsupported_v0_body", int16(7), UnsupportedApiVersions())
}

// writeSeed writes one corpus file in the "go test fuzz v1" format.
func writeSeed(t *testing.T, dir, name string, args ...any) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := "go test fuzz v1\n"
	for _, a := range args {
		switch a := a.(type) {
		case int16:
			s += fmt.Sprintf("int16(%d)\n", a)
		case bool:
			s += fmt.Sprintf("bool(%t)\n", a)
		case []byte:
			s += fmt.Sprintf("[]byte(%q)\n", a)
		default:
			t.Fatalf("seed argument of type %T", a)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
