package proxy

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// TestVClusterTableRows checks every row of the virtual-cluster table
// at every version kmsg knows, against an independent statement of the
// key's fields (vcRowSpecs, from Kafka's message definitions): a request
// and an answer are built with every string, nullable string, string
// array and topic id filled, encoded and decoded with kmsg (so only the
// version's fields remain), rewritten by the row, and encoded and
// decoded again; the result must equal what the spec says the rewrite
// does to each field, and every other field must come out as it went in.
// Requests carry tenant names (every topic name, group id and
// transactional id must come out prefixed; an empty topic name is
// refused); answers carry a mix of the tenant's upstream names and
// another tenant's (listings keep only the tenant's, unprefixed; error
// messages lose the prefix; topic ids of other tenants are masked going
// up and unmasked coming back).
func TestVClusterTableRows(t *testing.T) {
	var keys []int16
	for k, e := range vcTable {
		if e.req != nil || e.resp != nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, ok := vcRowSpecs[k]; !ok {
			t.Errorf("%s: a table row with no spec in this test", kmsg.NameForKey(k))
		}
	}
	for k := range vcRowSpecs {
		if e := vcTable[k]; e == nil || e.req == nil {
			t.Errorf("%s: a spec with no table row", kmsg.NameForKey(k))
		}
	}
	for _, k := range keys {
		spec := vcRowSpecs[k]
		e := vcTable[k]
		hits := map[string]bool{}
		for v := int16(0); v <= kmsg.RequestForKey(k).MaxVersion(); v++ {
			name := fmt.Sprintf("%s/v%d", kmsg.NameForKey(k), v)
			checkVCRequestRow(t, name, k, v, e, spec, hits)
			if e.resp != nil {
				checkVCResponseRow(t, name, k, v, e, spec, hits)
			}
		}
		// A spec path that names no field of any version would pass
		// whatever the row does.
		for side, m := range map[string]map[string]vcKind{"request": spec.req, "answer": spec.resp} {
			for path := range m {
				if !hits[side+" "+path] {
					t.Errorf("%s: %s field %s: not in any version", kmsg.NameForKey(k), side, path)
				}
			}
		}
	}
}

// vcKind is what a field is to the rewrite.
type vcKind int

const (
	// Request side.
	vcTopic      vcKind = iota + 1 // a topic name: prefixed; "" refused
	vcGroup                        // a group id: prefixed
	vcTxn                          // a transactional id: prefixed
	vcID                           // a topic id: another tenant's masked (both ways)
	vcIDIfNoName                   // a topic id used when the sibling Topic is null
	vcRegex                        // a tenant regex: scoped inside the quoted prefix
	vcConfig                       // a config resource name: by the sibling ResourceType
	// Answer side.
	vcDown      // the tenant's name unprefixed; another's left as it is
	vcDownOrNil // the tenant's name unprefixed; another's made null
	vcFilter    // the tenant's name unprefixed; the element holding another's dropped
	vcIDFilter  // the element holding another tenant's known id dropped
	vcMsg       // an error message: the prefix removed
	vcRegexDown // a scoped regex unscoped; any other made null
)

type vcRowSpec struct {
	req, resp map[string]vcKind
	// prepReq and prepResp set what the fill cannot (resource types,
	// null names, a scoped regex); the element index is the one the
	// fill uses (0 and 2 the tenant's, 1 another tenant's).
	prepReq  func(kmsg.Request)
	prepResp func(kmsg.Response)
}

const vcTestPrefix = "team-a."

