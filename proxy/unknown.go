package proxy

import (
	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/wire"
)

// Keys and versions the gateway cannot decode.
//
// "Everything that crosses the gateway is seen and checked" holds only for
// what it can decode, so by default a request whose key kmsg does not
// know, or whose version is newer than kmsg's, is refused: the connection
// closes without a response, as Kafka closes it for a key or version it
// has not enabled (SocketServer's parseRequestHeader throws
// InvalidRequestException). The refusal is counted
// (tollgate_malformed_frames_total{cause="unknown_api"}) and logged at
// most once a second. ApiVersions is the exception: a newer version is
// answered as a broker does (KIP-511).
//
// Options.ForwardUnknownAPIs opts in to relaying, as bytes, keys newer
// than this build (up to maxForwardedKey) and newer versions of keys whose
// responses carry no address. Policy can still name them (by number, or
// the group "unknown") and deny them; a denied one closes the connection,
// since no answer can be built for a key the gateway cannot encode. Keys
// whose responses carry addresses are never forwarded at an unknown
// version: an unrewritten address would leak (DESIGN.md, invariant 3).
// The built-in broker serves only what it knows, so nothing is forwarded
// to it.

// maxForwardedKey is the largest key ForwardUnknownAPIs relays; policy
// rules can name keys up to it (configs.ResolveAPI).
const maxForwardedKey = 127

// checkDecodable refuses a request the gateway cannot decode, unless the
// configuration forwards it.
func (s *session) checkDecodable(h wire.RequestHeader) error {
	if h.Known || h.Key == apis.ApiVersions { // answered at any version (KIP-511)
		return nil
	}
	if needsKey(h.Key) {
		// Responses of this key carry addresses and this build cannot
		// decode this version. The gateway never offers such a version in
		// ApiVersions, so a client that sends it ignored negotiation.
		return s.refuseUnknown(h, "its responses carry broker addresses the gateway must rewrite")
	}
	if s.srv.opts.ForwardUnknownAPIs && s.local == nil && h.Key >= 0 && h.Key <= maxForwardedKey {
		return nil
	}
	return s.refuseUnknown(h, "the gateway cannot decode it (set upstream.forward_unknown_apis to relay newer keys)")
}

func (s *session) refuseUnknown(h wire.RequestHeader, why string) error {
	s.hooks.Malformed("unknown_api")
	if s.srv.noisy.Allow("unknown_api", s.remote) {
		s.log.Warn("refused a request the gateway cannot decode", "api", apiName(h.Key), "key", h.Key, "version", h.Version)
	}
	return badRequest(closeUnsupported, "%s v%d was not offered by the gateway: %s", apiName(h.Key), h.Version, why)
}
