package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-2
//
// Behavior:
// * One broker, Config.NodeID (broker.node_id, 0 by default), which is
//   also the controller.
// * EndpointType 2 (controllers, KIP-919) gets MISMATCHED_ENDPOINT_TYPE;
//   any other value than 1 gets UNSUPPORTED_ENDPOINT_TYPE, as Kafka's
//   AuthHelper.computeDescribeClusterResponse.
//
// Version notes:
// * v1: EndpointType
// * v2: IncludeFencedBrokers, Broker.IsFenced (never fenced)

func init() { regKey(60, 0, 2, syncHandler(handleDescribeCluster)) }

func handleDescribeCluster(c *Conn, req *kmsg.DescribeClusterRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 {
		switch req.EndpointType {
		case 1:
		case 2:
			resp.ErrorCode = kerr.MismatchedEndpointType.Code
			resp.ErrorMessage = kmsg.StringPtr("this is a broker, not a controller")
			return resp, nil
		default:
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			return resp, nil
		}
		resp.EndpointType = 1
	}
	resp.ClusterID = c.b.clusterID
	resp.ControllerID = c.b.cfg.NodeID
	br := kmsg.NewDescribeClusterResponseBroker()
	br.NodeID, br.Host, br.Port = c.b.cfg.NodeID, c.b.advertisedHost, c.b.advertisedPort
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{br}
	return resp, nil
}