var vcRowSpecs = map[int16]vcRowSpec{
	apis.Produce: {
		req: map[string]vcKind{"TransactionID": vcTxn, "Topics.Topic": vcTopic, "Topics.TopicID": vcID},
		resp: map[string]vcKind{"Topics.Topic": vcDown, "Topics.TopicID": vcID, "Topics.Partitions.ErrorMessage": vcMsg,
			"Topics.Partitions.ErrorRecords.ErrorMessage": vcMsg},
	},
	apis.Fetch: {
		req: map[string]vcKind{"Topics.Topic": vcTopic, "Topics.TopicID": vcID,
			"ForgottenTopics.Topic": vcTopic, "ForgottenTopics.TopicID": vcID},
		resp: map[string]vcKind{"Topics.Topic": vcDown, "Topics.TopicID": vcID},
	},
	apis.ListOffsets: {
		req:  map[string]vcKind{"Topics.Topic": vcTopic},
		resp: map[string]vcKind{"Topics.Topic": vcDown},
	},
	apis.Metadata: {
		req:  map[string]vcKind{"Topics.Topic": vcTopic},
		resp: map[string]vcKind{"Topics.Topic": vcFilter},
	},
	apis.FindCoordinator: {
		req:  map[string]vcKind{"CoordinatorKey": vcGroup, "CoordinatorKeys": vcGroup},
		resp: map[string]vcKind{"ErrorMessage": vcMsg, "Coordinators.Key": vcDown, "Coordinators.ErrorMessage": vcMsg},
	},
	apis.JoinGroup:  {req: map[string]vcKind{"Group": vcGroup}},
	apis.SyncGroup:  {req: map[string]vcKind{"Group": vcGroup}},
	apis.Heartbeat:  {req: map[string]vcKind{"Group": vcGroup}},
	apis.LeaveGroup: {req: map[string]vcKind{"Group": vcGroup}},
	apis.OffsetCommit: {
		req:  map[string]vcKind{"Group": vcGroup, "Topics.Topic": vcTopic, "Topics.TopicID": vcID},
		resp: map[string]vcKind{"Topics.Topic": vcDown, "Topics.TopicID": vcID},
	},
	apis.OffsetFetch: {
		req: map[string]vcKind{"Group": vcGroup, "Topics.Topic": vcTopic,
			"Groups.Group": vcGroup, "Groups.Topics.Topic": vcTopic, "Groups.Topics.TopicID": vcID},
		resp: map[string]vcKind{"Topics.Topic": vcFilter,
			"Groups.Group": vcDown, "Groups.Topics.Topic": vcFilter, "Groups.Topics.TopicID": vcID},
	},
	apis.DescribeGroups: {
		req:  map[string]vcKind{"Groups": vcGroup},
		resp: map[string]vcKind{"Groups.Group": vcDown, "Groups.ErrorMessage": vcMsg},
	},
	apis.ListGroups: {
		req:  map[string]vcKind{},
		resp: map[string]vcKind{"Groups.Group": vcFilter},
	},
	apis.DeleteGroups: {
		req:  map[string]vcKind{"Groups": vcGroup},
		resp: map[string]vcKind{"Groups.Group": vcDown},
	},
	apis.OffsetDelete: {
		req:  map[string]vcKind{"Group": vcGroup, "Topics.Topic": vcTopic},
		resp: map[string]vcKind{"Topics.Topic": vcDown},
	},
	apis.CreateTopics: {
		req:  map[string]vcKind{"Topics.Topic": vcTopic},
		resp: map[string]vcKind{"Topics.Topic": vcDown, "Topics.ErrorMessage": vcMsg},
	},
	apis.DeleteTopics: {
		req:  map[string]vcKind{"TopicNames": vcTopic, "Topics.Topic": vcTopic, "Topics.TopicID": vcIDIfNoName},
		resp: map[string]vcKind{"Topics.Topic": vcDownOrNil, "Topics.TopicID": vcID, "Topics.ErrorMessage": vcMsg},
		prepReq: func(r kmsg.Request) {
			if q := r.(*kmsg.DeleteTopicsRequest); len(q.Topics) > 1 {
				q.Topics[1].Topic = nil // by id
			}
		},
	},
	apis.CreatePartitions: {
		req:  map[string]vcKind{"Topics.Topic": vcTopic},
		resp: map[string]vcKind{"Topics.Topic": vcDown, "Topics.ErrorMessage": vcMsg},
	},
	apis.DeleteRecords: {
		req:  map[string]vcKind{"Topics.Topic": vcTopic},
		resp: map[string]vcKind{"Topics.Topic": vcDown},
	},
	apis.OffsetForLeaderEpoch: {
		req:  map[string]vcKind{"Topics.Topic": vcTopic},
		resp: map[string]vcKind{"Topics.Topic": vcDown},
	},
	apis.DescribeConfigs: {
		req:  map[string]vcKind{"Resources.ResourceName": vcConfig},
		resp: map[string]vcKind{"Resources.ResourceName": vcConfig, "Resources.ErrorMessage": vcMsg},
		prepReq: func(r kmsg.Request) {
			setConfigTypes(reflect.ValueOf(&r.(*kmsg.DescribeConfigsRequest).Resources).Elem(), configTopic, configGroup, configBroker)
		},
		prepResp: func(r kmsg.Response) {
			setConfigTypes(reflect.ValueOf(&r.(*kmsg.DescribeConfigsResponse).Resources).Elem(), configTopic, configGroup, configBroker)
		},
	},
	apis.AlterConfigs: {
		req:  map[string]vcKind{"Resources.ResourceName": vcConfig},
		resp: map[string]vcKind{"Resources.ResourceName": vcConfig, "Resources.ErrorMessage": vcMsg},
		prepReq: func(r kmsg.Request) {
			setConfigTypes(reflect.ValueOf(&r.(*kmsg.AlterConfigsRequest).Resources).Elem(), configTopic, configGroup, configTopic)
		},
		prepResp: func(r kmsg.Response) {
			setConfigTypes(reflect.ValueOf(&r.(*kmsg.AlterConfigsResponse).Resources).Elem(), configTopic, configGroup, configBroker)
		},
	},
	apis.IncrementalAlterConfigs: {
		req:  map[string]vcKind{"Resources.ResourceName": vcConfig},
		resp: map[string]vcKind{"Resources.ResourceName": vcConfig, "Resources.ErrorMessage": vcMsg},
		prepReq: func(r kmsg.Request) {
			setConfigTypes(reflect.ValueOf(&r.(*kmsg.IncrementalAlterConfigsRequest).Resources).Elem(), configGroup, configTopic, configGroup)
		},
		prepResp: func(r kmsg.Response) {
			setConfigTypes(reflect.ValueOf(&r.(*kmsg.IncrementalAlterConfigsResponse).Resources).Elem(), configGroup, configTopic, configBrokerLogger)
		},
	},
	apis.InitProducerID: {req: map[string]vcKind{"TransactionalID": vcTxn}},
	apis.AddPartitionsToTxn: {
		req: map[string]vcKind{"TransactionalID": vcTxn, "Topics.Topic": vcTopic,
			"Transactions.TransactionalID": vcTxn, "Transactions.Topics.Topic": vcTopic},
		resp: map[string]vcKind{"Topics.Topic": vcDown,
			"Transactions.TransactionalID": vcDown, "Transactions.Topics.Topic": vcDown},
	},
	apis.AddOffsetsToTxn: {req: map[string]vcKind{"TransactionalID": vcTxn, "Group": vcGroup}},
	apis.EndTxn:          {req: map[string]vcKind{"TransactionalID": vcTxn}},
	apis.TxnOffsetCommit: {
		req:  map[string]vcKind{"TransactionalID": vcTxn, "Group": vcGroup, "Topics.Topic": vcTopic, "Topics.TopicID": vcID},
		resp: map[string]vcKind{"Topics.Topic": vcDown, "Topics.TopicID": vcID},
	},
	apis.DescribeProducers: {
		req:  map[string]vcKind{"Topics.Topic": vcTopic},
		resp: map[string]vcKind{"Topics.Topic": vcDown, "Topics.Partitions.ErrorMessage": vcMsg},
	},
	apis.DescribeTransactions: {
		req:  map[string]vcKind{"TransactionalIDs": vcTxn},
		resp: map[string]vcKind{"TransactionStates.TransactionalID": vcDown, "TransactionStates.Topics.Topic": vcFilter},
	},
	apis.ListTransactions: {
		req:  map[string]vcKind{"TransactionalIDPattern": vcRegex},
		resp: map[string]vcKind{"TransactionStates.TransactionalID": vcFilter},
	},
	apis.DescribeTopicPartitions: {
		req:  map[string]vcKind{"Topics.Topic": vcTopic, "Cursor.Topic": vcTopic},
		resp: map[string]vcKind{"Topics.Topic": vcFilter, "NextCursor.Topic": vcFilter},
	},
	apis.ElectLeaders: {
		req:  map[string]vcKind{"Topics.Topic": vcTopic},
		resp: map[string]vcKind{"Topics.Topic": vcDown, "Topics.Partitions.ErrorMessage": vcMsg},
	},
	apis.AlterPartitionAssignments: {
		req:  map[string]vcKind{"Topics.Topic": vcTopic},
		resp: map[string]vcKind{"ErrorMessage": vcMsg, "Topics.Topic": vcDown, "Topics.Partitions.ErrorMessage": vcMsg},
	},
	apis.ListPartitionReassignments: {
		req:  map[string]vcKind{"Topics.Topic": vcTopic},
		resp: map[string]vcKind{"ErrorMessage": vcMsg, "Topics.Topic": vcFilter},
	},
	apis.DescribeLogDirs: {
		req:  map[string]vcKind{"Topics.Topic": vcTopic},
		resp: map[string]vcKind{"Dirs.Topics.Topic": vcFilter},
	},
	apis.ConsumerGroupHeartbeat: {
		req: map[string]vcKind{"Group": vcGroup, "SubscribedTopicNames": vcTopic,
			"SubscribedTopicRegex": vcRegex, "Topics.TopicID": vcID},
		resp: map[string]vcKind{"ErrorMessage": vcMsg, "Assignment.Topics.TopicID": vcIDFilter},
	},
	apis.ConsumerGroupDescribe: {
		req: map[string]vcKind{"Groups": vcGroup},
		resp: map[string]vcKind{"Groups.Group": vcDown, "Groups.ErrorMessage": vcMsg,
			"Groups.Members.SubscribedTopics":                       vcFilter,
			"Groups.Members.SubscribedTopicRegex":                   vcRegexDown,
			"Groups.Members.Assignment.TopicPartitions.Topic":       vcFilter,
			"Groups.Members.TargetAssignment.TopicPartitions.Topic": vcFilter},
		prepResp: func(r kmsg.Response) {
			for i := range r.(*kmsg.ConsumerGroupDescribeResponse).Groups {
				g := &r.(*kmsg.ConsumerGroupDescribeResponse).Groups[i]
				if len(g.Members) > 0 {
					re := `team-a\.(?:ord.*)`
					g.Members[0].SubscribedTopicRegex = &re
				}
			}
		},
	},
	apis.ShareGroupHeartbeat: {
		req:  map[string]vcKind{"GroupID": vcGroup, "SubscribedTopicNames": vcTopic},
		resp: map[string]vcKind{"ErrorMessage": vcMsg, "Assignment.TopicPartitions.TopicID": vcIDFilter},
	},
	apis.ShareGroupDescribe: {
		req: map[string]vcKind{"GroupIDs": vcGroup},
		resp: map[string]vcKind{"Groups.GroupID": vcDown, "Groups.ErrorMessage": vcMsg,
			"Groups.Members.SubscribedTopicNames":             vcFilter,
			"Groups.Members.Assignment.TopicPartitions.Topic": vcFilter},
	},
	apis.DescribeShareGroupOffsets: {
		req:  map[string]vcKind{"Groups.GroupID": vcGroup, "Groups.Topics.Topic": vcTopic},
		resp: map[string]vcKind{"Groups.GroupID": vcDown, "Groups.ErrorMessage": vcMsg, "Groups.Topics.Topic": vcFilter},
	},
	apis.AlterShareGroupOffsets: {
		req:  map[string]vcKind{"GroupID": vcGroup, "Topics.Topic": vcTopic},
		resp: map[string]vcKind{"ErrorMessage": vcMsg, "Topics.Topic": vcDown},
	},
	apis.DeleteShareGroupOffsets: {
		req:  map[string]vcKind{"GroupID": vcGroup, "Topics.Topic": vcTopic},
		resp: map[string]vcKind{"ErrorMessage": vcMsg, "Topics.Topic": vcDown, "Topics.ErrorMessage": vcMsg},
	},
	apis.ShareFetch: {
		req:  map[string]vcKind{"GroupID": vcGroup, "Topics.TopicID": vcID, "ForgottenTopicsData.TopicID": vcID},
		resp: map[string]vcKind{"ErrorMessage": vcMsg, "Topics.TopicID": vcID},
	},
	apis.ShareAcknowledge: {
		req:  map[string]vcKind{"GroupID": vcGroup, "Topics.TopicID": vcID},
		resp: map[string]vcKind{"ErrorMessage": vcMsg, "Topics.TopicID": vcID},
	},
}

