package gateway

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The leak tap: a virtual cluster's proof. It wraps a client's dialer
// (kgo.Dialer), so it sees the plaintext bytes the client writes and
// reads on every connection (above TLS on an SNI listener), decodes
// every request by its key and version and every response by the
// request it answers (kmsg), and walks each decoded message by
// reflection, with no hand-written list per API key.
//
// What it checks, by kmsg field name (Go names, at any depth):
//
//   - Every string field of every response (string, *string, []string),
//     error messages included, except Host (a broker address: an SNI
//     listener's broker names may well contain a tenant's name) and a
//     name the client itself sent first (the echo of a probe for
//     "team-b.orders"), must not contain any of the forbidden substrings
//     (the upstream prefixes, "team-a." and "team-b."). Found at once,
//     as a leak.
//   - Name fields are collected, per direction, as topic, group or
//     transactional-id names:
//     topic: Topic, TopicName, TopicNames, Topics ([]string),
//     SubscribedTopicNames, SubscribedTopics, SourceTopics, SinkTopic,
//     RepartitionSinkTopics; ResourceName / Name next to a
//     ResourceType / Type that says topic (ACL type 2, config type 2);
//     group: Group, GroupID, Groups ([]string), GroupIDs; ResourceName
//     for ACL type 3 and config type 32; FindCoordinator's
//     CoordinatorKey, CoordinatorKeys and Key for key type 0;
//     transactional id: TransactionalID, TransactionalIDs; ResourceName
//     for ACL type 5; FindCoordinator keys for key type 1.
//     Foreign reports every name a response showed that is neither one
//     the caller says the tenant owns nor one the client itself sent in
//     a request before any response showed it (an echo of what it asked
//     about; a name learnt from a leak and then asked about stays
//     foreign).
//   - Topic ids (TopicID, and kmsg's TopidID, [16]byte) seen in
//     responses are collected; Foreign reports every one of a given
//     foreign set.
//   - The consumer protocol carried as bytes (JoinGroup Metadata and
//     ProtocolMetadata, SyncGroup and DescribeGroups MemberAssignment,
//     DescribeGroups MemberMetadata) is decoded as kmsg's
//     ConsumerMemberMetadata / ConsumerMemberAssignment when it parses
//     as one, and walked the same way (its Topic / Topics fields).
//   - Record batches (Records) are data, not walked.
//
// A frame it cannot decode (an unknown key, a body kmsg rejects) is a
// failure too: what the tap cannot read it cannot vouch for.
type leakTap struct {
	forbid []string

	mu       sync.Mutex
	leaks    []string                     // forbidden substrings found, undecodable frames
	seen     map[string]map[string]string // kind -> name -> first response path
	sent     map[string]bool              // names the client sent before a response showed them
	shown    map[string]bool              // names a response showed
	ids      map[[16]byte]string          // topic id -> first response path
	keys     map[int16]int                // responses decoded per key
	requests int
}

func newLeakTap(forbid ...string) *leakTap {
	return &leakTap{forbid: forbid, seen: map[string]map[string]string{}, sent: map[string]bool{}, shown: map[string]bool{},
		ids: map[[16]byte]string{}, keys: map[int16]int{}}
}

type dialFunc = func(ctx context.Context, network, host string) (net.Conn, error)

// Dialer wraps inner (a plain net.Dialer if nil) so that every
// connection it returns is tapped.
func (tp *leakTap) Dialer(inner dialFunc) dialFunc {
	if inner == nil {
		var d net.Dialer
		inner = d.DialContext
	}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		c, err := inner(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &tapConn{Conn: c, tap: tp, pending: map[int32]pendingReq{}}, nil
	}
}

// Leaks is what the tap found on its own: forbidden substrings in
// responses and frames it could not decode.
func (tp *leakTap) Leaks() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.leaks)
}

// Foreign reports every name a response showed that the tenant neither
// owns nor sent, and every topic id of foreignIDs a response showed.
func (tp *leakTap) Foreign(owned []string, foreignIDs map[[16]byte]string) []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	own := map[string]bool{}
	for _, n := range owned {
		own[n] = true
	}
	var out []string
	for kind, names := range tp.seen {
		for name, where := range names {
			if !own[name] && !tp.sent[name] {
				out = append(out, fmt.Sprintf("foreign %s %q in %s", kind, name, where))
			}
		}
	}
	for id, where := range tp.ids {
		if name, ok := foreignIDs[id]; ok {
			out = append(out, fmt.Sprintf("foreign topic id %x (%s) in %s", id, name, where))
		}
	}
	sort.Strings(out)
	return out
}

// Seen is the names of kind ("topic", "group", "transactional id")
// responses showed.
func (tp *leakTap) Seen(kind string) []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []string
	for n := range tp.seen[kind] {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Keys is the number of responses decoded per API key.
func (tp *leakTap) Keys() map[int16]int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return maps.Clone(tp.keys)
}

