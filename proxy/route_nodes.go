package proxy

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/rewrite"
)

// Every node id a single-port client sees is the virtual one (a client
// that trusts a real leader id routes wrongly; docs/protocol.md §1.3).
// Addresses are then the listener's, put in by the rewriter
// (mapper.Advertise answers the bootstrap address for every node).

// virtualize makes every node id in resp the virtual node, and learns
// what an upstream Metadata answer says about the cluster first.
func (t *tunnel) virtualize(resp kmsg.Response) {
	v := t.virtual
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		t.view.learnMetadata(r)
		virtualMetadata(r, v)
	case *kmsg.DescribeClusterResponse:
		if len(r.Brokers) > 0 {
			b := r.Brokers[0]
			b.NodeID, b.Rack = v, nil
			r.Brokers = r.Brokers[:1]
			r.Brokers[0] = b
		}
		if r.ControllerID >= 0 {
			r.ControllerID = v
		}
	case *kmsg.DescribeTopicPartitionsResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				p.LeaderID = virtualID(p.LeaderID, v)
				p.Replicas, p.ISR = virtualList(p.Replicas, v), virtualList(p.ISR, v)
				p.EligibleLeaderReplicas, p.LastKnownELR = virtualList(p.EligibleLeaderReplicas, v), virtualList(p.LastKnownELR, v)
				p.OfflineReplicas = nil
			}
		}
	case *kmsg.ListPartitionReassignmentsResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				p.Replicas, p.AddingReplicas, p.RemovingReplicas = virtualList(p.Replicas, v), virtualList(p.AddingReplicas, v), virtualList(p.RemovingReplicas, v)
			}
		}
	case *kmsg.ProduceResponse:
		virtualProduce(r, v)
		for i := range r.Brokers {
			b := &r.Brokers[i]
			h, p, _ := t.adv.Advertise(rewrite.Broker, b.NodeID, b.Host, b.Port)
			b.Host, b.Port = h, p
		}
	case *kmsg.FetchResponse:
		virtualFetch(r, v)
		for i := range r.Brokers {
			b := &r.Brokers[i]
			h, p, _ := t.adv.Advertise(rewrite.Broker, b.NodeID, b.Host, b.Port)
			b.Host, b.Port = h, p
		}
	}
}

func virtualMetadata(r *kmsg.MetadataResponse, v int32) {
	if len(r.Brokers) > 0 {
		b := r.Brokers[0]
		b.NodeID, b.Rack = v, nil
		r.Brokers = append(r.Brokers[:0], b)
	}
	if r.ControllerID >= 0 {
		r.ControllerID = v
	}
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			p := &r.Topics[i].Partitions[j]
			p.Leader = virtualID(p.Leader, v)
			p.Replicas, p.ISR = virtualList(p.Replicas, v), virtualList(p.ISR, v)
			p.OfflineReplicas = nil
		}
	}
}

// virtualProduce: the KIP-951 CurrentLeader and NodeEndpoints.
func virtualProduce(r *kmsg.ProduceResponse, v int32) {
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			p := &r.Topics[i].Partitions[j]
			p.CurrentLeader.LeaderID = virtualID(p.CurrentLeader.LeaderID, v)
		}
	}
	if len(r.Brokers) > 0 {
		b := r.Brokers[0]
		b.NodeID, b.Rack = v, nil
		r.Brokers = append(r.Brokers[:0], b)
	}
}

// virtualFetch: CurrentLeader, NodeEndpoints, and no preferred read
// replica (KIP-392): the client must keep fetching from the virtual node.
func virtualFetch(r *kmsg.FetchResponse, v int32) {
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			p := &r.Topics[i].Partitions[j]
			p.CurrentLeader.LeaderID = virtualID(p.CurrentLeader.LeaderID, v)
			p.PreferredReadReplica = -1
		}
	}
	if len(r.Brokers) > 0 {
		b := r.Brokers[0]
		b.NodeID, b.Rack = v, nil
		r.Brokers = append(r.Brokers[:0], b)
	}
}

// virtualID maps a real node id to the virtual one; -1 (none) stays.
func virtualID(id, v int32) int32 {
	if id < 0 {
		return id
	}
	return v
}

// virtualList maps a non-empty replica list to the one virtual node.
func virtualList(ids []int32, v int32) []int32 {
	if len(ids) == 0 {
		return ids
	}
	return []int32{v}
}

