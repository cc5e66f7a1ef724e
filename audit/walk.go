package audit

import (
	"reflect"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// The generic describer: every API but Produce and Fetch is described by
// walking its kmsg struct by field name, so new APIs and versions need no
// code here. Plans (which field is what) are computed once per type.

// isAdmin reports whether records of key list the resources they touch:
// cluster administration rather than data or group traffic
// (apis.Info.ListsResources).
func isAdmin(key int16) bool { return apis.Of(key).ListsResources }

// walker describes any kmsg message by the names of its fields.
type walker struct {
	rec      *Record
	names    TopicNames
	admin    bool
	response bool
}

// maxWalkDepth bounds recursion; kmsg messages nest at most five levels.
const maxWalkDepth = 8

func describeGeneric(rec *Record, req kmsg.Request, resp kmsg.Response, names TopicNames) {
	w := &walker{rec: rec, names: names, admin: isAdmin(rec.Key)}
	if fc, ok := req.(*kmsg.FindCoordinatorRequest); ok {
		describeFindCoordinator(rec, fc)
	} else {
		w.walk(reflect.ValueOf(req).Elem(), nil, 0, 0)
	}
	if w.admin {
		for _, t := range rec.Topics {
			rec.addResource("topic:" + t.Name)
		}
	}
	if resp != nil {
		w.response = true
		w.walk(reflect.ValueOf(resp).Elem(), nil, 0, 0)
	}
}

// FindCoordinator keys are group ids (type 0) or transactional ids (1);
// v4+ batches them (KIP-699).
func describeFindCoordinator(rec *Record, r *kmsg.FindCoordinatorRequest) {
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	for _, k := range keys {
		switch r.CoordinatorType {
		case 0:
			rec.setGroup(k)
		case 1:
			rec.setTxn(k)
		default:
			rec.addResource("coordinator_key:" + k)
		}
	}
}

// setGroup sets Group to the first group seen; a request naming several
// (DescribeGroups, OffsetFetch v8+) lists them all as resources.
func (r *Record) setGroup(g string) {
	switch {
	case r.Group == "":
		r.Group = g
	case r.Group != g:
		r.addResource("group:" + r.Group)
		r.addResource("group:" + g)
	}
}

func (r *Record) setTxn(id string) {
	switch {
	case r.TransactionalID == "":
		r.TransactionalID = id
	case r.TransactionalID != id:
		r.addResource("transactional_id:" + r.TransactionalID)
		r.addResource("transactional_id:" + id)
	}
}

// maxResources caps Resources: a DeleteGroups of 100,000 groups makes a
// record, not a megabyte line, and deduplication stays cheap.
const maxResources = 1000

func (r *Record) addResource(s string) {
	if len(r.Resources) >= maxResources {
		return
	}
	for _, e := range r.Resources {
		if e == s {
			return
		}
	}
	r.Resources = append(r.Resources, s)
}

// plan is what walker needs to know about one struct type: the index of
// each interesting field (-1 when absent) and the fields to descend into.
type plan struct {
	topic, topicID, partition, partitions int
	groups, txns                          []int // string or *string fields
	groupList, txnList, topicList         int   // []string fields
	resType, resName                      int
	userName                              int // Name in a SCRAM user entry
	errorCode                             int
	children                              []int // struct and []struct fields
}

var plans sync.Map // reflect.Type -> *plan

func planFor(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	p := &plan{topic: -1, topicID: -1, partition: -1, partitions: -1, groupList: -1, txnList: -1, topicList: -1, resType: -1, resName: -1, userName: -1, errorCode: -1}
	isTopic := strings.HasSuffix(t.Name(), "Topic")
	isUser := strings.Contains(t.Name(), "SCRAM") && !strings.HasSuffix(t.Name(), "Request") && !strings.HasSuffix(t.Name(), "Response")
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		str := ft.Kind() == reflect.String || (ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.String)
		strList := ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.String
		switch {
		case (f.Name == "Topic" || (isTopic && (f.Name == "Name" || f.Name == "TopicName"))) && str:
			p.topic = i
		case f.Name == "TopicID" && ft == reflect.TypeFor[[16]byte]():
			p.topicID = i
		case f.Name == "Partition" && ft.Kind() == reflect.Int32:
			p.partition = i
		case f.Name == "Partitions" && ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Int32:
			p.partitions = i
		case (f.Name == "Group" || f.Name == "GroupID") && str:
			p.groups = append(p.groups, i)
		case (f.Name == "TransactionalID" || f.Name == "TransactionID") && str:
			p.txns = append(p.txns, i)
		case (f.Name == "Groups" || f.Name == "GroupIDs") && strList:
			p.groupList = i
		case f.Name == "TransactionalIDs" && strList:
			p.txnList = i
		case f.Name == "TopicNames" && strList:
			// DeleteTopics v0-v5 names topics as a plain list.
			p.topicList = i
		case f.Name == "ResourceType" && ft.Kind() == reflect.Int8:
			p.resType = i
		case f.Name == "ResourceName" && str:
			p.resName = i
		case f.Name == "Name" && isUser && ft.Kind() == reflect.String:
			p.userName = i
		case f.Name == "ErrorCode" && ft.Kind() == reflect.Int16:
			p.errorCode = i
		case f.Name == "UnknownTags":
		case ft.Kind() == reflect.Struct, ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			p.children = append(p.children, i)
		}
	}
	plans.Store(t, p)
	return p
}