// setConfigTypes sets the ResourceType of a slice of config resources,
// element by element.
func setConfigTypes(s reflect.Value, types ...int8) {
	for i := 0; i < s.Len() && i < len(types); i++ {
		s.Index(i).FieldByName("ResourceType").SetInt(int64(types[i]))
	}
}

// vcTestMask is the session mask of the test's names.
var vcTestMask = [16]byte{0x5a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

// vcFiller fills a kmsg struct: every slice of structs or strings gets
// three elements (the second another tenant's, the others the
// tenant's), every string and nullable string a name made of its path,
// every topic id a fresh id known to the view as the tenant's or as
// another tenant's.
type vcFiller struct {
	resp bool // answer names are upstream names
	ids  *topicIDView
	next byte
}

func (f *vcFiller) name(path string, own bool) string {
	switch {
	case !f.resp:
		return strings.ReplaceAll(path, ".", "_") // a tenant's name
	case own:
		return vcTestPrefix + path
	default:
		return "team-b." + path
	}
}

func (f *vcFiller) id(own bool) [16]byte {
	f.next++
	id := [16]byte{0xb0, f.next, 0xee}
	up := "team-b.id"
	if own {
		id[0], up = 0xa0, vcTestPrefix+"id"
	}
	f.ids.learn(id, fmt.Sprintf("%s%d", up, f.next))
	return id
}

func (f *vcFiller) fill(v reflect.Value, path string, own bool) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.name(path, own))
	case reflect.Array:
		if v.Type() == reflect.TypeFor[[16]byte]() {
			v.Set(reflect.ValueOf(f.id(own)))
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), path, own)
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() || sf.Name == "UnknownTags" || sf.Name == "Version" {
				continue
			}
			f.fill(v.Field(i), joinPath(path, sf.Name), own)
		}
	case reflect.Slice:
		ek := v.Type().Elem().Kind()
		if ek != reflect.Struct && ek != reflect.String {
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 3, 3))
		for i := range 3 {
			f.fill(v.Index(i), fmt.Sprintf("%s%d", path, i), i != 1)
		}
	}
}

