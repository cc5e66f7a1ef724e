package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ExpireDelegationToken: v0-2
//
// Behavior:
// * Delegation tokens are not enabled (38_create_delegation_token.go):
//   DELEGATION_TOKEN_AUTH_DISABLED, ExpiryTimestamp -1.
//
// Version notes:
// * v1: throttle after response; v2: flexible

func init() {
	regKey(int16(kmsg.ExpireDelegationToken), 0, 2, syncHandler(handleExpireDelegationToken))
}

func handleExpireDelegationToken(_ *Conn, req *kmsg.ExpireDelegationTokenRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	resp.ErrorCode, resp.ExpiryTimestamp = kerr.DelegationTokenAuthDisabled.Code, -1
	return resp, nil
}
