package proxy

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// Coordinator routing: a group request goes to its group's coordinator,
// a transactional one to its transactional id's, both found upstream with
// FindCoordinator and cached in the view; NOT_COORDINATOR and
// COORDINATOR_NOT_AVAILABLE forget the cached one and reach the client,
// which retries the (virtual) coordinator. OffsetFetch v8+ and
// DescribeGroups batch groups and are split per coordinator.

const (
	groupKey int8 = 0 // FindCoordinator key types
	txnKey   int8 = 1
)

// coordOf names the coordinator a request must reach; ok false when it
// needs none (InitProducerId without a transactional id).
func coordOf(req kmsg.Request) (k coordKey, ok bool) {
	g := func(s string) (coordKey, bool) { return coordKey{groupKey, s}, true }
	x := func(s string) (coordKey, bool) { return coordKey{txnKey, s}, true }
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		return g(r.Group)
	case *kmsg.OffsetFetchRequest:
		return g(r.Group)
	case *kmsg.JoinGroupRequest:
		return g(r.Group)
	case *kmsg.HeartbeatRequest:
		return g(r.Group)
	case *kmsg.LeaveGroupRequest:
		return g(r.Group)
	case *kmsg.SyncGroupRequest:
		return g(r.Group)
	case *kmsg.OffsetDeleteRequest:
		return g(r.Group)
	case *kmsg.TxnOffsetCommitRequest:
		return g(r.Group)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return g(r.Group)
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID == nil {
			return coordKey{}, false
		}
		return x(*r.TransactionalID)
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version >= 4 && len(r.Transactions) > 0 {
			return x(r.Transactions[0].TransactionalID)
		}
		return x(r.TransactionalID)
	case *kmsg.AddOffsetsToTxnRequest:
		return x(r.TransactionalID)
	case *kmsg.EndTxnRequest:
		return x(r.TransactionalID)
	}
	return shareCoordOf(req)
}

// coordinatorKeys lists the coordinator-routed keys single-port serves.
var coordinatorKeys = map[int16]bool{apis.OffsetCommit: true, apis.OffsetFetch: true, apis.JoinGroup: true, apis.Heartbeat: true,
	apis.LeaveGroup: true, apis.SyncGroup: true, apis.DescribeGroups: true, apis.DeleteGroups: true, apis.OffsetDelete: true,
	apis.TxnOffsetCommit: true, apis.ConsumerGroupHeartbeat: true, apis.InitProducerID: true, apis.AddPartitionsToTxn: true,
	apis.AddOffsetsToTxn: true, apis.EndTxn: true}

// coordinatorFor returns k's coordinator, counting the upstream lookups.
func (t *tunnel) coordinatorFor(k coordKey) (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), t.s.srv.opts.DialTimeout)
	defer cancel()
	n, asked, err := t.view.coordinator(ctx, k)
	t.count(routeFindCoordinator, asked)
	return n, err
}

// coordinatorsFor returns the coordinators of keys (one kind): one
// upstream round trip for all the uncached ones (route_coordinators.go).
func (t *tunnel) coordinatorsFor(kind int8, keys []string) (found map[string]int32, failed map[string]error) {
	ctx, cancel := context.WithTimeout(context.Background(), t.s.srv.opts.DialTimeout)
	defer cancel()
	found, failed, asked := t.view.coordinators(ctx, kind, keys)
	t.count(routeFindCoordinator, asked)
	return found, failed
}