func joinPath(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// specPath is a fill path without its element indexes ("Topics1.Topic"
// is "Topics.Topic"); the spec is keyed by field names.
type vcExpect struct {
	spec map[string]vcKind
	resp bool
	n    *vcNames
	hits map[string]bool // "request "+path or "answer "+path: a field the version has
}

func (x *vcExpect) hit(path string) {
	side := "request "
	if x.resp {
		side = "answer "
	}
	x.hits[side+path] = true
}

// apply rewrites v as the spec says; keep is false for a struct that a
// vcFilter or vcIDFilter field of it drops.
func (x *vcExpect) apply(v reflect.Value, path string) (keep bool) {
	keep = true
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return true
		}
		if v.Elem().Kind() == reflect.String {
			return x.str(v, path)
		}
		if !x.apply(v.Elem(), path) {
			v.Set(reflect.Zero(v.Type()))
		}
	case reflect.String:
		return x.str(v, path)
	case reflect.Array:
		return x.id(v, path)
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() || sf.Name == "UnknownTags" || sf.Name == "Version" {
				continue
			}
			fp := joinPath(path, sf.Name)
			switch x.spec[fp] {
			case vcConfig:
				x.hit(fp)
				x.config(v, v.Field(i))
				continue
			case vcIDIfNoName:
				if v.FieldByName("Topic").IsNil() {
					x.id(v.Field(i), fp)
				}
				continue
			}
			if !x.apply(v.Field(i), fp) {
				keep = false
			}
		}
	case reflect.Slice:
		ek := v.Type().Elem().Kind()
		if ek != reflect.Struct && ek != reflect.String {
			return true
		}
		out := reflect.MakeSlice(v.Type(), 0, v.Len())
		for i := range v.Len() {
			if x.apply(v.Index(i), path) {
				out = reflect.Append(out, v.Index(i))
			}
		}
		if !v.IsNil() {
			v.Set(out)
		}
	}
	return keep
}

