package proxy

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// Any-broker keys that name a broker. Most any-broker keys (topic admin,
// ACLs, quotas) mean the same on every broker; these do not:
//   - DescribeConfigs, AlterConfigs and IncrementalAlterConfigs with a
//     BROKER or BROKER_LOGGER resource name one broker by id. A broker
//     answers INVALID_REQUEST for an id other than its own (Kafka's
//     ConfigAdminManager), so the virtual id is replaced by the id of the
//     broker the request goes to, and put back in the answer. Describing
//     the virtual broker shows that broker's configuration; altering it
//     is refused per resource, because it would change one broker of a
//     cluster the client sees as one (the cluster-wide default, resource
//     name "", is the way to change every broker).
//   - GetTelemetrySubscriptions and PushTelemetry (KIP-714): a broker
//     knows only the subscriptions it handed out, so a tunnel sends all
//     its telemetry to one broker (telemetryNode), chosen on first use.
//   - Controller keys (CreateTopics, DeleteTopics, CreatePartitions, ...)
//     go to the controller the latest Metadata named (routeController).
//   - ListPartitionReassignments lists replica ids: made the virtual one,
//     as Metadata's are (virtualize).
//
// Not offered at all (notOnVirtualBroker): keys whose request names
// replicas, log directories or controller voters by broker id, which a
// client that sees one broker cannot name meaningfully.

// notOnVirtualBroker are the any-broker and controller keys a
// single-port listener does not offer.
var notOnVirtualBroker = map[int16]bool{
	apis.AlterReplicaLogDirs:       true, // moves one broker's replica between its log directories
	apis.AlterPartitionAssignments: true, // names the replicas' broker ids
	apis.DescribeQuorum:            true, // the KRaft controller quorum's ids and addresses
}

// isBrokerResource reports whether a config resource names one broker.
func isBrokerResource(t kmsg.ConfigResourceType) bool {
	return t == kmsg.ConfigResourceTypeBroker || t == kmsg.ConfigResourceTypeBrokerLogger
}

// routeAnyBroker sends an any-broker or controller request to one
// upstream broker, with the per-key rules above.
func (t *tunnel) routeAnyBroker(req kmsg.Request, rep reply) error {
	if isTelemetry(req.Key()) {
		node, err := t.telemetryBroker()
		if err != nil {
			return err
		}
		return t.one(node, req, rep, t.virtualize)
	}
	if apis.Of(req.Key()).Routing == apis.Controller {
		return t.routeController(req, rep)
	}
	node, err := t.reachableBroker()
	if err != nil {
		return err
	}
	virtual, real := strconv.Itoa(int(t.virtual)), strconv.Itoa(int(node))
	switch r := req.(type) {
	case *kmsg.DescribeConfigsRequest:
		c := *r // the client's request stays as the audit trail saw it
		c.Resources = slices.Clone(r.Resources)
		for i := range c.Resources {
			if isBrokerResource(c.Resources[i].ResourceType) && c.Resources[i].ResourceName == virtual {
				c.Resources[i].ResourceName = real
			}
		}
		return t.one(node, &c, rep, func(resp kmsg.Response) {
			rs := resp.(*kmsg.DescribeConfigsResponse).Resources
			for i := range rs {
				if isBrokerResource(rs[i].ResourceType) && rs[i].ResourceName == real {
					rs[i].ResourceName = virtual
					rs[i].Configs = virtualBrokerConfigs(rs[i].Configs, virtual)
				}
			}
		})
	case *kmsg.AlterConfigsRequest, *kmsg.IncrementalAlterConfigsRequest:
		return t.routeAlterConfigs(node, req, rep)
	}
	return t.one(node, req, rep, t.virtualize)
}

// routeController sends a controller key to the controller the latest
// Metadata named, else to any reachable broker. An answer of
// NOT_CONTROLLER reaches the client (which retries, as against a real
// cluster) and makes the view forget the controller and refresh.
func (t *tunnel) routeController(req kmsg.Request, rep reply) error {
	node, ok := t.view.controllerNode()
	if ok {
		if _, err := t.conn(node); err != nil {
			ok = false
			t.view.forgetController() // the next Metadata names a live one
		}
	}
	if !ok {
		var err error
		if node, err = t.reachableBroker(); err != nil {
			return err
		}
	}
	return t.one(node, req, rep, func(resp kmsg.Response) {
		t.virtualize(resp)
		if answeredNotController(resp) {
			t.view.forgetController()
		}
	})
}

// answeredNotController reports a NOT_CONTROLLER in a controller key's
// answer (per topic, per user, or top-level).
func answeredNotController(resp kmsg.Response) bool {
	code := kerr.NotController.Code
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		return slices.ContainsFunc(r.Topics, func(x kmsg.CreateTopicsResponseTopic) bool { return x.ErrorCode == code })
	case *kmsg.DeleteTopicsResponse:
		return slices.ContainsFunc(r.Topics, func(x kmsg.DeleteTopicsResponseTopic) bool { return x.ErrorCode == code })
	case *kmsg.CreatePartitionsResponse:
		return slices.ContainsFunc(r.Topics, func(x kmsg.CreatePartitionsResponseTopic) bool { return x.ErrorCode == code })
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		return slices.ContainsFunc(r.Results, func(x kmsg.AlterUserSCRAMCredentialsResponseResult) bool { return x.ErrorCode == code })
	case *kmsg.ElectLeadersResponse:
		return r.ErrorCode == code
	case *kmsg.ListPartitionReassignmentsResponse:
		return r.ErrorCode == code
	case *kmsg.UpdateFeaturesResponse:
		return r.ErrorCode == code
	}
	return false
}