// routeCoordinator sends a coordinator request to its coordinator.
func (t *tunnel) routeCoordinator(req kmsg.Request, rep reply) error {
	if done, err := t.routeShareCoordinator(req, rep); done {
		return err
	}
	switch r := req.(type) {
	case *kmsg.OffsetFetchRequest:
		if r.Version >= 8 {
			return t.routeOffsetFetchGroups(r, rep)
		}
	case *kmsg.DescribeGroupsRequest:
		return t.routeDescribeGroups(r, rep)
	case *kmsg.DeleteGroupsRequest:
		return t.routeDeleteGroups(r, rep)
	}
	k, ok := coordOf(req)
	if !ok {
		if _, known := req.(*kmsg.InitProducerIDRequest); known {
			return t.routeAny(req, rep)
		}
		return badRequest(closeUnsupported, "%s is not served in single-port mode", apiName(req.Key()))
	}
	node, err := t.coordinatorFor(k)
	if err == nil {
		if _, err = t.conn(node); err != nil && !errors.Is(err, errConnClosedHere) {
			// the coordinator left the cluster: look it up again next time
			t.view.invalidate(false, &k)
		}
	}
	if err != nil {
		return t.answerCoordinatorError(req, rep, err)
	}
	return t.one(node, req, rep, func(resp kmsg.Response) {
		if coordinatorMoved(resp) {
			t.view.invalidate(false, &k)
		}
	})
}

// answerCoordinatorError answers a request whose coordinator could not
// be found with COORDINATOR_NOT_AVAILABLE, which clients retry, when the
// response has a top-level error code; otherwise the connection closes.
//
// A refusal the upstream gave for the id itself (authorization, a
// malformed id) reaches the client as that error: retrying it could not
// help, and the client must see why.
func (t *tunnel) answerCoordinatorError(req kmsg.Request, rep reply, err error) error {
	resp := req.ResponseKind()
	code := kerr.CoordinatorNotAvailable.Code
	var ke *kerr.Error
	if errors.As(err, &ke) && coordinatorRefusal(ke.Code) {
		code = ke.Code
	}
	if !setTopError(resp, code) {
		return err
	}
	t.event(routeCoordinatorLookup, "single-port: coordinator lookup failed", "conn", t.s.id, "api", apiName(req.Key()), "answered", kerr.ErrorForCode(code), "err", err)
	if rep != nil {
		rep(resp, nil)
	}
	return nil
}

// setTopError sets the top-level error code of the responses that have one.
func setTopError(resp kmsg.Response, code int16) bool {
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.InitProducerIDResponse:
		r.ErrorCode = code
	case *kmsg.AddOffsetsToTxnResponse:
		r.ErrorCode = code
	case *kmsg.EndTxnResponse:
		r.ErrorCode = code
	case *kmsg.ConsumerGroupHeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.OffsetFetchResponse:
		r.ErrorCode = code
	default:
		return setShareTopError(resp, code)
	}
	return true
}

// coordinatorMoved reports an answer saying the coordinator moved.
func coordinatorMoved(resp kmsg.Response) bool {
	moved := movedCode
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		return moved(r.ErrorCode)
	case *kmsg.HeartbeatResponse:
		return moved(r.ErrorCode)
	case *kmsg.SyncGroupResponse:
		return moved(r.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		return moved(r.ErrorCode)
	case *kmsg.InitProducerIDResponse:
		return moved(r.ErrorCode)
	case *kmsg.AddOffsetsToTxnResponse:
		return moved(r.ErrorCode)
	case *kmsg.EndTxnResponse:
		return moved(r.ErrorCode)
	case *kmsg.ConsumerGroupHeartbeatResponse:
		return moved(r.ErrorCode)
	case *kmsg.OffsetFetchResponse:
		return moved(r.ErrorCode)
	case *kmsg.OffsetCommitResponse:
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				if moved(p.ErrorCode) {
					return true
				}
			}
		}
	case *kmsg.TxnOffsetCommitResponse:
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				if moved(p.ErrorCode) {
					return true
				}
			}
		}
	case *kmsg.AddPartitionsToTxnResponse:
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				if moved(p.ErrorCode) {
					return true
				}
			}
		}
	}
	return shareCoordinatorMoved(resp)
}

// coordinatorRefusal reports FindCoordinator codes that refuse the id
// itself rather than say where its coordinator is.
func coordinatorRefusal(code int16) bool {
	switch code {
	case kerr.GroupAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code,
		kerr.ClusterAuthorizationFailed.Code, kerr.InvalidRequest.Code:
		return true
	}
	return false
}