func (tp *leakTap) leak(format string, args ...any) {
	tp.mu.Lock()
	tp.leaks = append(tp.leaks, fmt.Sprintf(format, args...))
	tp.mu.Unlock()
}

type pendingReq struct {
	key, version int16
	keyType      int8 // FindCoordinator's
}

// tapConn reassembles frames from what the client writes (requests)
// and reads (responses). kgo writes from one goroutine and reads from
// another; each side has its own buffer, the correlation map its lock.
type tapConn struct {
	net.Conn
	tap *leakTap

	wbuf, rbuf []byte
	mu         sync.Mutex
	pending    map[int32]pendingReq
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.wbuf = append(c.wbuf, p...)
	for {
		frame, rest, ok := nextFrame(c.wbuf)
		if !ok {
			break
		}
		c.request(frame)
		c.wbuf = rest
	}
	return c.Conn.Write(p)
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.rbuf = append(c.rbuf, p[:n]...)
	for {
		frame, rest, ok := nextFrame(c.rbuf)
		if !ok {
			break
		}
		c.response(frame)
		c.rbuf = rest
	}
	return n, err
}

func nextFrame(b []byte) (frame, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, b, false
	}
	n := int(binary.BigEndian.Uint32(b))
	if len(b) < 4+n {
		return nil, b, false
	}
	out := make([]byte, n)
	copy(out, b[4:4+n])
	return out, b[4+n:], true
}

func (c *tapConn) request(frame []byte) {
	tp := c.tap
	r := kbin.Reader{Src: frame}
	key, version, corr := r.Int16(), r.Int16(), r.Int32()
	r.NullableString() // client id
	req := kmsg.RequestForKey(key)
	if req == nil {
		tp.leak("request key %d v%d: unknown to kmsg", key, version)
		return
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		tp.leak("request key %d v%d: header: %v", key, version, err)
		return
	}
	if err := req.ReadFrom(r.Src); err != nil {
		tp.leak("request key %d v%d: %v", key, version, err)
		return
	}
	p := pendingReq{key: key, version: version}
	if fc, ok := req.(*kmsg.FindCoordinatorRequest); ok {
		p.keyType = fc.CoordinatorType
	}
	if pr, ok := req.(*kmsg.ProduceRequest); !ok || pr.Acks != 0 {
		c.mu.Lock()
		c.pending[corr] = p
		c.mu.Unlock()
	}
	w := walker{tap: tp, request: true, keyType: p.keyType, path: kmsg.NameForKey(key)}
	w.walk(reflect.ValueOf(req).Elem(), "")
	tp.mu.Lock()
	tp.requests++
	tp.mu.Unlock()
}

func (c *tapConn) response(frame []byte) {
	tp := c.tap
	r := kbin.Reader{Src: frame}
	corr := r.Int32()
	c.mu.Lock()
	p, ok := c.pending[corr]
	delete(c.pending, corr)
	c.mu.Unlock()
	if !ok {
		tp.leak("response with correlation id %d answers no request seen", corr)
		return
	}
	resp := kmsg.ResponseForKey(p.key)
	resp.SetVersion(p.version)
	// The ApiVersions response header is always v0 (KIP-511).
	if resp.IsFlexible() && p.key != kmsg.ApiVersions.Int16() {
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		tp.leak("response key %d v%d: header: %v", p.key, p.version, err)
		return
	}
	err := resp.ReadFrom(r.Src)
	if err != nil && p.key == kmsg.ApiVersions.Int16() {
		// A broker answers an ApiVersions version it does not support
		// at v0 (KIP-511).
		resp = kmsg.ResponseForKey(p.key)
		resp.SetVersion(0)
		err = resp.ReadFrom(r.Src)
	}
	if err != nil {
		tp.leak("response key %d v%d: %v", p.key, p.version, err)
		return
	}
	tp.mu.Lock()
	tp.keys[p.key]++
	tp.mu.Unlock()
	w := walker{tap: tp, keyType: p.keyType, path: kmsg.NameForKey(p.key) + "Response"}
	w.walk(reflect.ValueOf(resp).Elem(), "")
}

// Field names whose strings are names, and their kind.
var nameFields = map[string]string{
	"Topic": "topic", "TopicName": "topic", "TopicNames": "topic", "Topics": "topic",
	"SubscribedTopicNames": "topic", "SubscribedTopics": "topic", "SourceTopics": "topic",
	"SinkTopic": "topic", "RepartitionSinkTopics": "topic",
	"Group": "group", "GroupID": "group", "Groups": "group", "GroupIDs": "group",
	"TransactionalID": "transactional id", "TransactionalIDs": "transactional id",
}

// Consumer-protocol byte fields and the kmsg type they carry.
var protocolFields = map[string]func() any{
	"Metadata":         func() any { return new(kmsg.ConsumerMemberMetadata) },
	"ProtocolMetadata": func() any { return new(kmsg.ConsumerMemberMetadata) },
	"MemberMetadata":   func() any { return new(kmsg.ConsumerMemberMetadata) },
	"MemberAssignment": func() any { return new(kmsg.ConsumerMemberAssignment) },
}

