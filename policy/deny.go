package policy

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/apis"
)

// Building a broker-like error response (docs/protocol.md §4.2). kmsg has
// no "error response for this request"; Kafka's Java requests each have a
// getErrorResponse. Request and response schemas mirror each other by
// field name (Topics[].Partitions[] in both, Partition in both), so one
// reflective walk over the generated types covers every key: it copies
// the identifying fields (Topic, TopicID, Partition, Group, ...) of each
// request element into a new response element, sets ErrorCode (and
// ErrorMessage where the version has one), and sets the top-level
// ErrorCode when no element took the error, or where Kafka puts it there
// as well (topLevelToo). The few schemas whose names differ are mapped in
// sliceRename and stringElem.
//
// NOTE: TestDenyEveryKey encodes, decodes and inspects the result for
// every key and version kmsg knows; a kmsg upgrade that adds a schema
// this walk cannot mirror fails it.

// denyMessage is the ErrorMessage of denied entries. It does not name the
// rule: clients should not learn the policy's structure.
var denyMessage = "Denied by the gateway policy."

// sliceRename maps a request list to the response list that answers it,
// where the schemas name them differently.
var sliceRename = map[string]string{
	"Creations":        "Results",           // CreateAcls
	"Filters":          "Results",           // DeleteAcls
	"TopicNames":       "Topics",            // DeleteTopics v0-5
	"CoordinatorKeys":  "Coordinators",      // FindCoordinator v4+
	"TransactionalIDs": "TransactionStates", // DescribeTransactions
	"GroupIDs":         "Groups",            // ShareGroupDescribe
	"Deletions":        "Results",           // AlterUserScramCredentials (with Upsertions)
	"Upsertions":       "Results",
	"Users":            "Results", // DescribeUserScramCredentials
	"FeatureUpdates":   "Results", // UpdateFeatures
}

// stringElem names the response element field a plain request list of
// names fills.
var stringElem = map[string]string{
	"Groups":           "Group",
	"GroupIDs":         "GroupID",
	"TopicNames":       "Topic",
	"CoordinatorKeys":  "Key",
	"TransactionalIDs": "TransactionalID",
}

// skipCopy are fields never copied from a request element.
var skipCopy = map[string]bool{"ErrorCode": true, "ErrorMessage": true, "UnknownTags": true, "Version": true, "ThrottleMillis": true}