// brokerIdentityConfigs name the broker (its id becomes the virtual one)
// and brokerAddressConfigs its listeners (left out: the client reaches
// the cluster only at the gateway's address).
var (
	brokerIdentityConfigs = map[string]bool{"broker.id": true, "node.id": true}
	brokerAddressConfigs  = map[string]bool{"listeners": true, "advertised.listeners": true,
		"advertised.host.name": true, "advertised.port": true, "host.name": true, "port": true}
)

// virtualBrokerConfigs makes the answering broker's configuration the
// virtual broker's: no real node id or listener address is shown.
func virtualBrokerConfigs(cs []kmsg.DescribeConfigsResponseResourceConfig, virtual string) []kmsg.DescribeConfigsResponseResourceConfig {
	cs = slices.DeleteFunc(cs, func(c kmsg.DescribeConfigsResponseResourceConfig) bool { return brokerAddressConfigs[c.Name] })
	for i := range cs {
		if !brokerIdentityConfigs[cs[i].Name] {
			continue
		}
		cs[i].Value = kmsg.StringPtr(virtual)
		for j := range cs[i].ConfigSynonyms {
			cs[i].ConfigSynonyms[j].Value = kmsg.StringPtr(virtual)
		}
	}
	return cs
}

func isTelemetry(key int16) bool {
	return key == apis.GetTelemetrySubscriptions || key == apis.PushTelemetry
}

// telemetryBroker is the tunnel's telemetry broker: kept while the view
// lists it live, else chosen again.
func (t *tunnel) telemetryBroker() (int32, error) {
	if t.telemetryNode != nil && slices.Contains(t.view.liveBrokers(), *t.telemetryNode) {
		return *t.telemetryNode, nil
	}
	node, err := t.reachableBroker()
	if err != nil {
		return 0, err
	}
	t.telemetryNode = &node
	return node, nil
}

// virtualBrokerAlterMessage says why altering the virtual broker's
// configuration is refused.
const virtualBrokerAlterMessage = "this single-port listener presents the whole cluster as one broker; altering it would change one upstream broker: alter the cluster-wide default (resource name \"\") instead"

// refusedAlter is one refused resource of an alter answer, in request
// order.
type refusedAlter struct {
	typ  kmsg.ConfigResourceType
	name string
}

// routeAlterConfigs refuses the resources that name the virtual broker
// and forwards the rest; the answer lists every resource.
func (t *tunnel) routeAlterConfigs(node int32, req kmsg.Request, rep reply) error {
	refused, forward := splitVirtualAlter(req, strconv.Itoa(int(t.virtual)))
	if len(refused) == 0 {
		return t.one(node, req, rep, t.virtualize)
	}
	if forward == nil {
		if rep != nil {
			rep(appendRefusedAlter(req.ResponseKind(), refused), nil)
		}
		return nil
	}
	return t.one(node, forward, rep, func(resp kmsg.Response) { appendRefusedAlter(resp, refused) })
}

// splitVirtualAlter takes the virtual broker's resources out of an alter
// request: forward is nil when none is left.
func splitVirtualAlter(req kmsg.Request, virtual string) (refused []refusedAlter, forward kmsg.Request) {
	names := func(typ kmsg.ConfigResourceType, name string) bool {
		if isBrokerResource(typ) && name == virtual {
			refused = append(refused, refusedAlter{typ, name})
			return false
		}
		return true
	}
	switch r := req.(type) {
	case *kmsg.AlterConfigsRequest:
		c := *r
		c.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(x kmsg.AlterConfigsRequestResource) bool { return !names(x.ResourceType, x.ResourceName) })
		if len(c.Resources) > 0 {
			forward = &c
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		c := *r
		c.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(x kmsg.IncrementalAlterConfigsRequestResource) bool {
			return !names(x.ResourceType, x.ResourceName)
		})
		if len(c.Resources) > 0 {
			forward = &c
		}
	}
	return refused, forward
}

// appendRefusedAlter adds the refused resources to an alter answer
// (INVALID_REQUEST, with the reason).
func appendRefusedAlter(resp kmsg.Response, refused []refusedAlter) kmsg.Response {
	msg := virtualBrokerAlterMessage
	for _, x := range refused {
		switch r := resp.(type) {
		case *kmsg.AlterConfigsResponse:
			res := kmsg.NewAlterConfigsResponseResource()
			res.ErrorCode, res.ErrorMessage, res.ResourceType, res.ResourceName = kerr.InvalidRequest.Code, &msg, x.typ, x.name
			r.Resources = append(r.Resources, res)
		case *kmsg.IncrementalAlterConfigsResponse:
			res := kmsg.NewIncrementalAlterConfigsResponseResource()
			res.ErrorCode, res.ErrorMessage, res.ResourceType, res.ResourceName = kerr.InvalidRequest.Code, &msg, x.typ, x.name
			r.Resources = append(r.Resources, res)
		}
	}
	return resp
}
