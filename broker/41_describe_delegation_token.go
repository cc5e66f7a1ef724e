package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeDelegationToken: v0-3
//
// Behavior:
// * Delegation tokens are not enabled (38_create_delegation_token.go):
//   DELEGATION_TOKEN_AUTH_DISABLED and no token details.
//
// Version notes:
// * v1: throttle after response; v2: flexible
// * v3: TokenRequesterPrincipalType/Name in the details (KIP-373)

func init() {
	regKey(int16(kmsg.DescribeDelegationToken), 0, 3, syncHandler(handleDescribeDelegationToken))
}

func handleDescribeDelegationToken(_ *Conn, req *kmsg.DescribeDelegationTokenRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeDelegationTokenResponse)
	resp.ErrorCode = kerr.DelegationTokenAuthDisabled.Code
	resp.TokenDetails = []kmsg.DescribeDelegationTokenResponseTokenDetail{}
	return resp, nil
}