// str rewrites a string or a nullable string (s is the *string or the
// string value).
func (x *vcExpect) str(s reflect.Value, path string) bool {
	sv := s
	if s.Kind() == reflect.Pointer {
		sv = s.Elem()
	}
	cur := sv.String()
	if cur == "" {
		return true // absent at this version
	}
	x.hit(path)
	p := vcTestPrefix
	rest, own := strings.CutPrefix(cur, p)
	own = own && rest != ""
	switch x.spec[path] {
	case vcTopic, vcGroup, vcTxn:
		sv.SetString(p + cur)
	case vcRegex:
		sv.SetString(`team-a\.(?:` + cur + `)`)
	case vcDown:
		if own {
			sv.SetString(rest)
		}
	case vcDownOrNil:
		if !own {
			s.Set(reflect.Zero(s.Type()))
			return true
		}
		sv.SetString(rest)
	case vcFilter:
		if !own {
			return false
		}
		sv.SetString(rest)
	case vcMsg:
		sv.SetString(strings.ReplaceAll(cur, p, ""))
	case vcRegexDown:
		in, ok := strings.CutPrefix(cur, `team-a\.(?:`)
		if !ok || !strings.HasSuffix(in, ")") {
			s.Set(reflect.Zero(s.Type()))
			return true
		}
		sv.SetString(strings.TrimSuffix(in, ")"))
	}
	return true
}

