package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateDelegationToken: v0-3
//
// Behavior:
// * Delegation tokens are not enabled (Kafka without
//   delegation.token.secret.key): every token request is answered
//   DELEGATION_TOKEN_AUTH_DISABLED, with the timestamps -1 and no token, as
//   Kafka's CreateDelegationTokenResponse.prepareResponse. The owner is the
//   request's OwnerPrincipal (v3+) when set, else empty: the broker does not
//   see the gateway's principal. Kafka answers a connection that did not
//   authenticate with SASL DELEGATION_TOKEN_REQUEST_NOT_ALLOWED first; the
//   broker cannot tell, and both refuse the same way.
//
// Version notes:
// * v1: throttle after response; v2: flexible
// * v3: OwnerPrincipalType/Name, TokenRequesterPrincipalType/Name (KIP-373)

func init() {
	regKey(int16(kmsg.CreateDelegationToken), 0, 3, syncHandler(handleCreateDelegationToken))
}

func handleCreateDelegationToken(_ *Conn, req *kmsg.CreateDelegationTokenRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	resp.ErrorCode = kerr.DelegationTokenAuthDisabled.Code
	if req.OwnerPrincipalName != nil && *req.OwnerPrincipalName != "" {
		resp.PrincipalName = *req.OwnerPrincipalName
		if req.OwnerPrincipalType != nil {
			resp.PrincipalType = *req.OwnerPrincipalType
		}
	}
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = -1, -1, -1
	resp.HMAC = []byte{}
	return resp, nil
}
