package policy

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// Resources are found in request bodies by kmsg field name. kmsg is
// generated from Kafka's JSON schemas, which name resources consistently:
// Topic/TopicID for topics, Group/GroupID for groups, TransactionalID for
// transactional ids, and Groups/TopicNames/TransactionalIDs for plain
// lists of names. Produce, Fetch and Metadata, the hot and the split keys,
// are read without reflection (partial.go).
//
// NOTE: a kmsg upgrade that renames one of these fields makes a topic rule
// silently stop matching that key; TestExtractUnits pins the keys that
// carry each kind of resource.

type resKind uint8

const (
	resTopic resKind = iota + 1
	resGroup
	resTxn
)

type resKey struct {
	kind resKind
	name string
	id   [16]byte
}

func (u *unit) key() (resKey, bool) {
	switch {
	case u.hasTopic && u.byID:
		return resKey{kind: resTopic, id: u.topicID}, true
	case u.hasTopic:
		return resKey{kind: resTopic, name: u.topic}, true
	case u.hasGroup:
		return resKey{kind: resGroup, name: u.group}, true
	case u.hasTxn:
		return resKey{kind: resTxn, name: u.txn}, true
	}
	return resKey{}, false
}

// resourceCodes says which error each resource of a denied request gets:
// per (for requests decided resource by resource) or top for all.
type resourceCodes struct {
	top int16
	per map[resKey]int16
}

func (c *resourceCodes) get(k resKey, fallback int16) int16 {
	if c.per != nil {
		if code, ok := c.per[k]; ok {
			return code
		}
	}
	return fallback
}

// keyCode is the error a broker uses when it refuses a request of key
// outright (docs/protocol.md §4.1): the API table's, except where the
// request decides it.
func keyCode(key int16, req kmsg.Request, u *unit) int16 {
	switch key {
	case apis.InitProducerID:
		// WRITE on the transactional id, or IDEMPOTENT_WRITE on the
		// cluster without one.
		if r, ok := req.(*kmsg.InitProducerIDRequest); ok && r.TransactionalID != nil {
			return kerr.TransactionalIDAuthorizationFailed.Code
		}
	case apis.FindCoordinator:
		if u != nil && u.hasTxn {
			return kerr.TransactionalIDAuthorizationFailed.Code
		}
		if r, ok := req.(*kmsg.FindCoordinatorRequest); ok && r.CoordinatorType == 1 {
			return kerr.TransactionalIDAuthorizationFailed.Code
		}
	}
	return apis.Of(key).DenyCode
}

