package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-6
//
// Behavior:
// * Groups (type 0) and transactions (type 1): this node, which runs both
//   coordinators (groups.go, txns.go) for every key.
// * Share groups (type 2, KIP-932): INVALID_REQUEST.
// * An empty key gets INVALID_REQUEST, as Kafka's getCoordinator.
//
// Version notes:
// * v1: CoordinatorType, ErrorMessage
// * v3: flexible
// * v4: batched CoordinatorKeys / Coordinators (KIP-699)
// * v6: type 2 (share)

func init() { regKey(10, 0, 6, syncHandler(handleFindCoordinator)) }

func handleFindCoordinator(c *Conn, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	find := func(key string) (node int32, host string, port int32, code int16, msg *string) {
		switch {
		case req.CoordinatorType != 0 && req.CoordinatorType != 1:
			return -1, "", -1, kerr.InvalidRequest.Code, kmsg.StringPtr("share groups are not supported by the built-in broker")
		case key == "":
			return -1, "", -1, kerr.InvalidRequest.Code, kmsg.StringPtr("empty coordinator key")
		}
		return c.b.cfg.NodeID, c.b.advertisedHost, c.b.advertisedPort, 0, nil
	}
	if req.Version < 4 {
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = find(req.CoordinatorKey)
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key = key
		co.NodeID, co.Host, co.Port, co.ErrorCode, co.ErrorMessage = find(key)
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp, nil
}
