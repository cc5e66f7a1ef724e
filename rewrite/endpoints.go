package rewrite

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// errCoordinatorNotAvailable is COORDINATOR_NOT_AVAILABLE (kerr code 15),
// the retriable error a broker returns when it cannot name a coordinator.
const errCoordinatorNotAvailable = 15

// apply rewrites every endpoint of a decoded response in place. The package
// comment says why these fields and what hiding an endpoint does to each.
//
// NOTE: this switch and the API table (apis.Info.EndpointsFrom) must list
// the same keys;
// TestEveryNeededKeyHasARewriter keeps them in step.
func (p *pass) apply(resp kmsg.Response) error {
	var err error
	switch r := resp.(type) {
	// KIP-951 leader hints: removed when hidden.
	case *kmsg.ProduceResponse:
		r.Brokers, err = keepIf(r.Brokers, func(b *kmsg.ProduceResponseBroker) (bool, error) {
			return p.endpoint(Broker, b.NodeID, &b.Host, &b.Port), nil
		})
	case *kmsg.FetchResponse:
		r.Brokers, err = keepIf(r.Brokers, func(b *kmsg.FetchResponseBroker) (bool, error) {
			return p.endpoint(Broker, b.NodeID, &b.Host, &b.Port), nil
		})
	case *kmsg.ShareFetchResponse:
		r.NodeEndpoints, err = keepIf(r.NodeEndpoints, func(b *kmsg.ShareFetchResponseNodeEndpoint) (bool, error) {
			return p.endpoint(Broker, b.NodeID, &b.Host, &b.Port), nil
		})
	case *kmsg.ShareAcknowledgeResponse:
		r.NodeEndpoints, err = keepIf(r.NodeEndpoints, func(b *kmsg.ShareAcknowledgeResponseNodeEndpoint) (bool, error) {
			return p.endpoint(Broker, b.NodeID, &b.Host, &b.Port), nil
		})

	// Node lists other fields refer to by id: kept, blanked when hidden.
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			b := &r.Brokers[i]
			p.brokerInPlace(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.DescribeClusterResponse:
		err = p.describeCluster(r)
	case *kmsg.FindCoordinatorResponse:
		p.findCoordinator(r)

	// KRaft controller endpoints: removed when hidden.
	case *kmsg.DescribeQuorumResponse:
		for i := range r.Nodes {
			n := &r.Nodes[i]
			n.Listeners, err = keepIf(n.Listeners, func(l *kmsg.DescribeQuorumResponseNodeListener) (bool, error) {
				return p.endpoint16(Controller, n.NodeID, &l.Host, &l.Port)
			})
			if err != nil {
				break
			}
		}
	case *kmsg.VoteResponse:
		r.NodeEndpoints, err = keepIf(r.NodeEndpoints, func(e *kmsg.VoteResponseNodeEndpoint) (bool, error) {
			return p.endpoint16(Controller, e.NodeID, &e.Host, &e.Port)
		})
	case *kmsg.BeginQuorumEpochResponse:
		r.NodeEndpoints, err = keepIf(r.NodeEndpoints, func(e *kmsg.BeginQuorumEpochResponseNodeEndpoint) (bool, error) {
			return p.endpoint16(Controller, e.NodeID, &e.Host, &e.Port)
		})
	case *kmsg.EndQuorumEpochResponse:
		r.NodeEndpoints, err = keepIf(r.NodeEndpoints, func(e *kmsg.EndQuorumEpochResponseNodeEndpoint) (bool, error) {
			return p.endpoint16(Controller, e.NodeID, &e.Host, &e.Port)
		})
	case *kmsg.FetchSnapshotResponse:
		r.NodeEndpoints, err = keepIf(r.NodeEndpoints, func(e *kmsg.FetchSnapshotResponseNodeEndpoint) (bool, error) {
			return p.endpoint16(Controller, e.NodeID, &e.Host, &e.Port)
		})
	case *kmsg.UpdateRaftVoterResponse:
		p.updateRaftVoter(r)

	default:
		return fmt.Errorf("no rewriter for key %d", resp.Key())
	}
	return err
}

// keepIf rewrites each element of s in place with keep and drops those for
// which keep reports false, preserving order. It reuses s's array.
func keepIf[T any](s []T, keep func(*T) (bool, error)) ([]T, error) {
	out := s[:0]
	for i := range s {
		ok, err := keep(&s[i])
		if err != nil {
			return s, err
		}
		if ok {
			out = append(out, s[i])
		}
	}
	clear(s[len(out):])
	return out, nil
}

// describeCluster maps Brokers. EndpointType 2 (v1+, KIP-919) means the
// entries are KRaft controllers, answered to an admin client bootstrapped
// with bootstrap.controllers; hidden controllers are removed. Broker entries
// stay in place because ControllerID refers to them.
func (p *pass) describeCluster(r *kmsg.DescribeClusterResponse) error {
	if r.Version >= 1 && r.EndpointType == 2 {
		var err error
		r.Brokers, err = keepIf(r.Brokers, func(b *kmsg.DescribeClusterResponseBroker) (bool, error) {
			return p.endpoint(Controller, b.NodeID, &b.Host, &b.Port), nil
		})
		return err
	}
	for i := range r.Brokers {
		b := &r.Brokers[i]
		p.brokerInPlace(b.NodeID, &b.Host, &b.Port)
	}
	return nil
}

// findCoordinator maps the single coordinator of v0–3 or the batched ones of
// v4+ (KIP-699). An entry with an error or NodeID < 0 is Kafka's
// Node.noNode (KafkaApis getCoordinator) and carries no endpoint.
func (p *pass) findCoordinator(r *kmsg.FindCoordinatorResponse) {
	if r.Version <= 3 {
		p.coordinator(&r.ErrorCode, r.Version >= 1, &r.ErrorMessage, &r.NodeID, &r.Host, &r.Port)
		return
	}
	for i := range r.Coordinators {
		c := &r.Coordinators[i]
		p.coordinator(&c.ErrorCode, true, &c.ErrorMessage, &c.NodeID, &c.Host, &c.Port)
	}
}

// coordinator maps one coordinator answer. A hidden coordinator becomes
// COORDINATOR_NOT_AVAILABLE, which every client retries; hasMsg reports
// whether the version carries ErrorMessage (v1+).
func (p *pass) coordinator(code *int16, hasMsg bool, msg **string, node *int32, host *string, port *int32) {
	if *code != 0 || *node < 0 {
		// Kafka sends Node.noNode here (-1, "", -1). A host in an error
		// entry is never meant to be used; blank it rather than pass on
		// an upstream name.
		if *host != "" {
			*host, *port = "", -1
			p.changed = true
		}
		return
	}
	if p.endpoint(Broker, *node, host, port) {
		return
	}
	*code, *node, *host, *port = errCoordinatorNotAvailable, -1, "", -1
	if hasMsg {
		m := "the coordinator is not reachable through this gateway"
		*msg = &m
	}
}

// updateRaftVoter maps CurrentLeader (tag 0). A hidden leader keeps its id
// and epoch and gets the schema defaults Host "" and Port 0 (kmsg then still
// writes the tag because the id is set).
func (p *pass) updateRaftVoter(r *kmsg.UpdateRaftVoterResponse) {
	l := &r.CurrentLeader
	if !p.endpoint(Controller, l.LeaderID, &l.Host, &l.Port) {
		l.Host, l.Port = "", 0
	}
}
