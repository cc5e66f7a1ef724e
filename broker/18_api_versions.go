package broker

import (
	"sort"

	"github.com/tollgate-kafka/tollgate/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-4
//
// Behavior:
// * Lists every key in the registry with its version range. Produce is
//   advertised from v0 although v0-2 close the connection (see
//   00_produce.go): librdkafka disables compression when Produce min is
//   above 0 (KAFKA-18659, confluentinc/librdkafka#4956).
// * A version above 4 gets the KIP-511 answer: a v0 body with
//   UNSUPPORTED_VERSION and only our ApiVersions range (Handle builds it
//   without decoding the request, whose layout we may not know).
// * v3+: ClientSoftwareName/Version must match
//   [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?, else INVALID_REQUEST (the
//   broker's ApiVersionsRequest.isValid); librdkafka then retries at v0.
// * Features (v3+): group.version 1 is supported and finalized (KIP-848
//   consumer groups, 68/69); transaction.version is not advertised, so
//   clients do not switch on transactions v2 (KIP-890).
//
// Version notes:
// * v1: ThrottleMillis
// * v3: flexible; client software name/version; features (tagged)
// * v5 (KIP-1242, ClusterID/NodeID checks) is not served: capped at 4 per
//   docs/protocol.md §3.3.

func init() { regKey(18, 0, 4, syncHandler(handleApiVersions)) }

func handleApiVersions(c *Conn, req *kmsg.ApiVersionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!validSoftware(req.ClientSoftwareName) || !validSoftware(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	resp.ApiKeys = advertisedKeys()
	if req.Version >= 3 {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = "group.version", 0, 1
		resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{sf}
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "group.version", 1, 1
		resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{ff}
		resp.FinalizedFeaturesEpoch = 1
	}
	return resp, nil
}

// advertisedKeys is the registry as ApiVersions entries, sorted by key.
func advertisedKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(registry))
	for k, e := range registry {
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, e.min, e.max
		keys = append(keys, ak)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// apiVersionsUnsupported is the KIP-511 answer to an ApiVersions version
// above ours: v0 body, UNSUPPORTED_VERSION, and one key (18) with our range.
func apiVersionsUnsupported(e regEntry) wire.Body {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	ak := kmsg.NewApiVersionsResponseApiKey()
	ak.ApiKey, ak.MinVersion, ak.MaxVersion = 18, e.min, e.max
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{ak}
	return encode(resp)
}

// validSoftware reports whether s matches the broker's client software
// pattern [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?.
func validSoftware(s string) bool {
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if s == "" || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if !alnum(s[i]) && s[i] != '-' && s[i] != '.' {
			return false
		}
	}
	return true
}
