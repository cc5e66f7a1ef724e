package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs: v0-1
//
// Behavior:
// * TOPIC: applies SET, DELETE (revert to default), APPEND and SUBTRACT
//   (list configs only, i.e. cleanup.policy and the throttled-replica
//   lists; INVALID_CONFIG for others) to the topic's explicit configs.
//   A name twice in one resource is INVALID_REQUEST, as Kafka. The result
//   is validated as a whole, then applied and persisted.
// * BROKER: read-only here, INVALID_REQUEST.
// * GROUP: SET and DELETE of the group configs (group_configs.go; KIP-848,
//   KIP-932), validated per name, persisted in the coordinator journal.
// * ValidateOnly checks without changing anything.
//
// Version notes:
// * v1: flexible

func init() { regKey(44, 0, 1, syncHandler(handleIncrementalAlterConfigs)) }

func handleIncrementalAlterConfigs(c *Conn, req *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := c.incrementalAlter(rr, req.ValidateOnly)
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		sr.ErrorCode, sr.ErrorMessage = errCode(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (c *Conn) incrementalAlter(rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	if rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig {
		return c.b.groups.alterGroupConfigs(rr.ResourceName, rr.Configs, validateOnly)
	}
	t, err := c.alterTarget(rr.ResourceType, rr.ResourceName)
	if err != nil {
		return err
	}
	configs := c.b.topicConfigs(t)
	seen := make(map[string]bool)
	for _, cf := range rr.Configs {
		if seen[cf.Name] {
			return kafkaErr(kerr.InvalidRequest, "config %s appears more than once", cf.Name)
		}
		seen[cf.Name] = true
		def, known := topicConfigDefs[cf.Name]
		if !known {
			return kafkaErr(kerr.InvalidConfig, "unknown topic config name %q", cf.Name)
		}
		if cf.Op != kmsg.IncrementalAlterConfigOpDelete && cf.Value == nil {
			return kafkaErr(kerr.InvalidRequest, "config %s has a null value", cf.Name)
		}
		switch cf.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			configs[cf.Name] = *cf.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(configs, cf.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if def.kind != kindList {
				return kafkaErr(kerr.InvalidConfig, "%s is not a list; APPEND and SUBTRACT apply to list configs only", cf.Name)
			}
			cur, _ := c.b.configValue(configs, cf.Name)
			configs[cf.Name] = applyListOp(splitList(cur), splitList(*cf.Value), cf.Op == kmsg.IncrementalAlterConfigOpAppend)
		default:
			return kafkaErr(kerr.InvalidRequest, "unknown config operation %d", cf.Op)
		}
	}
	if err := validateConfigs(configs); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	return c.b.setTopicConfigs(t, configs)
}

// applyListOp appends (skipping values already present) or subtracts vals.
func applyListOp(cur, vals []string, add bool) string {
	var out []string
	if add {
		out = cur
		for _, v := range vals {
			if !contains(out, v) {
				out = append(out, v)
			}
		}
	} else {
		for _, v := range cur {
			if !contains(vals, v) {
				out = append(out, v)
			}
		}
	}
	s := ""
	for i, v := range out {
		if i > 0 {
			s += ","
		}
		s += v
	}
	return s
}
