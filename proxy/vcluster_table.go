package proxy

import (
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// The table of virtual-cluster rewrites: one row per API key (apis
// constants) a tenant session may send, each with a request rewrite
// (the tenant's names to upstream names, in place on the decoded
// request) and a response rewrite (upstream names back, and everything
// outside the tenant dropped or refused). A key with no row is refused
// (vcluster_stage.go): a request the gateway does not know how to scope
// is never passed through. Produce and Fetch are rewritten without a
// decode on their hot path (vcluster_records.go); their rows here are the
// decoded path (old versions, masked topic ids, single-port).
//
// Names: the tenant's name N is prefix+N upstream. An upstream name
// without the prefix, or that is the prefix alone, is not the tenant's:
// a listing leaves it out, an answer about it says the key's
// not-found error. A tenant cannot name another tenant's resource: every
// name it sends is prefixed, so "team-b.x" from team-a is
// "team-a.team-b.x" upstream. Topic ids (KIP-516) of topics that are not
// the tenant's are masked before they go upstream (XOR with a
// per-session key, so the upstream answers UNKNOWN_TOPIC_ID) and
// unmasked in the answer. Error messages lose every occurrence of the
// prefix.

// vcEntry is one key's row.
type vcEntry struct {
	req  func(n *vcNames, r kmsg.Request) *vcRefusal
	resp func(n *vcNames, r kmsg.Response)
}

// vcRefusal refuses a whole request: code is the Kafka error the answer
// carries, reason labels the metric and the log line.
type vcRefusal struct {
	code   int16
	reason string
}

var (
	refuseEmptyTopic = &vcRefusal{kerr.InvalidTopicException.Code, "invalid_name"}
	refuseUnscoped   = &vcRefusal{kerr.InvalidRequest.Code, "unscoped_request"}
	refuseRegex      = &vcRefusal{kerr.InvalidRegularExpression.Code, "unscoped_regex"}
	refuseAlter      = &vcRefusal{kerr.ClusterAuthorizationFailed.Code, "cluster_resource"}
)

// vcNames is one tenant session's view: its prefix, the server's topic
// id view and the session's id mask.
type vcNames struct {
	prefix string
	ids    *topicIDView
	mask   [16]byte
	// asked are the topic ids a Metadata request named (a copy of the
	// session's vcNames carries them to the answer).
	asked [][16]byte
	// listAll are the groups (tenant names) an OffsetFetch v10+ asked
	// for all their topics: their answers list ids (idListed).
	listAll []string
}

// up is name upstream.
func (n *vcNames) up(s *string) { *s = n.prefix + *s }

// upTopic is up for a topic name; false for an empty one (Kafka has no
// topic "", and prefix+"" would be a real upstream name).
func (n *vcNames) upTopic(s *string) bool {
	if *s == "" {
		return false
	}
	*s = n.prefix + *s
	return true
}

// down strips the prefix from an upstream name; ok is false for a name
// that is not the tenant's.
func (n *vcNames) down(s *string) bool {
	rest, ok := strings.CutPrefix(*s, n.prefix)
	if !ok || rest == "" {
		return false
	}
	*s = rest
	return true
}

// msg removes the prefix from an error message.
func (n *vcNames) msg(m *string) {
	if m != nil && strings.Contains(*m, n.prefix) {
		s := strings.ReplaceAll(*m, n.prefix, "")
		*m = s
	}
}

// idUp masks a topic id that is not the tenant's.
func (n *vcNames) idUp(id *[16]byte) {
	if *id == ([16]byte{}) || n.ids.owns(*id, n.prefix) {
		return
	}
	for i := range id {
		id[i] ^= n.mask[i]
	}
}

// idDown unmasks an id idUp masked (an id that is not the tenant's in an
// answer can only be one the request named).
func (n *vcNames) idDown(id *[16]byte) {
	if *id == ([16]byte{}) || n.ids.owns(*id, n.prefix) {
		return
	}
	for i := range id {
		id[i] ^= n.mask[i]
	}
}

// learn records an upstream topic's id.
func (n *vcNames) learn(id [16]byte, upstream string) { n.ids.learn(id, upstream) }

// regex scopes a tenant's topic regex (KIP-848 SubscribedTopicRegex,
// matched by the broker against whole names): it must parse on its own
// (so it cannot close the group it is put in), and it is sent in its
// parsed, normalized form inside the quoted prefix. ok is false for a
// regex that does not parse.
func (n *vcNames) regex(re string) (string, bool) {
	// The broker matches whole names, so anchors at the ends mean
	// nothing there; inside the prefix they would never match.
	re = strings.TrimPrefix(strings.TrimPrefix(re, "^"), `\A`)
	if strings.HasSuffix(re, `\z`) && !strings.HasSuffix(re, `\\z`) {
		re = strings.TrimSuffix(re, `\z`)
	} else if strings.HasSuffix(re, "$") && !strings.HasSuffix(re, `\$`) {
		re = strings.TrimSuffix(re, "$")
	}
	parsed, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return "", false
	}
	return quoteRegex(n.prefix) + "(?:" + parsed.String() + ")", true
}