// ruleCode is the error for a unit a rule denies: the resource the rule
// names, or the key's own error for a rule on connection and API only.
func ruleCode(r *rule, key int16, req kmsg.Request, u *unit) int16 {
	switch {
	case r.hasTopicCond():
		return kerr.TopicAuthorizationFailed.Code
	case r.group != nil:
		return kerr.GroupAuthorizationFailed.Code
	case r.txn != nil:
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	return keyCode(key, req, u)
}

// unitCtx is the group and transactional id a nested resource is used
// under (OffsetFetch v8+ groups hold topics; AddPartitionsToTxn v4+
// transactions hold topics).
type unitCtx struct {
	group, txn       string
	hasGroup, hasTxn bool
}

type extractor struct {
	names TopicNames
	out   []unit
}

// extractUnits lists what a request acts on; a request that names nothing
// is one empty unit.
func extractUnits(req kmsg.Request, names TopicNames) []unit {
	x := &extractor{names: names}
	if fc, ok := req.(*kmsg.FindCoordinatorRequest); ok {
		keys := fc.CoordinatorKeys
		if fc.Version < 4 {
			keys = []string{fc.CoordinatorKey}
		}
		for _, k := range keys {
			if fc.CoordinatorType == 1 {
				x.out = append(x.out, unit{txn: k, hasTxn: true})
			} else {
				x.out = append(x.out, unit{group: k, hasGroup: true})
			}
		}
	} else if v := reflect.ValueOf(req); v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct {
		x.walk(v.Elem(), unitCtx{}, 0)
	}
	if len(x.out) == 0 {
		return []unit{{}}
	}
	return x.out
}

func (x *extractor) topicUnit(name string, id [16]byte, c unitCtx) unit {
	u := unit{hasTopic: true, topic: name, group: c.group, hasGroup: c.hasGroup, txn: c.txn, hasTxn: c.hasTxn}
	if name == "" && id != ([16]byte{}) {
		u.byID, u.topicID = true, id
		if x.names != nil {
			u.topic, u.unknownID = "", true
			if n, ok := x.names.TopicName(id); ok {
				u.topic, u.unknownID = n, false
			}
		} else {
			u.unknownID = true
		}
	}
	return u
}

// strField reads a string or *string field.
func strField(v reflect.Value) (string, bool) {
	switch v.Kind() {
	case reflect.String:
		return v.String(), v.Len() > 0
	case reflect.Pointer:
		if !v.IsNil() && v.Elem().Kind() == reflect.String {
			return v.Elem().String(), true
		}
	}
	return "", false
}

var idType = reflect.TypeFor[[16]byte]()

// walk reads one struct; it returns whether it emitted a unit.
func (x *extractor) walk(v reflect.Value, c unitCtx, depth int) bool {
	if depth > 8 {
		return false
	}
	n := scanFields(v, &c)
	if n.hasTopic {
		if n.topic != "" {
			n.id = [16]byte{}
		}
		x.out = append(x.out, x.topicUnit(n.topic, n.id, c))
		return true
	}
	emitted := x.walkSlices(v, c, depth)
	if !emitted && n.introduced {
		x.out = append(x.out, unit{group: c.group, hasGroup: c.hasGroup, txn: c.txn, hasTxn: c.hasTxn})
		emitted = true
	}
	return emitted
}

// named is what one struct's own fields name.
type named struct {
	topic      string
	id         [16]byte
	hasTopic   bool
	introduced bool // the struct sets a group or transactional id for what it holds
}

// scanFields reads the resource fields of one request struct: its topic
// (by name or id), and the group or transactional id it introduces into
// c for the elements it holds. Config resources name a topic or a group
// by ResourceType and ResourceName.
func scanFields(v reflect.Value, c *unitCtx) named {
	var n named
	t := v.Type()
	resType := int8(-1)
	var resName string
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		switch f.Name {
		case "Topic":
			if s, ok := strField(fv); ok && s != "" {
				n.topic, n.hasTopic = s, true
			}
		case "TopicID":
			if fv.Type() == idType {
				if b := fv.Interface().([16]byte); b != ([16]byte{}) {
					n.id, n.hasTopic = b, true
				}
			}
		case "Group", "GroupID":
			if s, ok := strField(fv); ok && s != "" {
				c.group, c.hasGroup, n.introduced = s, true, true
			}
		case "TransactionalID", "TransactionID":
			if s, ok := strField(fv); ok {
				c.txn, c.hasTxn, n.introduced = s, true, true
			}
		case "ResourceType":
			if fv.Kind() == reflect.Int8 {
				resType = int8(fv.Int())
			}
		case "ResourceName":
			resName, _ = strField(fv)
		}
	}
	switch resType {
	case 2: // TOPIC config resource
		if resName != "" {
			n.topic, n.hasTopic = resName, true
		}
	case 32: // GROUP config resource
		if resName != "" {
			c.group, c.hasGroup, n.introduced = resName, true, true
		}
	}
	return n
}

// walkSlices emits the units of a struct's slices: lists of group,
// topic or transactional id names, and nested structs (walked).
func (x *extractor) walkSlices(v reflect.Value, c unitCtx, depth int) bool {
	t := v.Type()
	emitted := false
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if fv.Kind() != reflect.Slice {
			continue
		}
		switch et := fv.Type().Elem(); et.Kind() {
		case reflect.String:
			for j := range fv.Len() {
				s := fv.Index(j).String()
				switch f.Name {
				case "Groups", "GroupIDs":
					x.out = append(x.out, unit{group: s, hasGroup: true, txn: c.txn, hasTxn: c.hasTxn})
				case "TopicNames", "Topics":
					x.out = append(x.out, x.topicUnit(s, [16]byte{}, c))
				case "TransactionalIDs":
					x.out = append(x.out, unit{txn: s, hasTxn: true})
				default:
					continue
				}
				emitted = true
			}
		case reflect.Struct:
			for j := range fv.Len() {
				if x.walk(fv.Index(j), c, depth+1) {
					emitted = true
				}
			}
		}
	}
	return emitted
}