var tagsType = reflect.TypeOf(kmsg.Tags{})

type walker struct {
	tap     *leakTap
	request bool
	keyType int8
	path    string
}

func (w *walker) walk(v reflect.Value, field string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			w.walk(v.Elem(), field)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			w.bytes(v.Bytes(), field)
			return
		}
		for i := range v.Len() {
			w.walk(v.Index(i), field)
		}
	case reflect.Array:
		if v.Type() == reflect.TypeOf([16]byte{}) && (field == "TopicID" || field == "TopidID") && !w.request {
			id := v.Interface().([16]byte)
			if id != ([16]byte{}) {
				w.tap.mu.Lock()
				if _, ok := w.tap.ids[id]; !ok {
					w.tap.ids[id] = w.path
				}
				w.tap.mu.Unlock()
			}
		}
	case reflect.Struct:
		if v.Type() == tagsType {
			return
		}
		kinds := w.contextKinds(v)
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if kind, ok := kinds[f.Name]; ok {
				w.names(v.Field(i), f.Name, kind)
				continue
			}
			w.walk(v.Field(i), f.Name)
		}
	case reflect.String:
		kind := nameFields[field]
		w.str(v.String(), field, kind)
	}
}

// contextKinds: the fields of this struct whose kind a sibling decides
// (ResourceName by ResourceType, FindCoordinator keys by key type).
func (w *walker) contextKinds(v reflect.Value) map[string]string {
	out := map[string]string{}
	t := v.Type()
	if rt, ok := t.FieldByName("ResourceType"); ok {
		kind := resourceKind(v.FieldByIndex(rt.Index))
		out["ResourceName"] = kind
	}
	if _, ok := t.FieldByName("Type"); ok && strings.Contains(t.Name(), "ConfigResource") {
		out["Name"] = resourceKind(v.FieldByName("Type"))
	}
	if strings.HasPrefix(t.Name(), "FindCoordinator") {
		kind := ""
		switch w.keyType {
		case 0:
			kind = "group"
		case 1:
			kind = "transactional id"
		}
		for _, f := range []string{"CoordinatorKey", "CoordinatorKeys", "Key"} {
			out[f] = kind
		}
	}
	return out
}

func resourceKind(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case kmsg.ACLResourceType:
		switch x {
		case kmsg.ACLResourceTypeTopic:
			return "topic"
		case kmsg.ACLResourceTypeGroup:
			return "group"
		case kmsg.ACLResourceTypeTransactionalId:
			return "transactional id"
		}
	case kmsg.ConfigResourceType:
		switch x {
		case kmsg.ConfigResourceTypeTopic:
			return "topic"
		case kmsg.ConfigResourceTypeGroupConfig:
			return "group"
		}
	case int8: // ListConfigResources: a config resource type as a plain int8
		switch kmsg.ConfigResourceType(x) {
		case kmsg.ConfigResourceTypeTopic:
			return "topic"
		case kmsg.ConfigResourceTypeGroupConfig:
			return "group"
		}
	}
	return ""
}

// names walks a field whose kind a sibling decided.
func (w *walker) names(v reflect.Value, field, kind string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			w.names(v.Elem(), field, kind)
		}
	case reflect.Slice:
		for i := range v.Len() {
			w.names(v.Index(i), field, kind)
		}
	case reflect.String:
		w.str(v.String(), field, kind)
	}
}

func (w *walker) str(s, field, kind string) {
	tp := w.tap
	where := w.path + "." + field
	if w.request {
		// A name counts as the client's own only if it sent it before
		// any response showed it: asking about a leaked name does not
		// make it the tenant's.
		if kind != "" && s != "" {
			tp.mu.Lock()
			if !tp.shown[s] {
				tp.sent[s] = true
			}
			tp.mu.Unlock()
		}
		return
	}
	tp.mu.Lock()
	echo := tp.sent[s]
	tp.mu.Unlock()
	if field != "Host" && !echo {
		for _, f := range tp.forbid {
			if strings.Contains(s, f) {
				tp.leak("%q (contains %q) in %s", s, f, where)
			}
		}
	}
	if kind == "" || s == "" {
		return
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.seen[kind] == nil {
		tp.seen[kind] = map[string]string{}
	}
	if _, ok := tp.seen[kind][s]; !ok {
		tp.seen[kind][s] = where
	}
	tp.shown[s] = true
}

// bytes decodes the consumer protocol carried in a group's byte fields.
func (w *walker) bytes(b []byte, field string) {
	mk, ok := protocolFields[field]
	if !ok || len(b) == 0 {
		return
	}
	m := mk()
	var err error
	switch m := m.(type) {
	case *kmsg.ConsumerMemberMetadata:
		err = m.ReadFrom(b)
	case *kmsg.ConsumerMemberAssignment:
		err = m.ReadFrom(b)
	}
	if err != nil {
		return // not the consumer protocol
	}
	sub := *w
	sub.path = w.path + "." + field
	sub.walk(reflect.ValueOf(m).Elem(), "")
}