// regexDown undoes regex for a describe answer; ok is false for a regex
// the gateway did not write.
func (n *vcNames) regexDown(re *string) bool {
	rest, ok := strings.CutPrefix(*re, quoteRegex(n.prefix)+"(?:")
	if !ok || !strings.HasSuffix(rest, ")") {
		return false
	}
	*re = rest[:len(rest)-1]
	return true
}

// quoteRegex quotes a prefix for Java's and Go's regex syntax alike
// (regexp.QuoteMeta's escapes are valid in both).
func quoteRegex(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Config resource types (KIP-133, KIP-714, KIP-848).
const (
	configTopic         = 2
	configBroker        = 4
	configBrokerLogger  = 8
	configClientMetrics = 16
	configGroup         = 32
)

// configUp prefixes a topic or group config resource; broker resources
// stay (alter: refused); other kinds are refused.
func (n *vcNames) configUp(typ kmsg.ConfigResourceType, name *string, alter bool) *vcRefusal {
	switch typ {
	case configTopic:
		if !n.upTopic(name) {
			return refuseEmptyTopic
		}
	case configGroup:
		n.up(name)
	case configBroker, configBrokerLogger:
		if alter {
			return refuseAlter
		}
	default:
		return refuseUnscoped
	}
	return nil
}

// configDown is configUp's answer side; false drops the resource.
func (n *vcNames) configDown(typ kmsg.ConfigResourceType, name *string, msg *string) bool {
	n.msg(msg)
	switch typ {
	case configTopic, configGroup:
		return n.down(name)
	}
	return true
}

// vcRewrite is one rewrite: of a request (the tenant's names made upstream
// names) or of an answer (upstream names made the tenant's). A row says
// once what each field is — w.topic, w.group, w.txn, w.topicID, w.msg —
// and the rewrite knows the direction. In a request the first refusal
// stops the rewrite: nothing after it is touched.
type vcRewrite struct {
	n      *vcNames
	answer bool
	ref    *vcRefusal
}

// topic is a topic name: prefixed in a request (an empty one refuses
// it), unprefixed in an answer. false: not rewritten (in an answer, a
// name that is not the tenant's).
func (w *vcRewrite) topic(s *string) bool {
	switch {
	case w.answer:
		return w.n.down(s)
	case w.ref != nil:
		return false
	case !w.n.upTopic(s):
		w.ref = refuseEmptyTopic
		return false
	}
	return true
}

// group is a group id (nil: a null one, left as it is); see topic.
func (w *vcRewrite) group(s *string) bool {
	switch {
	case s == nil:
		return false
	case w.answer:
		return w.n.down(s)
	case w.ref != nil:
		return false
	}
	w.n.up(s)
	return true
}

// txn is a transactional id; it is rewritten as a group id is.
func (w *vcRewrite) txn(s *string) bool { return w.group(s) }

// topicID is a topic id: one that is not the tenant's is masked in a
// request and unmasked in an answer.
func (w *vcRewrite) topicID(id *[16]byte) {
	if w.answer {
		w.n.idDown(id)
	} else if w.ref == nil {
		w.n.idUp(id)
	}
}

// topicOrID is a topic named by id when byID (KIP-516's versions), else
// by name.
func (w *vcRewrite) topicOrID(byID bool, name *string, id *[16]byte) bool {
	if byID {
		w.topicID(id)
		return true
	}
	return w.topic(name)
}

// msg is an error message of an answer: the prefix is removed.
func (w *vcRewrite) msg(m *string) { w.n.msg(m) }

// all rewrites every string of s as kind (w.topic, w.group, w.txn).
func (w *vcRewrite) all(s []string, kind func(*string) bool) {
	for i := range s {
		kind(&s[i])
	}
}

// config is a config resource's name, by its type: topics and groups
// are named; broker resources are left, but refused for an alter; any
// other kind is refused.
func (w *vcRewrite) config(typ kmsg.ConfigResourceType, name *string, alter bool) {
	switch {
	case w.answer:
		w.n.configDown(typ, name, nil)
	case w.ref == nil:
		w.ref = w.n.configUp(typ, name, alter)
	}
}

// regex is a tenant's topic or transactional id regex: scoped to the
// prefix (vcNames.regex); one that does not parse on its own refuses the
// request. Null or empty: left.
func (w *vcRewrite) regex(re **string) {
	if w.ref != nil || *re == nil || **re == "" {
		return
	}
	scoped, ok := w.n.regex(**re)
	if !ok {
		w.ref = refuseRegex
		return
	}
	*re = &scoped
}

// each calls f with every element of s, in place.
func each[T any](s []T, f func(*T)) {
	for i := range s {
		f(&s[i])
	}
}

// keep keeps, in place, the elements of s for which own is true (it
// rewrites them as it decides: a listing's entries that are the
// tenant's).
func keep[T any](s []T, own func(*T) bool) []T {
	out := s[:0]
	for i := range s {
		if own(&s[i]) {
			out = append(out, s[i])
		}
	}
	return out
}

// row makes a key's entry from its request rewrite and its answer
// rewrite.
func row[Q kmsg.Request, P kmsg.Response](req func(w *vcRewrite, q Q), resp func(w *vcRewrite, p P)) *vcEntry {
	return &vcEntry{
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			w := vcRewrite{n: n}
			req(&w, r.(Q))
			return w.ref
		},
		resp: func(n *vcNames, r kmsg.Response) { resp(&vcRewrite{n: n, answer: true}, r.(P)) },
	}
}

