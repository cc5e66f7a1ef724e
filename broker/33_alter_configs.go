package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs: v0-2
//
// Behavior:
// * TOPIC: replaces the topic's whole set of explicit configs with the
//   ones given (the non-incremental semantics: anything not named reverts
//   to its default). Names and values are validated (INVALID_CONFIG); a
//   null value is INVALID_REQUEST. Applied to every partition log at once
//   and persisted.
// * BROKER: read-only here, INVALID_REQUEST.
// * ValidateOnly checks without changing anything.
//
// Version notes:
// * v1: throttle after the response; v2: flexible

func init() { regKey(33, 0, 2, syncHandler(handleAlterConfigs)) }

func handleAlterConfigs(c *Conn, req *kmsg.AlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := c.alterConfigs(rr, req.ValidateOnly)
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		sr.ErrorCode, sr.ErrorMessage = errCode(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (c *Conn) alterConfigs(rr kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	t, err := c.alterTarget(rr.ResourceType, rr.ResourceName)
	if err != nil {
		return err
	}
	configs := make(map[string]string, len(rr.Configs))
	for _, cf := range rr.Configs {
		if cf.Value == nil {
			return kafkaErr(kerr.InvalidRequest, "config %s has a null value", cf.Name)
		}
		configs[cf.Name] = *cf.Value
	}
	if err := validateConfigs(configs); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	return c.b.setTopicConfigs(t, configs)
}

// alterTarget resolves the resource of an Alter/IncrementalAlterConfigs.
func (c *Conn) alterTarget(typ kmsg.ConfigResourceType, name string) (*topic, error) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		t := c.b.lookup(name)
		if t == nil {
			return nil, kafkaErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
		}
		return t, nil
	case kmsg.ConfigResourceTypeBroker:
		return nil, kafkaErr(kerr.InvalidRequest, "broker configs of the built-in broker are read-only; set them in tollgate's configuration")
	}
	return nil, kafkaErr(kerr.InvalidRequest, "the built-in broker alters only topic configs")
}
