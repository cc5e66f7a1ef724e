// Package policy decides, request by request, what the gateway lets
// through: the compiled form of the configuration's policy section.
//
// It is pure: it imports configs, kmsg, kerr and x/time/rate, never
// proxy. The gateway session uses it like this:
//
//	eng := current.Load()                   // *Engine, swapped atomically on reload
//	if eng.NeedsBody(subj, key, version) { // no allocation; false for key-only policies
//		body = decode(frame)
//	}
//	v := eng.Check(&policy.Request{Subject: subj, Key: key, Version: version, Size: len(frame), Body: body, Names: ids, Now: now})
//	switch v.Action {
//	case policy.Allow:   forward the frame as it is
//	case policy.Deny:    answer v.Response (or close when v.Close)
//	case policy.Partial: forward v.Forward, call v.Merge(resp) on the answer
//	}
//	then SetThrottle(resp, v.Throttle) and mute the connection for v.Throttle
//	(or delay the response when !AppliesAfterResponse(key, version)),
//	and for Fetch add OnResponse(subj, key, len(respFrame), now).
//
// # Evaluation
//
// Rules are evaluated in order. The first allow or deny rule whose
// conditions all hold decides; a rule with only a rate (no action) charges
// its budget and evaluation goes on; a rule with action allow and a rate
// charges and decides. When no rule decides, the policy default does,
// except for ApiVersions, SaslHandshake and SaslAuthenticate (a client
// cannot even learn it is denied without them) and the Metadata request
// itself, whose topics the default decides one by one.
//
// Requests are decided per resource ("unit"): each topic (with the group
// or transactional id it is used under), or each group or transactional id
// a request names, or the request as a whole when it names none. Rules
// with a topic, group or transactional id condition match only units that
// have that resource. Produce, Fetch and Metadata are split: allowed
// topics proceed and denied ones get their error (Verdict Partial). Any
// other request with a denied unit is denied whole, each denied resource
// with its error and the others with OPERATION_NOT_ATTEMPTED.
//
// Errors are the ones Kafka uses (docs/protocol.md §4.1): a rule with a
// topic condition denies with TOPIC_AUTHORIZATION_FAILED, with a group
// condition GROUP_AUTHORIZATION_FAILED, with a transactional id condition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; a rule on connection and API only
// uses the key's own error (topic keys 29, group keys 30, transaction keys
// 53, delegation tokens 65, everything else CLUSTER_AUTHORIZATION_FAILED).
// A topic id the gateway has no name for gets UNKNOWN_TOPIC_ID when a
// topic rule could have matched it.
//
// Auto-creation: a named-topics Metadata request that would auto-create
// a topic the subject may not create (the CreateTopics decision for that
// topic) is forwarded with AllowAutoTopicCreation false, raised to v4 when
// older; one that also names a topic the subject may create, not yet
// tried (Request.Creations), is split over two rounds (partial.go).
//
// Fetch sessions: a Fetch that is allowed in part is forwarded as a
// sessionless full fetch (KIP-227 session ids cannot survive partitions
// disappearing from the request); the client then drops its session and
// keeps sending full fetches, which stays correct.
//
// # Rates
//
// See rate.go: token buckets per client id, principal, address or shared,
// bounded per rule (MaxKeysPerRule), surviving reloads for unchanged rules
// (CompileFrom). Throttling follows Kafka's quotas (KIP-219).
package policy