func (x *vcExpect) id(v reflect.Value, path string) bool {
	id := v.Interface().([16]byte)
	if id == ([16]byte{}) {
		return true
	}
	x.hit(path)
	own := x.n.ids.owns(id, vcTestPrefix)
	switch x.spec[path] {
	case vcID, vcIDIfNoName:
		if !own {
			for i := range id {
				id[i] ^= vcTestMask[i]
			}
			v.Set(reflect.ValueOf(id))
		}
	case vcIDFilter:
		return own || !x.n.ids.known(id)
	}
	return true
}

// config rewrites a config resource's name by its type: topics and
// groups are named, brokers and loggers are not.
func (x *vcExpect) config(res, name reflect.Value) {
	cur := name.String()
	switch res.FieldByName("ResourceType").Int() {
	case configTopic, configGroup:
		if !x.resp {
			name.SetString(vcTestPrefix + cur)
		} else if rest, ok := strings.CutPrefix(cur, vcTestPrefix); ok && rest != "" {
			name.SetString(rest)
		}
	}
}

func vcRowNames() *vcNames {
	return &vcNames{prefix: vcTestPrefix, ids: &topicIDView{m: map[[16]byte]string{}}, mask: vcTestMask}
}

type vcCodec interface {
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
	SetVersion(int16)
}

// roundTrip encodes m at v and decodes a fresh one.
func roundTrip[M vcCodec](t *testing.T, name string, m M, fresh func() M, v int16) M {
	t.Helper()
	out := fresh()
	out.SetVersion(v)
	if err := out.ReadFrom(m.AppendTo(nil)); err != nil {
		t.Fatalf("%s: decode: %v", name, err)
	}
	return out
}

func checkVCRequestRow(t *testing.T, name string, key, v int16, e *vcEntry, spec vcRowSpec, hits map[string]bool) {
	n := vcRowNames()
	fresh := func() kmsg.Request { return kmsg.RequestForKey(key) }
	in := fresh()
	in.SetVersion(v)
	(&vcFiller{ids: n.ids}).fill(reflect.ValueOf(in).Elem(), "", true)
	if spec.prepReq != nil {
		spec.prepReq(in)
	}
	before := roundTrip(t, name, in, fresh, v)
	got := roundTrip(t, name, before, fresh, v)
	if e.req != nil {
		if ref := e.req(n, got); ref != nil {
			t.Errorf("%s: request refused (%s)", name, ref.reason)
			return
		}
	}
	got = roundTrip(t, name, got, fresh, v)
	want := roundTrip(t, name, before, fresh, v)
	(&vcExpect{spec: spec.req, n: n, hits: hits}).apply(reflect.ValueOf(want).Elem(), "")
	want = roundTrip(t, name, want, fresh, v)
	diffVC(t, name+" request", got, want)

	// Every topic name the version carries, emptied, refuses the request.
	for path, k := range spec.req {
		if k != vcTopic {
			continue
		}
		r := roundTrip(t, name, before, fresh, v)
		if !emptyFirst(reflect.ValueOf(r).Elem(), strings.Split(path, ".")) {
			continue
		}
		if ref := e.req(vcRowNames(), r); ref != refuseEmptyTopic {
			t.Errorf("%s: empty %s: refusal %v, want %v", name, path, ref, refuseEmptyTopic)
		}
	}
}

