package rewrite

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/wire"
)

// Keys and limits the ApiVersions clamp names (docs/protocol.md §3.1).
const (
	keyProduce       = apis.Produce
	keySaslHandshake = apis.SASLHandshake
	keyApiVersions   = apis.ApiVersions

	// saslHandshakeMax: SaslHandshakeRequest.json, "Version cannot be easily
	// bumped due to incorrect client negotiation for clients <= 2.4. See
	// KAFKA-9577".
	saslHandshakeMax = 1
	// apiVersionsMax: v5 (KIP-1242) asks the server to check ClusterID and
	// NodeID and answer REBOOTSTRAP_REQUIRED on a mismatch; the gateway does
	// not implement that check, so it never offers v5 (docs/protocol.md §3.3).
	apiVersionsMax = 4

	// errUnsupportedVersion is UNSUPPORTED_VERSION (kerr code 35).
	errUnsupportedVersion = 35
)

// featureNeed says that a feature level is only honest when a key's clamped
// max reaches a version: above that, the level is lowered to below.
type featureNeed struct {
	name      string
	level     int16 // levels >= level need key >= minVersion
	key       int16
	minVer    int16
	loweredTo int16
}

// featureNeeds lists the finalized and supported features that depend on a
// clamped key. transaction.version 2 is KIP-890 part 2, whose clients write
// transactions with Produce v12; the Java producer enables it when the
// finalized level is >= 2 (TransactionManager isTransactionV2Enabled), and
// kfake advertises the feature only when Produce max >= 12
// (pkg/kfake/18_api_versions.go). Level 1 changes nothing on the client.
var featureNeeds = []featureNeed{
	{name: "transaction.version", level: 2, key: keyProduce, minVer: 12, loweredTo: 1},
}

// ApiVersions clamps an ApiVersions response body (after the response
// header) and returns the new body. requestVersion is the version the client
// sent; the rules are those of docs/protocol.md §3.1:
//
//   - every key kmsg knows that mustDecode reports, or that may carry an
//     address (Needs, any version), gets MaxVersion = min(upstream, kmsg max)
//     and is dropped when that falls below its MinVersion;
//   - a key kmsg does not know passes through untouched, unless mustDecode
//     reports it, in which case it is dropped (it cannot be decoded);
//   - Produce MinVersion is forced to 0 (KAFKA-18659, librdkafka#4956);
//   - SaslHandshake max <= 1 (KAFKA-9577); ApiVersions max <= 4 (KIP-1242);
//   - transaction.version is lowered to 1 in FinalizedFeatures and
//     SupportedFeatures when Produce ends below v12 (dropped from
//     SupportedFeatures when its min is above 1).
//
// The body is a v0 body when it carries UNSUPPORTED_VERSION (35): a broker
// that does not know the request version answers at v0 (KIP-511,
// RequestContext.isUnsupportedApiVersionsRequest). A request version above
// kmsg's max with any other error code means the upstream answered at a
// version this build cannot read: the error wraps ErrUnknownVersion, and the
// caller should answer the client itself (UnsupportedApiVersions) so that it
// retries at a version we know.
func ApiVersions(requestVersion int16, body []byte, mustDecode func(key int16) bool) ([]byte, error) {
	version := requestVersion
	if len(body) >= 2 && int16(binary.BigEndian.Uint16(body)) == errUnsupportedVersion {
		version = 0
	} else if !wire.KnownVersion(keyApiVersions, requestVersion) {
		return nil, fmt.Errorf("clamp ApiVersions v%d response: %w", requestVersion, ErrUnknownVersion)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode ApiVersions v%d response: %w: %w", version, ErrMalformed, err)
	}
	clampKeys(resp, mustDecode)
	clampFeatures(resp)
	return resp.AppendTo(make([]byte, 0, len(body))), nil
}