// noAnswer is the answer rewrite of a key whose answer has no names
// (the answer is still decoded and re-encoded, as with every row).
func noAnswer[P kmsg.Response](*vcRewrite, P) {}

// vcTable is the table, keyed by API key.
var vcTable = map[int16]*vcEntry{
	// Keys with no names at all pass untouched.
	apis.ApiVersions:               {},
	apis.SASLHandshake:             {},
	apis.SASLAuthenticate:          {},
	apis.DescribeCluster:           {},
	apis.GetTelemetrySubscriptions: {},
	apis.PushTelemetry:             {},

	apis.Produce: row(func(w *vcRewrite, q *kmsg.ProduceRequest) {
		w.txn(q.TransactionID)
		each(q.Topics, func(t *kmsg.ProduceRequestTopic) { w.topicOrID(q.Version >= 13, &t.Topic, &t.TopicID) })
	}, func(w *vcRewrite, p *kmsg.ProduceResponse) {
		each(p.Topics, func(t *kmsg.ProduceResponseTopic) {
			w.topicOrID(p.Version >= 13, &t.Topic, &t.TopicID)
			each(t.Partitions, func(x *kmsg.ProduceResponseTopicPartition) {
				w.msg(x.ErrorMessage)
				// A record's error names its partition (Kafka's
				// LogValidator: "... in topic partition team-a.x-0").
				each(x.ErrorRecords, func(e *kmsg.ProduceResponseTopicPartitionErrorRecord) { w.msg(e.ErrorMessage) })
			})
		})
	}),
	apis.Fetch: row(func(w *vcRewrite, q *kmsg.FetchRequest) {
		each(q.Topics, func(t *kmsg.FetchRequestTopic) { w.topicOrID(q.Version >= 13, &t.Topic, &t.TopicID) })
		each(q.ForgottenTopics, func(t *kmsg.FetchRequestForgottenTopic) { w.topicOrID(q.Version >= 13, &t.Topic, &t.TopicID) })
	}, func(w *vcRewrite, p *kmsg.FetchResponse) {
		each(p.Topics, func(t *kmsg.FetchResponseTopic) { w.topicOrID(p.Version >= 13, &t.Topic, &t.TopicID) })
	}),
	apis.ListOffsets: row(func(w *vcRewrite, q *kmsg.ListOffsetsRequest) {
		each(q.Topics, func(t *kmsg.ListOffsetsRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.ListOffsetsResponse) {
		each(p.Topics, func(t *kmsg.ListOffsetsResponseTopic) { w.topic(&t.Topic) })
	}),
	apis.Metadata: row(func(w *vcRewrite, q *kmsg.MetadataRequest) {
		// A topic asked by id is answered with its name: one outside
		// the tenant is made unknown in the answer (vcluster_stage.go
		// gives the answer the ids asked).
		each(q.Topics, func(t *kmsg.MetadataRequestTopic) {
			if t.Topic != nil {
				w.topic(t.Topic)
			}
		})
	}, func(w *vcRewrite, p *kmsg.MetadataResponse) {
		p.Topics = keep(p.Topics, func(t *kmsg.MetadataResponseTopic) bool {
			if t.Topic != nil {
				w.n.learn(t.TopicID, *t.Topic)
				name := *t.Topic
				if w.topic(&name) {
					t.Topic = &name
					return true
				}
			}
			if t.TopicID != ([16]byte{}) && w.n.idAsked(t.TopicID) {
				// Asked by id: a topic that is not the tenant's is
				// unknown to it (KIP-516).
				t.Topic, t.ErrorCode, t.Partitions, t.IsInternal = nil, kerr.UnknownTopicID.Code, nil, false
				return true
			}
			return false // a listing's entry that is not the tenant's
		})
	}),
	apis.FindCoordinator: row(func(w *vcRewrite, q *kmsg.FindCoordinatorRequest) {
		if q.CoordinatorType > 1 {
			w.ref = refuseUnscoped // share-partition keys (KIP-932) are the brokers'
			return
		}
		w.group(&q.CoordinatorKey) // or a transactional id: the same prefix
		w.all(q.CoordinatorKeys, w.group)
	}, func(w *vcRewrite, p *kmsg.FindCoordinatorResponse) {
		w.msg(p.ErrorMessage)
		each(p.Coordinators, func(c *kmsg.FindCoordinatorResponseCoordinator) {
			w.group(&c.Key)
			w.msg(c.ErrorMessage)
		})
	}),
	apis.JoinGroup:  row(func(w *vcRewrite, q *kmsg.JoinGroupRequest) { w.group(&q.Group) }, noAnswer[*kmsg.JoinGroupResponse]),
	apis.SyncGroup:  row(func(w *vcRewrite, q *kmsg.SyncGroupRequest) { w.group(&q.Group) }, noAnswer[*kmsg.SyncGroupResponse]),
	apis.Heartbeat:  row(func(w *vcRewrite, q *kmsg.HeartbeatRequest) { w.group(&q.Group) }, noAnswer[*kmsg.HeartbeatResponse]),
	apis.LeaveGroup: row(func(w *vcRewrite, q *kmsg.LeaveGroupRequest) { w.group(&q.Group) }, noAnswer[*kmsg.LeaveGroupResponse]),
	apis.OffsetCommit: row(func(w *vcRewrite, q *kmsg.OffsetCommitRequest) {
		w.group(&q.Group)
		each(q.Topics, func(t *kmsg.OffsetCommitRequestTopic) { w.topicOrID(q.Version >= 10, &t.Topic, &t.TopicID) })
	}, func(w *vcRewrite, p *kmsg.OffsetCommitResponse) {
		each(p.Topics, func(t *kmsg.OffsetCommitResponseTopic) { w.topicOrID(p.Version >= 10, &t.Topic, &t.TopicID) })
	}),
	apis.OffsetFetch: row(func(w *vcRewrite, q *kmsg.OffsetFetchRequest) {
		w.group(&q.Group)
		each(q.Topics, func(t *kmsg.OffsetFetchRequestTopic) { w.topic(&t.Topic) })
		each(q.Groups, func(g *kmsg.OffsetFetchRequestGroup) {
			w.group(&g.Group)
			each(g.Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) { w.topicOrID(q.Version >= 10, &t.Topic, &t.TopicID) })
		})
	}, func(w *vcRewrite, p *kmsg.OffsetFetchResponse) {
		p.Topics = keep(p.Topics, func(t *kmsg.OffsetFetchResponseTopic) bool { return w.topic(&t.Topic) })
		each(p.Groups, func(g *kmsg.OffsetFetchResponseGroup) {
			w.group(&g.Group)
			// All topics of the group: one not the tenant's is left out.
			// Asked for all, v10+ lists ids the tenant may not have
			// learnt yet: those pass as they are (idListed).
			all := p.Version >= 10 && slices.Contains(w.n.listAll, g.Group)
			g.Topics = keep(g.Topics, func(t *kmsg.OffsetFetchResponseGroupTopic) bool {
				if all {
					return w.n.idListed(t.TopicID)
				}
				return w.topicOrID(p.Version >= 10, &t.Topic, &t.TopicID)
			})
		})
	}),
	apis.DescribeGroups: row(func(w *vcRewrite, q *kmsg.DescribeGroupsRequest) {
		w.all(q.Groups, w.group)
	}, func(w *vcRewrite, p *kmsg.DescribeGroupsResponse) {
		each(p.Groups, func(g *kmsg.DescribeGroupsResponseGroup) {
			w.group(&g.Group)
			w.msg(g.ErrorMessage)
		})
	}),
	apis.ListGroups: row(func(*vcRewrite, *kmsg.ListGroupsRequest) {}, func(w *vcRewrite, p *kmsg.ListGroupsResponse) {
		p.Groups = keep(p.Groups, func(g *kmsg.ListGroupsResponseGroup) bool { return w.group(&g.Group) })
	}),
	apis.DeleteGroups: row(func(w *vcRewrite, q *kmsg.DeleteGroupsRequest) {
		w.all(q.Groups, w.group)
	}, func(w *vcRewrite, p *kmsg.DeleteGroupsResponse) {
		each(p.Groups, func(g *kmsg.DeleteGroupsResponseGroup) { w.group(&g.Group) })
	}),
	apis.OffsetDelete: row(func(w *vcRewrite, q *kmsg.OffsetDeleteRequest) {
		w.group(&q.Group)
		each(q.Topics, func(t *kmsg.OffsetDeleteRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.OffsetDeleteResponse) {
		each(p.Topics, func(t *kmsg.OffsetDeleteResponseTopic) { w.topic(&t.Topic) })
	}),
	apis.CreateTopics: row(func(w *vcRewrite, q *kmsg.CreateTopicsRequest) {
		each(q.Topics, func(t *kmsg.CreateTopicsRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.CreateTopicsResponse) {
		each(p.Topics, func(t *kmsg.CreateTopicsResponseTopic) {
			w.n.learn(t.TopicID, t.Topic)
			w.topic(&t.Topic)
			w.msg(t.ErrorMessage)
		})
	}),
	apis.DeleteTopics: row(func(w *vcRewrite, q *kmsg.DeleteTopicsRequest) {
		w.all(q.TopicNames, w.topic)
		each(q.Topics, func(t *kmsg.DeleteTopicsRequestTopic) { w.topicOrID(t.Topic == nil, t.Topic, &t.TopicID) })
	}, func(w *vcRewrite, p *kmsg.DeleteTopicsResponse) {
		each(p.Topics, func(t *kmsg.DeleteTopicsResponseTopic) {
			w.topicID(&t.TopicID)
			if t.Topic != nil && !w.topic(t.Topic) {
				t.Topic = nil
			}
			w.msg(t.ErrorMessage)
		})
	}),
	apis.CreatePartitions: row(func(w *vcRewrite, q *kmsg.CreatePartitionsRequest) {
		each(q.Topics, func(t *kmsg.CreatePartitionsRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.CreatePartitionsResponse) {
		each(p.Topics, func(t *kmsg.CreatePartitionsResponseTopic) {
			w.topic(&t.Topic)
			w.msg(t.ErrorMessage)
		})
	}),
	apis.DeleteRecords: row(func(w *vcRewrite, q *kmsg.DeleteRecordsRequest) {
		each(q.Topics, func(t *kmsg.DeleteRecordsRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.DeleteRecordsResponse) {
		each(p.Topics, func(t *kmsg.DeleteRecordsResponseTopic) { w.topic(&t.Topic) })
	}),
	apis.OffsetForLeaderEpoch: row(func(w *vcRewrite, q *kmsg.OffsetForLeaderEpochRequest) {
		each(q.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.OffsetForLeaderEpochResponse) {
		each(p.Topics, func(t *kmsg.OffsetForLeaderEpochResponseTopic) { w.topic(&t.Topic) })
	}),
	apis.DescribeConfigs: row(func(w *vcRewrite, q *kmsg.DescribeConfigsRequest) {
		each(q.Resources, func(x *kmsg.DescribeConfigsRequestResource) { w.config(x.ResourceType, &x.ResourceName, false) })
	}, func(w *vcRewrite, p *kmsg.DescribeConfigsResponse) {
		each(p.Resources, func(x *kmsg.DescribeConfigsResponseResource) {
			w.msg(x.ErrorMessage)
			w.config(x.ResourceType, &x.ResourceName, false)
		})
	}),
	apis.AlterConfigs: row(func(w *vcRewrite, q *kmsg.AlterConfigsRequest) {
		each(q.Resources, func(x *kmsg.AlterConfigsRequestResource) { w.config(x.ResourceType, &x.ResourceName, true) })
	}, func(w *vcRewrite, p *kmsg.AlterConfigsResponse) {
		each(p.Resources, func(x *kmsg.AlterConfigsResponseResource) {
			w.msg(x.ErrorMessage)
			w.config(x.ResourceType, &x.ResourceName, true)
		})
	}),
	apis.IncrementalAlterConfigs: row(func(w *vcRewrite, q *kmsg.IncrementalAlterConfigsRequest) {
		each(q.Resources, func(x *kmsg.IncrementalAlterConfigsRequestResource) { w.config(x.ResourceType, &x.ResourceName, true) })
	}, func(w *vcRewrite, p *kmsg.IncrementalAlterConfigsResponse) {
		each(p.Resources, func(x *kmsg.IncrementalAlterConfigsResponseResource) {
			w.msg(x.ErrorMessage)
			w.config(x.ResourceType, &x.ResourceName, true)
		})
	}),
	apis.InitProducerID: row(func(w *vcRewrite, q *kmsg.InitProducerIDRequest) { w.txn(q.TransactionalID) }, noAnswer[*kmsg.InitProducerIDResponse]),
	apis.AddPartitionsToTxn: row(func(w *vcRewrite, q *kmsg.AddPartitionsToTxnRequest) {
		w.txn(&q.TransactionalID)
		each(q.Topics, func(t *kmsg.AddPartitionsToTxnRequestTopic) { w.topic(&t.Topic) })
		each(q.Transactions, func(x *kmsg.AddPartitionsToTxnRequestTransaction) {
			w.txn(&x.TransactionalID)
			each(x.Topics, func(t *kmsg.AddPartitionsToTxnRequestTransactionTopic) { w.topic(&t.Topic) })
		})
	}, func(w *vcRewrite, p *kmsg.AddPartitionsToTxnResponse) {
		each(p.Topics, func(t *kmsg.AddPartitionsToTxnResponseTopic) { w.topic(&t.Topic) })
		each(p.Transactions, func(x *kmsg.AddPartitionsToTxnResponseTransaction) {
			w.txn(&x.TransactionalID)
			each(x.Topics, func(t *kmsg.AddPartitionsToTxnResponseTransactionTopic) { w.topic(&t.Topic) })
		})
	}),
	apis.AddOffsetsToTxn: row(func(w *vcRewrite, q *kmsg.AddOffsetsToTxnRequest) {
		w.txn(&q.TransactionalID)
		w.group(&q.Group)
	}, noAnswer[*kmsg.AddOffsetsToTxnResponse]),
	apis.EndTxn: row(func(w *vcRewrite, q *kmsg.EndTxnRequest) { w.txn(&q.TransactionalID) }, noAnswer[*kmsg.EndTxnResponse]),
	apis.TxnOffsetCommit: row(func(w *vcRewrite, q *kmsg.TxnOffsetCommitRequest) {
		w.txn(&q.TransactionalID)
		w.group(&q.Group)
		// Topic ids from v6 (KIP-848's commit path).
		each(q.Topics, func(t *kmsg.TxnOffsetCommitRequestTopic) { w.topicOrID(q.Version >= 6, &t.Topic, &t.TopicID) })
	}, func(w *vcRewrite, p *kmsg.TxnOffsetCommitResponse) {
		each(p.Topics, func(t *kmsg.TxnOffsetCommitResponseTopic) { w.topicOrID(p.Version >= 6, &t.Topic, &t.TopicID) })
	}),
	apis.DescribeProducers: row(func(w *vcRewrite, q *kmsg.DescribeProducersRequest) {
		each(q.Topics, func(t *kmsg.DescribeProducersRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.DescribeProducersResponse) {
		each(p.Topics, func(t *kmsg.DescribeProducersResponseTopic) {
			w.topic(&t.Topic)
			each(t.Partitions, func(x *kmsg.DescribeProducersResponseTopicPartition) { w.msg(x.ErrorMessage) })
		})
	}),
	apis.DescribeTransactions: row(func(w *vcRewrite, q *kmsg.DescribeTransactionsRequest) {
		w.all(q.TransactionalIDs, w.txn)
	}, func(w *vcRewrite, p *kmsg.DescribeTransactionsResponse) {
		each(p.TransactionStates, func(x *kmsg.DescribeTransactionsResponseTransactionState) {
			w.txn(&x.TransactionalID)
			x.Topics = keep(x.Topics, func(t *kmsg.DescribeTransactionsResponseTransactionStateTopic) bool { return w.topic(&t.Topic) })
		})
	}),
	apis.ListTransactions: row(func(w *vcRewrite, q *kmsg.ListTransactionsRequest) {
		w.regex(&q.TransactionalIDPattern)
	}, func(w *vcRewrite, p *kmsg.ListTransactionsResponse) {
		p.TransactionStates = keep(p.TransactionStates, func(x *kmsg.ListTransactionsResponseTransactionState) bool {
			return w.txn(&x.TransactionalID)
		})
	}),
	apis.DescribeTopicPartitions: row(func(w *vcRewrite, q *kmsg.DescribeTopicPartitionsRequest) {
		each(q.Topics, func(t *kmsg.DescribeTopicPartitionsRequestTopic) { w.topic(&t.Topic) })
		if q.Cursor != nil {
			w.topic(&q.Cursor.Topic)
		}
	}, func(w *vcRewrite, p *kmsg.DescribeTopicPartitionsResponse) {
		p.Topics = keep(p.Topics, func(t *kmsg.DescribeTopicPartitionsResponseTopic) bool {
			if t.Topic == nil {
				return true
			}
			w.n.learn(t.TopicID, *t.Topic)
			name := *t.Topic
			if !w.topic(&name) {
				return false
			}
			t.Topic = &name
			return true
		})
		if c := p.NextCursor; c != nil && !w.topic(&c.Topic) {
			p.NextCursor = nil // the listing went past the tenant's names: it is complete
		}
	}),
	apis.ElectLeaders: row(func(w *vcRewrite, q *kmsg.ElectLeadersRequest) {
		if q.Topics == nil {
			w.ref = refuseUnscoped // every partition of the cluster
			return
		}
		each(q.Topics, func(t *kmsg.ElectLeadersRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.ElectLeadersResponse) {
		each(p.Topics, func(t *kmsg.ElectLeadersResponseTopic) {
			w.topic(&t.Topic)
			each(t.Partitions, func(x *kmsg.ElectLeadersResponseTopicPartition) { w.msg(x.ErrorMessage) })
		})
	}),
	apis.AlterPartitionAssignments: row(func(w *vcRewrite, q *kmsg.AlterPartitionAssignmentsRequest) {
		each(q.Topics, func(t *kmsg.AlterPartitionAssignmentsRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.AlterPartitionAssignmentsResponse) {
		w.msg(p.ErrorMessage)
		each(p.Topics, func(t *kmsg.AlterPartitionAssignmentsResponseTopic) {
			w.topic(&t.Topic)
			each(t.Partitions, func(x *kmsg.AlterPartitionAssignmentsResponseTopicPartition) { w.msg(x.ErrorMessage) })
		})
	}),
	apis.ListPartitionReassignments: row(func(w *vcRewrite, q *kmsg.ListPartitionReassignmentsRequest) {
		each(q.Topics, func(t *kmsg.ListPartitionReassignmentsRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.ListPartitionReassignmentsResponse) {
		w.msg(p.ErrorMessage)
		p.Topics = keep(p.Topics, func(t *kmsg.ListPartitionReassignmentsResponseTopic) bool { return w.topic(&t.Topic) })
	}),
	apis.DescribeLogDirs: row(func(w *vcRewrite, q *kmsg.DescribeLogDirsRequest) {
		each(q.Topics, func(t *kmsg.DescribeLogDirsRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.DescribeLogDirsResponse) {
		each(p.Dirs, func(d *kmsg.DescribeLogDirsResponseDir) {
			d.Topics = keep(d.Topics, func(t *kmsg.DescribeLogDirsResponseDirTopic) bool { return w.topic(&t.Topic) })
		})
	}),
	apis.ConsumerGroupHeartbeat: row(func(w *vcRewrite, q *kmsg.ConsumerGroupHeartbeatRequest) {
		w.group(&q.Group)
		w.all(q.SubscribedTopicNames, w.topic)
		w.regex(&q.SubscribedTopicRegex)
		each(q.Topics, func(t *kmsg.ConsumerGroupHeartbeatRequestTopic) { w.topicID(&t.TopicID) })
	}, func(w *vcRewrite, p *kmsg.ConsumerGroupHeartbeatResponse) {
		w.msg(p.ErrorMessage)
		if a := p.Assignment; a != nil {
			// A topic of another tenant the view knows is left out.
			a.Topics = keep(a.Topics, func(t *kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic) bool {
				return w.n.idListed(t.TopicID)
			})
		}
	}),
	apis.ConsumerGroupDescribe: row(func(w *vcRewrite, q *kmsg.ConsumerGroupDescribeRequest) {
		w.all(q.Groups, w.group)
	}, func(w *vcRewrite, p *kmsg.ConsumerGroupDescribeResponse) {
		each(p.Groups, func(g *kmsg.ConsumerGroupDescribeResponseGroup) {
			w.group(&g.Group)
			w.msg(g.ErrorMessage)
			each(g.Members, func(m *kmsg.ConsumerGroupDescribeResponseGroupMember) {
				m.SubscribedTopics = keep(m.SubscribedTopics, w.topic)
				if m.SubscribedTopicRegex != nil && !w.n.regexDown(m.SubscribedTopicRegex) {
					m.SubscribedTopicRegex = nil
				}
				for _, a := range []*kmsg.Assignment{&m.Assignment, &m.TargetAssignment} {
					a.TopicPartitions = keep(a.TopicPartitions, func(t *kmsg.AssignmentTopicPartition) bool { return w.topic(&t.Topic) })
				}
			})
		})
	}),
	apis.ShareGroupHeartbeat: row(func(w *vcRewrite, q *kmsg.ShareGroupHeartbeatRequest) {
		w.group(&q.GroupID)
		w.all(q.SubscribedTopicNames, w.topic)
	}, func(w *vcRewrite, p *kmsg.ShareGroupHeartbeatResponse) {
		w.msg(p.ErrorMessage)
		if a := p.Assignment; a != nil {
			// As ConsumerGroupHeartbeat's: another tenant's topic the
			// view knows is left out.
			a.TopicPartitions = keep(a.TopicPartitions, func(t *kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition) bool {
				return w.n.idListed(t.TopicID)
			})
		}
	}),
	apis.ShareGroupDescribe: row(func(w *vcRewrite, q *kmsg.ShareGroupDescribeRequest) {
		w.all(q.GroupIDs, w.group)
	}, func(w *vcRewrite, p *kmsg.ShareGroupDescribeResponse) {
		each(p.Groups, func(g *kmsg.ShareGroupDescribeResponseGroup) {
			w.group(&g.GroupID)
			w.msg(g.ErrorMessage)
			each(g.Members, func(m *kmsg.ShareGroupDescribeResponseGroupMember) {
				m.SubscribedTopicNames = keep(m.SubscribedTopicNames, w.topic)
				a := &m.Assignment
				a.TopicPartitions = keep(a.TopicPartitions, func(t *kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition) bool {
					return w.topic(&t.Topic)
				})
			})
		})
	}),
	apis.DescribeShareGroupOffsets: row(func(w *vcRewrite, q *kmsg.DescribeShareGroupOffsetsRequest) {
		each(q.Groups, func(g *kmsg.DescribeShareGroupOffsetsRequestGroup) {
			w.group(&g.GroupID)
			each(g.Topics, func(t *kmsg.DescribeShareGroupOffsetsRequestGroupTopic) { w.topic(&t.Topic) })
		})
	}, func(w *vcRewrite, p *kmsg.DescribeShareGroupOffsetsResponse) {
		each(p.Groups, func(g *kmsg.DescribeShareGroupOffsetsResponseGroup) {
			w.group(&g.GroupID)
			w.msg(g.ErrorMessage)
			g.Topics = keep(g.Topics, func(t *kmsg.DescribeShareGroupOffsetsResponseGroupTopic) bool { return w.topic(&t.Topic) })
		})
	}),
	apis.AlterShareGroupOffsets: row(func(w *vcRewrite, q *kmsg.AlterShareGroupOffsetsRequest) {
		w.group(&q.GroupID)
		each(q.Topics, func(t *kmsg.AlterShareGroupOffsetsRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.AlterShareGroupOffsetsResponse) {
		w.msg(p.ErrorMessage)
		each(p.Topics, func(t *kmsg.AlterShareGroupOffsetsResponseTopic) { w.topic(&t.Topic) })
	}),
	apis.DeleteShareGroupOffsets: row(func(w *vcRewrite, q *kmsg.DeleteShareGroupOffsetsRequest) {
		w.group(&q.GroupID)
		each(q.Topics, func(t *kmsg.DeleteShareGroupOffsetsRequestTopic) { w.topic(&t.Topic) })
	}, func(w *vcRewrite, p *kmsg.DeleteShareGroupOffsetsResponse) {
		w.msg(p.ErrorMessage)
		each(p.Topics, func(t *kmsg.DeleteShareGroupOffsetsResponseTopic) {
			w.topic(&t.Topic)
			w.msg(t.ErrorMessage)
		})
	}),
	apis.ShareFetch: row(func(w *vcRewrite, q *kmsg.ShareFetchRequest) {
		w.group(q.GroupID)
		each(q.Topics, func(t *kmsg.ShareFetchRequestTopic) { w.topicID(&t.TopicID) })
		each(q.ForgottenTopicsData, func(t *kmsg.ShareFetchRequestForgottenTopicsData) { w.topicID(&t.TopicID) })
	}, func(w *vcRewrite, p *kmsg.ShareFetchResponse) {
		w.msg(p.ErrorMessage)
		each(p.Topics, func(t *kmsg.ShareFetchResponseTopic) { w.topicID(&t.TopicID) })
	}),
	apis.ShareAcknowledge: row(func(w *vcRewrite, q *kmsg.ShareAcknowledgeRequest) {
		w.group(q.GroupID)
		each(q.Topics, func(t *kmsg.ShareAcknowledgeRequestTopic) { w.topicID(&t.TopicID) })
	}, func(w *vcRewrite, p *kmsg.ShareAcknowledgeResponse) {
		w.msg(p.ErrorMessage)
		each(p.Topics, func(t *kmsg.ShareAcknowledgeResponseTopic) { w.topicID(&t.TopicID) })
	}),
}

// idAsked reports whether the Metadata request named id.
func (n *vcNames) idAsked(id [16]byte) bool {
	return slices.Contains(n.asked, id)
}
