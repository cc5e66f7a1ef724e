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

func (n *vcNames) upNullable(s *string) {
	if s != nil {
		n.up(s)
	}
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

// downNames strips the prefix from each name and drops the others.
func (n *vcNames) downNames(names []string) []string {
	out := names[:0]
	for _, s := range names {
		if n.down(&s) {
			out = append(out, s)
		}
	}
	return out
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

// vcTable is the table, keyed by API key.
var vcTable = map[int16]*vcEntry{
	// Keys with no names at all pass untouched.
	apis.ApiVersions:               {},
	apis.SASLHandshake:             {},
	apis.SASLAuthenticate:          {},
	apis.DescribeCluster:           {},
	apis.GetTelemetrySubscriptions: {},
	apis.PushTelemetry:             {},

	apis.Produce: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.ProduceRequest)
			n.upNullable(q.TransactionID)
			for i := range q.Topics {
				t := &q.Topics[i]
				if q.Version >= 13 {
					n.idUp(&t.TopicID)
				} else if !n.upTopic(&t.Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.ProduceResponse)
			for i := range p.Topics {
				t := &p.Topics[i]
				n.idDown(&t.TopicID)
				if p.Version < 13 {
					n.down(&t.Topic)
				}
				for j := range t.Partitions {
					n.msg(t.Partitions[j].ErrorMessage)
				}
			}
		},
	},
	apis.Fetch: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.FetchRequest)
			for i := range q.Topics {
				t := &q.Topics[i]
				if q.Version >= 13 {
					n.idUp(&t.TopicID)
				} else if !n.upTopic(&t.Topic) {
					return refuseEmptyTopic
				}
			}
			for i := range q.ForgottenTopics {
				t := &q.ForgottenTopics[i]
				if q.Version >= 13 {
					n.idUp(&t.TopicID)
				} else if !n.upTopic(&t.Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.FetchResponse)
			for i := range p.Topics {
				t := &p.Topics[i]
				if p.Version >= 13 {
					n.idDown(&t.TopicID)
				} else {
					n.down(&t.Topic)
				}
			}
		},
	},
	apis.ListOffsets: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			for i, q := 0, r.(*kmsg.ListOffsetsRequest); i < len(q.Topics); i++ {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			for i, p := 0, r.(*kmsg.ListOffsetsResponse); i < len(p.Topics); i++ {
				n.down(&p.Topics[i].Topic)
			}
		},
	},
	apis.Metadata: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.MetadataRequest)
			for i := range q.Topics {
				t := &q.Topics[i]
				if t.Topic != nil {
					if !n.upTopic(t.Topic) {
						return refuseEmptyTopic
					}
				}
				// A topic asked by id is answered with its name: one
				// outside the tenant is made unknown in the answer
				// (vcluster_stage.go gives the answer the ids asked).
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.MetadataResponse)
			out := p.Topics[:0]
			for _, t := range p.Topics {
				if t.Topic != nil {
					n.learn(t.TopicID, *t.Topic)
					name := *t.Topic
					if n.down(&name) {
						t.Topic = &name
						out = append(out, t)
						continue
					}
				}
				if t.TopicID != ([16]byte{}) && n.idAsked(t.TopicID) {
					// Asked by id: a topic that is not the tenant's is
					// unknown to it (KIP-516).
					t.Topic, t.ErrorCode, t.Partitions, t.IsInternal = nil, kerr.UnknownTopicID.Code, nil, false
					out = append(out, t)
				}
				// Otherwise a listing's entry that is not the tenant's.
			}
			p.Topics = out
		},
	},
	apis.FindCoordinator: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.FindCoordinatorRequest)
			if q.CoordinatorType > 1 {
				return refuseUnscoped // share-partition keys (KIP-932) are the brokers'
			}
			n.up(&q.CoordinatorKey)
			for i := range q.CoordinatorKeys {
				n.up(&q.CoordinatorKeys[i])
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.FindCoordinatorResponse)
			n.msg(p.ErrorMessage)
			for i := range p.Coordinators {
				c := &p.Coordinators[i]
				n.down(&c.Key)
				n.msg(c.ErrorMessage)
			}
		},
	},
	apis.JoinGroup: {
		req:  func(n *vcNames, r kmsg.Request) *vcRefusal { n.up(&r.(*kmsg.JoinGroupRequest).Group); return nil },
		resp: func(*vcNames, kmsg.Response) {},
	},
	apis.SyncGroup: {
		req:  func(n *vcNames, r kmsg.Request) *vcRefusal { n.up(&r.(*kmsg.SyncGroupRequest).Group); return nil },
		resp: func(*vcNames, kmsg.Response) {},
	},
	apis.Heartbeat: {
		req:  func(n *vcNames, r kmsg.Request) *vcRefusal { n.up(&r.(*kmsg.HeartbeatRequest).Group); return nil },
		resp: func(*vcNames, kmsg.Response) {},
	},
	apis.LeaveGroup: {
		req:  func(n *vcNames, r kmsg.Request) *vcRefusal { n.up(&r.(*kmsg.LeaveGroupRequest).Group); return nil },
		resp: func(*vcNames, kmsg.Response) {},
	},
	apis.OffsetCommit: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.OffsetCommitRequest)
			n.up(&q.Group)
			for i := range q.Topics {
				t := &q.Topics[i]
				if q.Version >= 10 {
					n.idUp(&t.TopicID)
				} else if !n.upTopic(&t.Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.OffsetCommitResponse)
			for i := range p.Topics {
				t := &p.Topics[i]
				n.idDown(&t.TopicID)
				if p.Version < 10 {
					n.down(&t.Topic)
				}
			}
		},
	},
	apis.OffsetFetch: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.OffsetFetchRequest)
			n.up(&q.Group)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			for i := range q.Groups {
				g := &q.Groups[i]
				n.up(&g.Group)
				for j := range g.Topics {
					t := &g.Topics[j]
					if q.Version >= 10 {
						n.idUp(&t.TopicID)
					} else if !n.upTopic(&t.Topic) {
						return refuseEmptyTopic
					}
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.OffsetFetchResponse)
			topics := p.Topics[:0]
			for _, t := range p.Topics {
				if n.down(&t.Topic) {
					topics = append(topics, t)
				}
			}
			p.Topics = topics
			for i := range p.Groups {
				g := &p.Groups[i]
				n.down(&g.Group)
				all := slices.Contains(n.listAll, g.Group)
				out := g.Topics[:0]
				for _, t := range g.Topics {
					if p.Version >= 10 && all {
						if !n.idListed(t.TopicID) {
							continue
						}
					} else if p.Version >= 10 {
						n.idDown(&t.TopicID)
					} else if !n.down(&t.Topic) {
						continue // all topics of the group: one not the tenant's
					}
					out = append(out, t)
				}
				g.Topics = out
			}
		},
	},
	apis.DescribeGroups: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.DescribeGroupsRequest)
			for i := range q.Groups {
				n.up(&q.Groups[i])
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.DescribeGroupsResponse)
			for i := range p.Groups {
				n.down(&p.Groups[i].Group)
				n.msg(p.Groups[i].ErrorMessage)
			}
		},
	},
	apis.ListGroups: {
		req: func(*vcNames, kmsg.Request) *vcRefusal { return nil },
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.ListGroupsResponse)
			out := p.Groups[:0]
			for _, g := range p.Groups {
				if n.down(&g.Group) {
					out = append(out, g)
				}
			}
			p.Groups = out
		},
	},
	apis.DeleteGroups: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.DeleteGroupsRequest)
			for i := range q.Groups {
				n.up(&q.Groups[i])
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.DeleteGroupsResponse)
			for i := range p.Groups {
				n.down(&p.Groups[i].Group)
			}
		},
	},
	apis.OffsetDelete: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.OffsetDeleteRequest)
			n.up(&q.Group)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.OffsetDeleteResponse)
			for i := range p.Topics {
				n.down(&p.Topics[i].Topic)
			}
		},
	},
	apis.CreateTopics: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.CreateTopicsRequest)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.CreateTopicsResponse)
			for i := range p.Topics {
				t := &p.Topics[i]
				n.learn(t.TopicID, t.Topic)
				n.down(&t.Topic)
				n.msg(t.ErrorMessage)
			}
		},
	},
	apis.DeleteTopics: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.DeleteTopicsRequest)
			for i := range q.TopicNames {
				if !n.upTopic(&q.TopicNames[i]) {
					return refuseEmptyTopic
				}
			}
			for i := range q.Topics {
				t := &q.Topics[i]
				if t.Topic != nil {
					if !n.upTopic(t.Topic) {
						return refuseEmptyTopic
					}
				} else {
					n.idUp(&t.TopicID)
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.DeleteTopicsResponse)
			for i := range p.Topics {
				t := &p.Topics[i]
				n.idDown(&t.TopicID)
				if t.Topic != nil && !n.down(t.Topic) {
					t.Topic = nil
				}
				n.msg(t.ErrorMessage)
			}
		},
	},
	apis.CreatePartitions: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.CreatePartitionsRequest)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.CreatePartitionsResponse)
			for i := range p.Topics {
				n.down(&p.Topics[i].Topic)
				n.msg(p.Topics[i].ErrorMessage)
			}
		},
	},
	apis.DeleteRecords: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.DeleteRecordsRequest)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.DeleteRecordsResponse)
			for i := range p.Topics {
				n.down(&p.Topics[i].Topic)
			}
		},
	},
	apis.OffsetForLeaderEpoch: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.OffsetForLeaderEpochRequest)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.OffsetForLeaderEpochResponse)
			for i := range p.Topics {
				n.down(&p.Topics[i].Topic)
			}
		},
	},
	apis.DescribeConfigs: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.DescribeConfigsRequest)
			for i := range q.Resources {
				if ref := n.configUp(q.Resources[i].ResourceType, &q.Resources[i].ResourceName, false); ref != nil {
					return ref
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.DescribeConfigsResponse)
			for i := range p.Resources {
				x := &p.Resources[i]
				n.configDown(x.ResourceType, &x.ResourceName, x.ErrorMessage)
			}
		},
	},
	apis.AlterConfigs: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.AlterConfigsRequest)
			for i := range q.Resources {
				if ref := n.configUp(q.Resources[i].ResourceType, &q.Resources[i].ResourceName, true); ref != nil {
					return ref
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.AlterConfigsResponse)
			for i := range p.Resources {
				x := &p.Resources[i]
				n.configDown(x.ResourceType, &x.ResourceName, x.ErrorMessage)
			}
		},
	},
	apis.IncrementalAlterConfigs: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.IncrementalAlterConfigsRequest)
			for i := range q.Resources {
				if ref := n.configUp(q.Resources[i].ResourceType, &q.Resources[i].ResourceName, true); ref != nil {
					return ref
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.IncrementalAlterConfigsResponse)
			for i := range p.Resources {
				x := &p.Resources[i]
				n.configDown(x.ResourceType, &x.ResourceName, x.ErrorMessage)
			}
		},
	},
	apis.InitProducerID: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			n.upNullable(r.(*kmsg.InitProducerIDRequest).TransactionalID)
			return nil
		},
		resp: func(*vcNames, kmsg.Response) {},
	},
	apis.AddPartitionsToTxn: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.AddPartitionsToTxnRequest)
			n.up(&q.TransactionalID)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			for i := range q.Transactions {
				x := &q.Transactions[i]
				n.up(&x.TransactionalID)
				for j := range x.Topics {
					if !n.upTopic(&x.Topics[j].Topic) {
						return refuseEmptyTopic
					}
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.AddPartitionsToTxnResponse)
			for i := range p.Topics {
				n.down(&p.Topics[i].Topic)
			}
			for i := range p.Transactions {
				x := &p.Transactions[i]
				n.down(&x.TransactionalID)
				for j := range x.Topics {
					n.down(&x.Topics[j].Topic)
				}
			}
		},
	},
	apis.AddOffsetsToTxn: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.AddOffsetsToTxnRequest)
			n.up(&q.TransactionalID)
			n.up(&q.Group)
			return nil
		},
		resp: func(*vcNames, kmsg.Response) {},
	},
	apis.EndTxn: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			n.up(&r.(*kmsg.EndTxnRequest).TransactionalID)
			return nil
		},
		resp: func(*vcNames, kmsg.Response) {},
	},
	apis.TxnOffsetCommit: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.TxnOffsetCommitRequest)
			n.up(&q.TransactionalID)
			n.up(&q.Group)
			for i := range q.Topics {
				if q.Version >= 6 { // topic ids (KIP-848's commit path)
					n.idUp(&q.Topics[i].TopicID)
				} else if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.TxnOffsetCommitResponse)
			for i := range p.Topics {
				if p.Version >= 6 {
					n.idDown(&p.Topics[i].TopicID)
				} else {
					n.down(&p.Topics[i].Topic)
				}
			}
		},
	},
	apis.DescribeProducers: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.DescribeProducersRequest)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.DescribeProducersResponse)
			for i := range p.Topics {
				t := &p.Topics[i]
				n.down(&t.Topic)
				for j := range t.Partitions {
					n.msg(t.Partitions[j].ErrorMessage)
				}
			}
		},
	},
	apis.DescribeTransactions: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.DescribeTransactionsRequest)
			for i := range q.TransactionalIDs {
				n.up(&q.TransactionalIDs[i])
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.DescribeTransactionsResponse)
			for i := range p.TransactionStates {
				x := &p.TransactionStates[i]
				n.down(&x.TransactionalID)
				out := x.Topics[:0]
				for _, t := range x.Topics {
					if n.down(&t.Topic) {
						out = append(out, t)
					}
				}
				x.Topics = out
			}
		},
	},
	apis.ListTransactions: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.ListTransactionsRequest)
			if q.TransactionalIDPattern != nil && *q.TransactionalIDPattern != "" {
				re, ok := n.regex(*q.TransactionalIDPattern)
				if !ok {
					return refuseRegex
				}
				q.TransactionalIDPattern = &re
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.ListTransactionsResponse)
			out := p.TransactionStates[:0]
			for _, x := range p.TransactionStates {
				if n.down(&x.TransactionalID) {
					out = append(out, x)
				}
			}
			p.TransactionStates = out
		},
	},
	apis.DescribeTopicPartitions: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.DescribeTopicPartitionsRequest)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			if q.Cursor != nil {
				if !n.upTopic(&q.Cursor.Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.DescribeTopicPartitionsResponse)
			out := p.Topics[:0]
			for _, t := range p.Topics {
				if t.Topic != nil {
					n.learn(t.TopicID, *t.Topic)
					name := *t.Topic
					if !n.down(&name) {
						continue
					}
					t.Topic = &name
				}
				out = append(out, t)
			}
			p.Topics = out
			if c := p.NextCursor; c != nil && !n.down(&c.Topic) {
				p.NextCursor = nil // the listing went past the tenant's names: it is complete
			}
		},
	},
	apis.ElectLeaders: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.ElectLeadersRequest)
			if q.Topics == nil {
				return refuseUnscoped // every partition of the cluster
			}
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.ElectLeadersResponse)
			for i := range p.Topics {
				n.down(&p.Topics[i].Topic)
				for j := range p.Topics[i].Partitions {
					n.msg(p.Topics[i].Partitions[j].ErrorMessage)
				}
			}
		},
	},
	apis.AlterPartitionAssignments: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.AlterPartitionAssignmentsRequest)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.AlterPartitionAssignmentsResponse)
			n.msg(p.ErrorMessage)
			for i := range p.Topics {
				n.down(&p.Topics[i].Topic)
				for j := range p.Topics[i].Partitions {
					n.msg(p.Topics[i].Partitions[j].ErrorMessage)
				}
			}
		},
	},
	apis.ListPartitionReassignments: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.ListPartitionReassignmentsRequest)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.ListPartitionReassignmentsResponse)
			n.msg(p.ErrorMessage)
			out := p.Topics[:0]
			for _, t := range p.Topics {
				if n.down(&t.Topic) {
					out = append(out, t)
				}
			}
			p.Topics = out
		},
	},
	apis.DescribeLogDirs: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.DescribeLogDirsRequest)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.DescribeLogDirsResponse)
			for i := range p.Dirs {
				d := &p.Dirs[i]
				out := d.Topics[:0]
				for _, t := range d.Topics {
					if n.down(&t.Topic) {
						out = append(out, t)
					}
				}
				d.Topics = out
			}
		},
	},
	apis.ConsumerGroupHeartbeat: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.ConsumerGroupHeartbeatRequest)
			n.up(&q.Group)
			for i := range q.SubscribedTopicNames {
				if !n.upTopic(&q.SubscribedTopicNames[i]) {
					return refuseEmptyTopic
				}
			}
			if q.SubscribedTopicRegex != nil && *q.SubscribedTopicRegex != "" {
				re, ok := n.regex(*q.SubscribedTopicRegex)
				if !ok {
					return refuseRegex
				}
				q.SubscribedTopicRegex = &re
			}
			for i := range q.Topics {
				n.idUp(&q.Topics[i].TopicID)
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.ConsumerGroupHeartbeatResponse)
			n.msg(p.ErrorMessage)
			if a := p.Assignment; a != nil {
				out := a.Topics[:0]
				for _, t := range a.Topics {
					if n.ids.owns(t.TopicID, n.prefix) || !n.ids.known(t.TopicID) {
						out = append(out, t)
					}
				}
				a.Topics = out
			}
		},
	},
	apis.ConsumerGroupDescribe: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.ConsumerGroupDescribeRequest)
			for i := range q.Groups {
				n.up(&q.Groups[i])
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.ConsumerGroupDescribeResponse)
			for i := range p.Groups {
				g := &p.Groups[i]
				n.down(&g.Group)
				n.msg(g.ErrorMessage)
				for j := range g.Members {
					m := &g.Members[j]
					m.SubscribedTopics = n.downNames(m.SubscribedTopics)
					if m.SubscribedTopicRegex != nil && !n.regexDown(m.SubscribedTopicRegex) {
						m.SubscribedTopicRegex = nil
					}
					n.assignmentDown(&m.Assignment)
					n.assignmentDown(&m.TargetAssignment)
				}
			}
		},
	},
	apis.ShareGroupHeartbeat: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.ShareGroupHeartbeatRequest)
			n.up(&q.GroupID)
			for i := range q.SubscribedTopicNames {
				if !n.upTopic(&q.SubscribedTopicNames[i]) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			n.msg(r.(*kmsg.ShareGroupHeartbeatResponse).ErrorMessage)
		},
	},
	apis.ShareGroupDescribe: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.ShareGroupDescribeRequest)
			for i := range q.GroupIDs {
				n.up(&q.GroupIDs[i])
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.ShareGroupDescribeResponse)
			for i := range p.Groups {
				g := &p.Groups[i]
				n.down(&g.GroupID)
				n.msg(g.ErrorMessage)
				for j := range g.Members {
					m := &g.Members[j]
					m.SubscribedTopicNames = n.downNames(m.SubscribedTopicNames)
					out := m.Assignment.TopicPartitions[:0]
					for _, t := range m.Assignment.TopicPartitions {
						if n.down(&t.Topic) {
							out = append(out, t)
						}
					}
					m.Assignment.TopicPartitions = out
				}
			}
		},
	},
	apis.DescribeShareGroupOffsets: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.DescribeShareGroupOffsetsRequest)
			for i := range q.Groups {
				g := &q.Groups[i]
				n.up(&g.GroupID)
				for j := range g.Topics {
					if !n.upTopic(&g.Topics[j].Topic) {
						return refuseEmptyTopic
					}
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.DescribeShareGroupOffsetsResponse)
			for i := range p.Groups {
				g := &p.Groups[i]
				n.down(&g.GroupID)
				n.msg(g.ErrorMessage)
				out := g.Topics[:0]
				for _, t := range g.Topics {
					if n.down(&t.Topic) {
						out = append(out, t)
					}
				}
				g.Topics = out
			}
		},
	},
	apis.AlterShareGroupOffsets: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.AlterShareGroupOffsetsRequest)
			n.up(&q.GroupID)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.AlterShareGroupOffsetsResponse)
			n.msg(p.ErrorMessage)
			for i := range p.Topics {
				n.down(&p.Topics[i].Topic)
			}
		},
	},
	apis.DeleteShareGroupOffsets: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.DeleteShareGroupOffsetsRequest)
			n.up(&q.GroupID)
			for i := range q.Topics {
				if !n.upTopic(&q.Topics[i].Topic) {
					return refuseEmptyTopic
				}
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.DeleteShareGroupOffsetsResponse)
			n.msg(p.ErrorMessage)
			for i := range p.Topics {
				n.down(&p.Topics[i].Topic)
				n.msg(p.Topics[i].ErrorMessage)
			}
		},
	},
	apis.ShareFetch: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.ShareFetchRequest)
			n.upNullable(q.GroupID)
			for i := range q.Topics {
				n.idUp(&q.Topics[i].TopicID)
			}
			for i := range q.ForgottenTopicsData {
				n.idUp(&q.ForgottenTopicsData[i].TopicID)
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.ShareFetchResponse)
			n.msg(p.ErrorMessage)
			for i := range p.Topics {
				n.idDown(&p.Topics[i].TopicID)
			}
		},
	},
	apis.ShareAcknowledge: {
		req: func(n *vcNames, r kmsg.Request) *vcRefusal {
			q := r.(*kmsg.ShareAcknowledgeRequest)
			n.upNullable(q.GroupID)
			for i := range q.Topics {
				n.idUp(&q.Topics[i].TopicID)
			}
			return nil
		},
		resp: func(n *vcNames, r kmsg.Response) {
			p := r.(*kmsg.ShareAcknowledgeResponse)
			n.msg(p.ErrorMessage)
			for i := range p.Topics {
				n.idDown(&p.Topics[i].TopicID)
			}
		},
	},
}

// assignmentDown strips the prefix from a KIP-848 assignment's names
// and drops topics that are not the tenant's.
func (n *vcNames) assignmentDown(a *kmsg.Assignment) {
	out := a.TopicPartitions[:0]
	for _, t := range a.TopicPartitions {
		if n.down(&t.Topic) {
			out = append(out, t)
		}
	}
	a.TopicPartitions = out
}

// idAsked reports whether the Metadata request named id.
func (n *vcNames) idAsked(id [16]byte) bool {
	return slices.Contains(n.asked, id)
}