// answerGateway answers what the gateway answers itself in single-port
// mode: FindCoordinator (always the virtual node) and ApiVersions (an
// upstream broker's, limited to what single-port routing serves; the
// write side then clamps it to what this build decodes). SASL never
// gets here: it is terminated by the authentication stage or refused.
func (t *tunnel) answerGateway(req kmsg.Request, rep reply) error {
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		if rep != nil {
			rep(t.virtualCoordinator(r), nil)
		}
		return nil
	case *kmsg.ApiVersionsRequest:
		return t.apiVersions(r, rep)
	}
	return badRequest(closeUnsupported, "%s: SASL must be terminated at a single-port listener (listeners[].sasl)", apiName(req.Key()))
}

// virtualCoordinator: every coordinator is the virtual node; the host
// and port are filled in by the rewriter.
func (t *tunnel) virtualCoordinator(r *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.NodeID, resp.Host, resp.Port = t.virtual, "virtual", 0
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		return resp
	}
	for _, k := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = k, t.virtual, "virtual", 0
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

// singlePortServes lists the partition-leader keys whose split and
// merge single-port routing implements (DescribeProducers is in
// adminKeys); the other keys of that class are not offered.
var singlePortServes = map[int16]bool{apis.Produce: true, apis.Fetch: true, apis.ListOffsets: true, apis.OffsetForLeaderEpoch: true, apis.DeleteRecords: true}

// routable reports whether a single-port listener offers key.
func routable(key int16) bool {
	if adminKeys[key] {
		return true
	}
	switch apis.Of(key).Routing {
	case apis.PartitionLeader:
		return singlePortServes[key]
	case apis.AnyBroker, apis.Controller:
		return !notOnVirtualBroker[key]
	case apis.GatewayAnswered:
		return key == apis.ApiVersions || key == apis.FindCoordinator || key == apis.SASLHandshake || key == apis.SASLAuthenticate
	case apis.GroupCoordinator, apis.TxnCoordinator:
		return coordinatorKeys[key]
	case apis.FanOut:
		return key == apis.ListGroups
	}
	return false
}

// routableVersions drops the keys single-port routing does not serve.
func routableVersions(r *kmsg.ApiVersionsResponse) {
	keep := r.ApiKeys[:0]
	for _, k := range r.ApiKeys {
		if routable(k.ApiKey) {
			keep = append(keep, k)
		}
	}
	r.ApiKeys = keep
}

// apiVersions asks every known broker (a rolling upgrade may leave them
// on different versions) and answers the intersection, limited to the
// keys single-port serves; the write side then clamps it to what this
// build decodes. The client names the node it believes it reached (v5+):
// the virtual one, which no upstream broker is, so each is asked as a
// bootstrap connection asks.
func (t *tunnel) apiVersions(r *kmsg.ApiVersionsRequest, rep reply) error {
	parts := map[int32]kmsg.Request{}
	for _, n := range t.view.liveBrokers() {
		c := *r
		c.ClusterID, c.NodeID = nil, -1
		parts[n] = &c
	}
	if len(parts) == 0 {
		return fmt.Errorf("no upstream broker known yet")
	}
	// A broker that cannot be reached (it left the cluster; the node
	// registry keeps every node it has seen) is left out.
	return t.scatterPartial(parts, rep, func(m map[int32]kmsg.Response) (kmsg.Response, error) {
		if len(m) == 0 {
			return nil, errors.New("no upstream broker answered ApiVersions")
		}
		return intersectVersions(m), nil
	})
}

// intersectVersions merges ApiVersions answers: a key every broker
// offers, at the versions all of them serve. An error answer (an
// unsupported request version, KIP-511) is passed on as it is.
func intersectVersions(m map[int32]kmsg.Response) *kmsg.ApiVersionsResponse {
	var out *kmsg.ApiVersionsResponse
	nodes := make([]int32, 0, len(m))
	for n := range m {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		r := m[n].(*kmsg.ApiVersionsResponse)
		if r.ErrorCode != 0 {
			return r
		}
		if out == nil {
			out = r
			continue
		}
		out.ThrottleMillis = max(out.ThrottleMillis, r.ThrottleMillis)
		out.ApiKeys = intersectKeys(out.ApiKeys, r.ApiKeys)
	}
	routableVersions(out)
	return out
}

func intersectKeys(a, b []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey {
	byKey := make(map[int16]kmsg.ApiVersionsResponseApiKey, len(b))
	for _, k := range b {
		byKey[k.ApiKey] = k
	}
	keep := a[:0]
	for _, k := range a {
		o, ok := byKey[k.ApiKey]
		if !ok {
			continue
		}
		k.MinVersion, k.MaxVersion = max(k.MinVersion, o.MinVersion), min(k.MaxVersion, o.MaxVersion)
		if k.MinVersion <= k.MaxVersion {
			keep = append(keep, k)
		}
	}
	return keep
}