func strField(v reflect.Value) (string, bool) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", false
		}
		v = v.Elem()
	}
	return v.String(), true
}

// walk describes struct v. topic is the index in rec.Topics of the topic
// v belongs to (nil above topic level); hint is v's index in its slice.
//
// A request walk appends without searching, except that a topic repeated
// back to back is merged: a client's request is never matched in
// quadratic time, at the cost of a repeated name appearing twice in a
// record. A response walk looks each topic and partition up at its own
// index first, since responses keep the request's order.
func (w *walker) walk(v reflect.Value, topic *int, hint, depth int) {
	if depth > maxWalkDepth || v.Kind() != reflect.Struct {
		return
	}
	p := planFor(v.Type())
	if p.errorCode >= 0 {
		w.rec.addErrorCode(int16(v.Field(p.errorCode).Int()))
	}
	if !w.response {
		w.request(v, p)
	}
	// Topic context: the index of this struct's topic in rec.Topics, for
	// the partitions below it.
	if p.topic >= 0 || p.topicID >= 0 {
		name := ""
		if p.topic >= 0 {
			name, _ = strField(v.Field(p.topic))
		}
		var id [16]byte
		if p.topicID >= 0 {
			reflect.Copy(reflect.ValueOf(id[:]), v.Field(p.topicID))
		}
		name = topicName(name, id, w.names)
		idx := -1
		switch {
		case w.response:
			idx = w.rec.topicIndex(hint, name)
		case name == "":
		case len(w.rec.Topics) > 0 && w.rec.Topics[len(w.rec.Topics)-1].Name == name:
			idx = len(w.rec.Topics) - 1
		default:
			w.rec.Topics = append(w.rec.Topics, Topic{Name: name})
			idx = len(w.rec.Topics) - 1
		}
		topic = &idx
		if p.partitions >= 0 && idx >= 0 && !w.response {
			ps := v.Field(p.partitions)
			for i := range ps.Len() {
				w.addPartition(idx, i, int32(ps.Index(i).Int()), 0)
			}
		}
	} else if p.partition >= 0 && topic != nil && *topic >= 0 {
		part := int32(v.Field(p.partition).Int())
		ec := int16(0)
		if p.errorCode >= 0 {
			ec = int16(v.Field(p.errorCode).Int())
		}
		w.addPartition(*topic, hint, part, ec)
	}
	for _, i := range p.children {
		f := v.Field(i)
		if f.Kind() == reflect.Struct {
			w.walk(f, topic, 0, depth+1)
			continue
		}
		for j := range f.Len() {
			w.walk(f.Index(j), topic, j, depth+1)
		}
	}
}

// request records the ids a request struct names.
func (w *walker) request(v reflect.Value, p *plan) {
	for _, i := range p.groups {
		if g, ok := strField(v.Field(i)); ok && g != "" {
			w.rec.setGroup(g)
		}
	}
	for _, i := range p.txns {
		if id, ok := strField(v.Field(i)); ok && id != "" {
			w.rec.setTxn(id)
		}
	}
	if p.groupList >= 0 {
		list := v.Field(p.groupList)
		for j := range list.Len() {
			w.rec.setGroup(list.Index(j).String())
		}
	}
	if p.txnList >= 0 {
		list := v.Field(p.txnList)
		for j := range list.Len() {
			w.rec.setTxn(list.Index(j).String())
		}
	}
	if p.resType >= 0 && p.resName >= 0 {
		name, ok := strField(v.Field(p.resName))
		if !ok {
			name = "*" // a null name in an ACL filter matches any
		}
		w.rec.addResource(resourceKind(v.Field(p.resType)) + ":" + name)
	}
	if p.userName >= 0 {
		w.rec.addResource("user:" + v.Field(p.userName).String())
	}
	if p.topicList >= 0 {
		list := v.Field(p.topicList)
		for j := range list.Len() {
			w.rec.addTopicName(list.Index(j).String())
		}
	}
}

// resourceKind names a config or ACL resource type the way Kafka's
// tools spell them, lower-cased: topic, broker, group, cluster, ...
// ACL resources are prefixed "acl:" so that "acl:topic:orders" (a rule
// about the topic) is not mistaken for the topic itself.
func resourceKind(v reflect.Value) string {
	kind := "unknown"
	if s, ok := v.Interface().(interface{ String() string }); ok {
		kind = strings.ToLower(s.String())
	}
	if v.Type() == reflect.TypeFor[kmsg.ACLResourceType]() {
		return "acl:" + kind
	}
	return kind
}

func (r *Record) addTopicName(name string) {
	if name != "" {
		r.Topics = append(r.Topics, Topic{Name: name})
	}
}

// addPartition adds a partition to topic idx in a request walk, or sets
// the error code of the matching one (looked up at hint first) in a
// response walk.
func (w *walker) addPartition(idx, hint int, part int32, ec int16) {
	t := &w.rec.Topics[idx]
	if !w.response {
		t.Partitions = append(t.Partitions, Partition{Partition: part, Offset: NoOffset, ErrorCode: ec})
		return
	}
	if rp := t.findPartition(hint, part); rp != nil && ec != 0 {
		rp.ErrorCode = ec
	}
}