// denyResponse builds the error response for req.
func denyResponse(req kmsg.Request, codes *resourceCodes) kmsg.Response {
	resp := req.ResponseKind()
	key, version := req.Key(), req.GetVersion()
	switch r := req.(type) {
	case *kmsg.AlterReplicaLogDirsRequest:
		out := resp.(*kmsg.AlterReplicaLogDirsResponse)
		for _, d := range r.Dirs {
			for _, t := range d.Topics {
				rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
				rt.Topic = t.Topic
				code := codes.get(resKey{kind: resTopic, name: t.Topic}, codes.top)
				for _, p := range t.Partitions {
					rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
		}
		return resp
	case *kmsg.MetadataRequest:
		return metadataDeny(r, codes)
	}
	rv := reflect.ValueOf(resp).Elem()
	qv := reflect.ValueOf(req).Elem()
	filled := mirrorLists(qv, rv, codes, codes.top, key, 0)
	// An entry list the version does not carry (UpdateFeatures v2 has no
	// Results) hides the error: check what the client will read.
	if !filled || topLevelToo(key, version) || !errorSurvives(resp) {
		setError(rv, codes.top)
	}
	if fc, ok := resp.(*kmsg.FindCoordinatorResponse); ok {
		// An error carries no endpoint: node -1, host "", port -1
		// (KafkaApis getCoordinator, Node.noNode).
		fc.NodeID, fc.Host, fc.Port = -1, "", -1
		for i := range fc.Coordinators {
			fc.Coordinators[i].NodeID, fc.Coordinators[i].Host, fc.Coordinators[i].Port = -1, "", -1
		}
	}
	return resp
}

// topLevelToo lists responses where Kafka sets the top-level error even
// though entries carry errors too.
func topLevelToo(key, version int16) bool {
	switch key {
	case apis.OffsetFetch: // v2-7: the group error is top-level (docs/protocol.md §4.1)
		return version >= 2 && version <= 7
	case apis.AddPartitionsToTxn: // v4+: per transaction and top-level
		return version >= 4
	case apis.LeaveGroup: // v3+: per member and top-level (LeaveGroupRequest.getErrorResponse)
		return true
	}
	return false
}

// setError sets ErrorCode and ErrorMessage on a struct that has them.
func setError(v reflect.Value, code int16) bool {
	f := v.FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 {
		return false
	}
	f.SetInt(int64(code))
	if m := v.FieldByName("ErrorMessage"); m.IsValid() && m.Kind() == reflect.Pointer && m.Type().Elem().Kind() == reflect.String {
		msg := denyMessage
		m.Set(reflect.ValueOf(&msg))
	}
	return true
}

// elemCode is the error for one request element: its resource's, or the
// one inherited from the enclosing element.
func elemCode(q reflect.Value, codes *resourceCodes, inherited int16, key int16) int16 {
	if s, ok := strField(fieldOf(q, "Topic")); ok && s != "" {
		return codes.get(resKey{kind: resTopic, name: s}, inherited)
	}
	if f := fieldOf(q, "TopicID"); f.IsValid() && f.Type() == idType {
		if id := f.Interface().([16]byte); id != ([16]byte{}) {
			return codes.get(resKey{kind: resTopic, id: id}, inherited)
		}
	}
	for _, n := range []string{"Group", "GroupID"} {
		if s, ok := strField(fieldOf(q, n)); ok && s != "" {
			return codes.get(resKey{kind: resGroup, name: s}, inherited)
		}
	}
	if s, ok := strField(fieldOf(q, "TransactionalID")); ok {
		return codes.get(resKey{kind: resTxn, name: s}, inherited)
	}
	// Config resources (DescribeConfigs, AlterConfigs,
	// IncrementalAlterConfigs) answer by resource type; ACL resources
	// are checked on the cluster instead.
	if rt := fieldOf(q, "ResourceType"); (key == apis.DescribeConfigs || key == apis.AlterConfigs || key == apis.IncrementalAlterConfigs) && rt.IsValid() && rt.Kind() == reflect.Int8 {
		name, _ := strField(fieldOf(q, "ResourceName"))
		switch rt.Int() {
		case 2:
			return codes.get(resKey{kind: resTopic, name: name}, kerr.TopicAuthorizationFailed.Code)
		case 32:
			return codes.get(resKey{kind: resGroup, name: name}, kerr.GroupAuthorizationFailed.Code)
		}
		if inherited == kerr.TopicAuthorizationFailed.Code || inherited == kerr.GroupAuthorizationFailed.Code {
			return kerr.ClusterAuthorizationFailed.Code
		}
	}
	return inherited
}

func fieldOf(v reflect.Value, name string) reflect.Value {
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.FieldByName(name)
}

// mirrorLists answers each list of request q with a list in response r.
// It reports whether any error was placed.
func mirrorLists(q, r reflect.Value, codes *resourceCodes, code, key int16, depth int) bool {
	if depth > 6 {
		return false
	}
	filled := false
	qt := q.Type()
	for i := range qt.NumField() {
		qf := qt.Field(i)
		qv := q.Field(i)
		if qv.Kind() != reflect.Slice || qv.Len() == 0 || qv.Type().Elem().Kind() == reflect.Uint8 {
			continue
		}
		target := qf.Name
		if n, ok := sliceRename[target]; ok {
			target = n
		}
		rv := r.FieldByName(target)
		if !rv.IsValid() || rv.Kind() != reflect.Slice || rv.Type().Elem().Kind() != reflect.Struct {
			continue
		}
		et := rv.Type().Elem()
		out := rv // appends: two request lists may share one response list
		for j := range qv.Len() {
			qe := qv.Index(j)
			re := newElem(et)
			c := code
			switch qe.Kind() {
			case reflect.Struct:
				c = elemCode(qe, codes, code, key)
				copyIdentity(qe, re)
				if mirrorLists(qe, re, codes, c, key, depth+1) {
					filled = true
				}
			case reflect.String:
				name := qe.String()
				fn, ok := stringElem[qf.Name]
				if !ok {
					fn = "Name"
				}
				kind := resGroup
				switch qf.Name {
				case "TopicNames":
					kind = resTopic
				case "TransactionalIDs":
					kind = resTxn
				}
				c = codes.get(resKey{kind: kind, name: name}, code)
				setString(re.FieldByName(fn), name)
			case reflect.Int32:
				if p := re.FieldByName("Partition"); p.IsValid() && p.Kind() == reflect.Int32 {
					p.SetInt(qe.Int())
				}
			default:
				continue
			}
			if setError(re, c) {
				filled = true
			}
			out = reflect.Append(out, re)
		}
		rv.Set(out)
	}
	return filled
}

// newElem makes a response element with kmsg's defaults (its Default
// method), as kmsg.NewXxx would.
func newElem(t reflect.Type) reflect.Value {
	p := reflect.New(t)
	if d, ok := p.Interface().(interface{ Default() }); ok {
		d.Default()
	}
	return p.Elem()
}

// copyIdentity copies the scalar fields a response element shares with
// the request element (Topic, TopicID, Partition, Group, Key, ...).
func copyIdentity(q, r reflect.Value) {
	qt := q.Type()
	for i := range qt.NumField() {
		name := qt.Field(i).Name
		if skipCopy[name] {
			continue
		}
		qv := q.Field(i)
		rv := r.FieldByName(name)
		if !rv.IsValid() || !rv.CanSet() {
			continue
		}
		switch {
		case qv.Kind() == reflect.Slice || qv.Kind() == reflect.Struct && qv.Type() != idType:
			continue
		case qv.Type() == rv.Type():
			rv.Set(qv)
		case qv.Kind() == reflect.String && rv.Kind() == reflect.Pointer && rv.Type().Elem().Kind() == reflect.String:
			s := qv.String()
			rv.Set(reflect.ValueOf(&s))
		case qv.Kind() == reflect.Pointer && rv.Kind() == reflect.String && !qv.IsNil() && qv.Elem().Kind() == reflect.String:
			rv.SetString(qv.Elem().String())
		}
	}
	if rv := r.FieldByName("User"); rv.IsValid() && rv.Kind() == reflect.String {
		if s, ok := strField(fieldOf(q, "Name")); ok {
			rv.SetString(s) // AlterUserScramCredentials answers by user
		}
	}
}

func setString(v reflect.Value, s string) {
	if !v.IsValid() || !v.CanSet() {
		return
	}
	switch {
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.String:
		v.Set(reflect.ValueOf(&s))
	}
}

// errorSurvives reports whether an error code in resp is still there
// after encoding at its version and decoding.
func errorSurvives(resp kmsg.Response) bool {
	dec := kmsg.ResponseForKey(resp.Key())
	if dec == nil {
		return true
	}
	dec.SetVersion(resp.GetVersion())
	if err := dec.ReadFrom(resp.AppendTo(nil)); err != nil {
		return false
	}
	return hasError(reflect.ValueOf(dec), 0)
}

func hasError(v reflect.Value, depth int) bool {
	if depth > 8 {
		return false
	}
	switch v.Kind() {
	case reflect.Pointer:
		return !v.IsNil() && hasError(v.Elem(), depth+1)
	case reflect.Struct:
		if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 && f.Int() != 0 {
			return true
		}
		for i := range v.NumField() {
			if k := v.Field(i).Kind(); (k == reflect.Slice || k == reflect.Struct) && v.Type().Field(i).IsExported() && hasError(v.Field(i), depth+1) {
				return true
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return false
		}
		for i := range v.Len() {
			if hasError(v.Index(i), depth+1) {
				return true
			}
		}
	}
	return false
}

// ErrorResponse is the broker-like answer to req with code on every
// entry (and at the top level where the key has one), carrying msg
// where the version has an error message. The gateway uses it to refuse
// a request for another reason than a rule (virtual clusters).
func ErrorResponse(req kmsg.Request, code int16, msg string) kmsg.Response {
	resp := denyResponse(req, &resourceCodes{top: code})
	setMessages(reflect.ValueOf(resp), msg, 0)
	return resp
}

// setMessages replaces every error message denyResponse set.
func setMessages(v reflect.Value, msg string, depth int) {
	if depth > 8 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			setMessages(v.Elem(), msg, depth+1)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if v.Type().Field(i).Name == "ErrorMessage" && f.Kind() == reflect.Pointer && !f.IsNil() && f.Elem().Kind() == reflect.String {
				m := msg
				f.Set(reflect.ValueOf(&m))
				continue
			}
			if f.CanSet() {
				setMessages(f, msg, depth+1)
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			setMessages(v.Index(i), msg, depth+1)
		}
	}
}
