package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics: v0-6
//
// Behavior:
// * Deletes by name (v0-5 TopicNames, v6 Topics[].Topic) or by id (v6
//   Topics[].TopicID with a null name). The registry is persisted first,
//   then the partition folders are removed; pending fetches on the topic end
//   at their max wait.
// * Unknown name: UNKNOWN_TOPIC_OR_PARTITION; unknown id: UNKNOWN_TOPIC_ID;
//   both a name and an id: INVALID_REQUEST.
// * Internal topics (__consumer_offsets, __transaction_state):
//   INVALID_TOPIC_EXCEPTION, never deleted (internal_topics.go).
//
// Version notes:
// * v4: flexible; v5: ErrorMessage; v6: topic ids

func init() { regKey(20, 0, 6, syncHandler(handleDeleteTopics)) }

func handleDeleteTopics(c *Conn, req *kmsg.DeleteTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	reqs := req.Topics
	if req.Version < 6 {
		reqs = nil
		for _, n := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			reqs = append(reqs, rt)
		}
	}
	for _, rt := range reqs {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var err error
		var t *topic
		switch {
		case rt.Topic != nil && rt.TopicID != [16]byte{}:
			err = kafkaErr(kerr.InvalidRequest, "give a topic name or a topic id, not both")
		case rt.Topic != nil:
			if t = c.b.lookup(*rt.Topic); t == nil {
				err = kafkaErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", *rt.Topic)
			}
		default:
			if t = c.b.lookupID(rt.TopicID); t == nil {
				err = kafkaErr(kerr.UnknownTopicID, "no topic has this id")
			}
		}
		if t != nil {
			st.Topic, st.TopicID = kmsg.StringPtr(t.name), t.id
			err = c.b.deleteTopic(t)
		}
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		st.ErrorCode, st.ErrorMessage = errCode(err)
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