// clampKeys applies the per-key rules to resp.ApiKeys in place.
//
// A key listed twice (no broker does that) keeps its first entry only:
// clients disagree on which one wins (a map in Java, an array slot in kgo,
// a binary search in librdkafka), and the feature checks below must see the
// range the client uses.
func clampKeys(resp *kmsg.ApiVersionsResponse, mustDecode func(key int16) bool) {
	seen := make(map[int16]bool, len(resp.ApiKeys))
	resp.ApiKeys = slices.DeleteFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
		dup := seen[k.ApiKey]
		seen[k.ApiKey] = true
		return dup
	})
	for i := range resp.ApiKeys {
		k := &resp.ApiKeys[i]
		if !mustClamp(k.ApiKey, mustDecode) {
			continue
		}
		k.MaxVersion = min(k.MaxVersion, wire.MaxVersion(k.ApiKey))
		switch k.ApiKey {
		case keyProduce:
			// Kafka 4.0 advertises Produce v0-2 while rejecting them; a
			// min of 3 makes librdkafka turn compression off (KAFKA-18659).
			k.MinVersion = 0
		case keySaslHandshake:
			k.MaxVersion = min(k.MaxVersion, saslHandshakeMax)
		case keyApiVersions:
			k.MaxVersion = min(k.MaxVersion, apiVersionsMax)
		}
	}
	// Only clamped keys can end up here: an untouched key keeps whatever
	// the upstream sent, even an empty range.
	resp.ApiKeys = slices.DeleteFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
		return k.MaxVersion < k.MinVersion && mustClamp(k.ApiKey, mustDecode)
	})
}

// mustClamp reports whether key's range is capped at kmsg's max: keys the
// caller decodes, keys that may carry addresses, and the two keys with fixed
// caps. For a key kmsg does not know the cap is -1, which drops it.
func mustClamp(key int16, mustDecode func(key int16) bool) bool {
	switch {
	case key == keyProduce, key == keySaslHandshake, key == keyApiVersions:
		return true
	case needsAnyVersion(key):
		return true
	case mustDecode != nil && mustDecode(key):
		return true
	}
	return false
}

// keyMax is key's advertised max after clamping, or -1 when it is absent.
func keyMax(resp *kmsg.ApiVersionsResponse, key int16) int16 {
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key {
			return k.MaxVersion
		}
	}
	return -1
}

// clampFeatures keeps feature levels consistent with the clamped keys.
// Finalized levels are lowered; a supported range whose min is above the
// lowered level is dropped, since the broker cannot offer it at all.
func clampFeatures(resp *kmsg.ApiVersionsResponse) {
	for _, need := range featureNeeds {
		if keyMax(resp, need.key) >= need.minVer {
			continue
		}
		for i := range resp.FinalizedFeatures {
			f := &resp.FinalizedFeatures[i]
			if f.Name != need.name || f.MaxVersionLevel < need.level {
				continue
			}
			f.MaxVersionLevel = need.loweredTo
			f.MinVersionLevel = min(f.MinVersionLevel, need.loweredTo)
		}
		resp.SupportedFeatures = slices.DeleteFunc(resp.SupportedFeatures, func(f kmsg.ApiVersionsResponseSupportedFeature) bool {
			return f.Name == need.name && f.MinVersion > need.loweredTo
		})
		for i := range resp.SupportedFeatures {
			f := &resp.SupportedFeatures[i]
			if f.Name == need.name && f.MaxVersion >= need.level {
				f.MaxVersion = need.loweredTo
			}
		}
	}
}

// UnsupportedApiVersions returns the body a broker sends for an ApiVersions
// request at a version it does not know (KIP-511): a v0 body with
// UNSUPPORTED_VERSION and one ApiKeys entry for key 18 with the range the
// gateway accepts, so the client retries at most at v4. The gateway answers
// with it when a client sends an ApiVersions version above kmsg's max.
// The response header is v0, as for every ApiVersions response.
func UnsupportedApiVersions() []byte {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = errUnsupportedVersion
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: keyApiVersions, MinVersion: 0, MaxVersion: apiVersionsMax}}
	return resp.AppendTo(nil)
}