// emptyFirst empties the first non-empty string at path; false if there
// is none (the field is not in this version).
func emptyFirst(v reflect.Value, path []string) bool {
	switch v.Kind() {
	case reflect.Pointer:
		return !v.IsNil() && emptyFirst(v.Elem(), path)
	case reflect.String:
		if len(path) > 0 || v.String() == "" {
			return false
		}
		v.SetString("")
		return true
	case reflect.Slice:
		for i := range v.Len() {
			if emptyFirst(v.Index(i), path) {
				return true
			}
		}
		return false
	case reflect.Struct:
		if len(path) == 0 {
			return false
		}
		f := v.FieldByName(path[0])
		return f.IsValid() && emptyFirst(f, path[1:])
	}
	return false
}

func checkVCResponseRow(t *testing.T, name string, key, v int16, e *vcEntry, spec vcRowSpec, hits map[string]bool) {
	n := vcRowNames()
	fresh := func() kmsg.Response { return kmsg.ResponseForKey(key) }
	in := fresh()
	in.SetVersion(v)
	(&vcFiller{resp: true, ids: n.ids}).fill(reflect.ValueOf(in).Elem(), "", true)
	if spec.prepResp != nil {
		spec.prepResp(in)
	}
	before := roundTrip(t, name, in, fresh, v)
	want := roundTrip(t, name, before, fresh, v)
	(&vcExpect{spec: spec.resp, resp: true, n: n, hits: hits}).apply(reflect.ValueOf(want).Elem(), "")
	want = roundTrip(t, name, want, fresh, v)
	got := roundTrip(t, name, before, fresh, v)
	e.resp(n, got)
	got = roundTrip(t, name, got, fresh, v)
	diffVC(t, name+" answer", got, want)
}

// diffVC reports the first fields where got and want differ.
func diffVC(t *testing.T, name string, got, want any) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	g, w := flattenVC(reflect.ValueOf(got), ""), flattenVC(reflect.ValueOf(want), "")
	var diffs []string
	for i := 0; i < max(len(g), len(w)) && len(diffs) < 6; i++ {
		var gi, wi string
		if i < len(g) {
			gi = g[i]
		}
		if i < len(w) {
			wi = w[i]
		}
		if gi != wi {
			diffs = append(diffs, fmt.Sprintf("got %s, want %s", gi, wi))
		}
	}
	t.Errorf("%s differs:\n  %s", name, strings.Join(diffs, "\n  "))
}

func flattenVC(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path + "=nil"}
		}
		return flattenVC(v.Elem(), path)
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out = append(out, flattenVC(v.Field(i), joinPath(path, v.Type().Field(i).Name))...)
			}
		}
		return out
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return []string{fmt.Sprintf("%s=%x", path, v.Bytes())}
		}
		out := []string{fmt.Sprintf("%s.len=%d", path, v.Len())}
		for i := range v.Len() {
			out = append(out, flattenVC(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	return []string{fmt.Sprintf("%s=%v", path, v.Interface())}
}

// BenchmarkVCTableRow: a row's rewrite as the stage and the write side
// run it (decode, rewrite, encode) for a request and an answer built by
// the table test's filler.
func BenchmarkVCTableRow(b *testing.B) {
	for _, c := range []struct {
		key, version int16
		answer       bool
	}{
		{apis.OffsetCommit, 9, false},
		{apis.Metadata, 12, true},
		{apis.ConsumerGroupDescribe, 1, true},
	} {
		b.Run(fmt.Sprintf("%s/v%d/answer=%v", kmsg.NameForKey(c.key), c.version, c.answer), func(b *testing.B) {
			n := vcRowNames()
			var m vcCodec = kmsg.RequestForKey(c.key)
			if c.answer {
				m = kmsg.ResponseForKey(c.key)
			}
			m.SetVersion(c.version)
			(&vcFiller{resp: c.answer, ids: n.ids}).fill(reflect.ValueOf(m).Elem(), "", true)
			body := m.AppendTo(nil)
			e := vcTable[c.key]
			b.ReportAllocs()
			for b.Loop() {
				if c.answer {
					p := kmsg.ResponseForKey(c.key)
					p.SetVersion(c.version)
					if err := p.ReadFrom(body); err != nil {
						b.Fatal(err)
					}
					e.resp(n, p)
					p.AppendTo(nil)
				} else {
					q := kmsg.RequestForKey(c.key)
					q.SetVersion(c.version)
					if err := q.ReadFrom(body); err != nil {
						b.Fatal(err)
					}
					e.req(n, q)
					q.AppendTo(nil)
				}
			}
		})
	}
}
