package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate-kafka/tollgate/internal/atomicfile"
)

// Client quotas (KIP-546 DescribeClientQuotas / AlterClientQuotas, KIP-55
// user and client-id entities): the gateway keeps them in a state file
// and enforces them with the same KIP-219 throttle its rate rules use
// (quota_limit.go). The keys and their types are Kafka's QuotaConfigs.
const (
	QuotaProducerByteRate       = "producer_byte_rate"       // LONG, bytes/s of Produce requests
	QuotaConsumerByteRate       = "consumer_byte_rate"       // LONG, bytes/s of Fetch responses
	QuotaRequestPercentage      = "request_percentage"       // DOUBLE, % of one request thread
	QuotaControllerMutationRate = "controller_mutation_rate" // DOUBLE, partition mutations/s (KIP-599)

	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
	QuotaEntityIP       = "ip"
)

// quotaKeyLong tells, for every key the gateway accepts, whether Kafka
// types it LONG (a whole number) rather than DOUBLE.
var quotaKeyLong = map[string]bool{
	QuotaProducerByteRate:       true,
	QuotaConsumerByteRate:       true,
	QuotaRequestPercentage:      false,
	QuotaControllerMutationRate: false,
}

// QuotaKeys lists the quota keys the gateway stores and enforces.
func QuotaKeys() []string {
	return []string{QuotaProducerByteRate, QuotaConsumerByteRate, QuotaRequestPercentage, QuotaControllerMutationRate}
}

// MaxQuotaEntities bounds the entities a quota store holds, so a client
// cannot grow the state file without bound; Kafka has no such bound, but
// one entity per user and client id of a real cluster stays far below.
var MaxQuotaEntities = 100000

// maxQuotaNameBytes bounds an entity name (a user or client id).
const maxQuotaNameBytes = 4096

// EntityPart is one part of a quota entity: absent (Set false), the
// default (Default true; Kafka's null name) or a name.
type EntityPart struct {
	Set     bool
	Default bool
	Name    string
}

func (p EntityPart) ptr() *string {
	if p.Default {
		return nil
	}
	n := p.Name
	return &n
}

func (p EntityPart) String() string {
	switch {
	case !p.Set:
		return ""
	case p.Default:
		return "<default>"
	}
	return p.Name
}

// QuotaEntity is a user and/or client-id entity.
type QuotaEntity struct {
	User, ClientID EntityPart
}

// String is the entity as kafka-configs.sh shows it.
func (e QuotaEntity) String() string {
	var parts []string
	if e.User.Set {
		parts = append(parts, "user="+e.User.String())
	}
	if e.ClientID.Set {
		parts = append(parts, "client-id="+e.ClientID.String())
	}
	return strings.Join(parts, ",")
}

// QuotaEntry is one entity's quotas.
type QuotaEntry struct {
	Entity QuotaEntity
	Values map[string]float64
}

// Quotas is the gateway's store of client quotas and their enforcement.
// It is safe for concurrent use. Changes are written to the state file
// (temporary file, fsync, rename, directory fsync) before they take
// effect, so a restart keeps every quota an Alter acknowledged.
type Quotas struct {
	path string

	mu      sync.Mutex // serializes alters (and their file writes)
	entries atomic.Pointer[map[QuotaEntity]map[string]float64]
	present atomic.Uint32 // bit per quotaType some entity sets (quota_limit.go): others are not resolved

	lim quotaLimiters // quota_limit.go
}

// OpenQuotas loads the store from its state file; a missing file is an
// empty store. An empty path keeps the quotas in memory only (tests).
func OpenQuotas(path string) (*Quotas, error) {
	q := &Quotas{path: path}
	m := map[QuotaEntity]map[string]float64{}
	if path != "" {
		data, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("read quota state: %w", err)
		default:
			if m, err = parseQuotaState(data); err != nil {
				return nil, fmt.Errorf("quota state file %s: %w (fix or remove it)", path, err)
			}
		}
	}
	q.store(m)
	q.lim.init()
	return q, nil
}

// store installs a new set of entries (never changed afterwards).
func (q *Quotas) store(m map[QuotaEntity]map[string]float64) {
	var bits uint32
	for _, vals := range m {
		for t, k := range quotaTypeKeys {
			if _, ok := vals[k]; ok {
				bits |= 1 << t
			}
		}
	}
	q.entries.Store(&m)
	q.present.Store(bits)
}

// Path is the state file ("" in memory).
func (q *Quotas) Path() string { return q.path }

// quotaStateJSON is the state file: {"version":1,"quotas":[{"entity":
// {"user":"alice","client-id":null},"values":{"producer_byte_rate":1024}}]}
// (null is the default entity).
type quotaStateJSON struct {
	Version int              `json:"version"`
	Quotas  []quotaEntryJSON `json:"quotas"`
}

type quotaEntryJSON struct {
	Entity map[string]*string `json:"entity"`
	Values map[string]float64 `json:"values"`
}

func parseQuotaState(data []byte) (map[QuotaEntity]map[string]float64, error) {
	var st quotaStateJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if st.Version != 1 {
		return nil, fmt.Errorf("version %d: want 1", st.Version)
	}
	m := map[QuotaEntity]map[string]float64{}
	for i, e := range st.Quotas {
		var ent QuotaEntity
		for typ, name := range e.Entity {
			var part *EntityPart
			switch typ {
			case QuotaEntityUser:
				part = &ent.User
			case QuotaEntityClientID:
				part = &ent.ClientID
			default:
				return nil, fmt.Errorf("quotas[%d]: entity type %q: want user or client-id", i, typ)
			}
			*part = EntityPart{Set: true, Default: name == nil}
			if name != nil {
				part.Name = *name
			}
		}
		if !ent.User.Set && !ent.ClientID.Set {
			return nil, fmt.Errorf("quotas[%d]: empty entity", i)
		}
		vals := map[string]float64{}
		for k, v := range e.Values {
			if msg := checkQuotaValue(k, v); msg != "" {
				return nil, fmt.Errorf("quotas[%d] %s: %s", i, ent, msg)
			}
			vals[k] = v
		}
		if len(vals) > 0 {
			m[ent] = vals
		}
	}
	return m, nil
}

func encodeQuotaState(m map[QuotaEntity]map[string]float64) ([]byte, error) {
	st := quotaStateJSON{Version: 1, Quotas: []quotaEntryJSON{}}
	for _, e := range sortedEntries(m) {
		ej := quotaEntryJSON{Entity: map[string]*string{}, Values: e.Values}
		if e.Entity.User.Set {
			ej.Entity[QuotaEntityUser] = e.Entity.User.ptr()
		}
		if e.Entity.ClientID.Set {
			ej.Entity[QuotaEntityClientID] = e.Entity.ClientID.ptr()
		}
		st.Quotas = append(st.Quotas, ej)
	}
	out, err := json.MarshalIndent(&st, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode quota state: %w", err)
	}
	return append(out, '\n'), nil
}

func sortedEntries(m map[QuotaEntity]map[string]float64) []QuotaEntry {
	out := make([]QuotaEntry, 0, len(m))
	for e, v := range m {
		out = append(out, QuotaEntry{Entity: e, Values: v})
	}
	slices.SortFunc(out, func(a, b QuotaEntry) int { return strings.Compare(a.Entity.sortKey(), b.Entity.sortKey()) })
	return out
}

func (e QuotaEntity) sortKey() string {
	f := func(p EntityPart) string {
		switch {
		case !p.Set:
			return "0"
		case p.Default:
			return "1"
		}
		return "2" + p.Name
	}
	return f(e.User) + "\x00" + f(e.ClientID)
}

// List returns every entity's quotas, sorted by entity.
func (q *Quotas) List() []QuotaEntry {
	m := *q.entries.Load()
	out := sortedEntries(m)
	for i := range out {
		out[i].Values = cloneValues(out[i].Values)
	}
	return out
}

// Len returns the number of entities with quotas.
func (q *Quotas) Len() int { return len(*q.entries.Load()) }

func cloneValues(v map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(v))
	for k, x := range v {
		out[k] = x
	}
	return out
}

// checkQuotaValue returns why a value cannot be stored for key ("" if it
// can): unknown keys and whole-number keys given a fraction are refused
// as Kafka's ClientQuotaControlManager refuses them; a value that is not
// a positive finite number is refused too (it would throttle forever).
func checkQuotaValue(key string, v float64) string {
	long, ok := quotaKeyLong[key]
	switch {
	case key == "connection_creation_rate":
		return fmt.Sprintf("invalid configuration key %s for user or client-id entities (it applies to ip entities)", key)
	case !ok:
		return fmt.Sprintf("invalid configuration key %s: want one of %s", key, strings.Join(QuotaKeys(), ", "))
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Sprintf("configuration %s must be a finite number", key)
	case v <= 0:
		return fmt.Sprintf("configuration %s must be greater than 0, got %v", key, v)
	case long && (v != math.Trunc(v) || v > math.MaxInt64):
		return fmt.Sprintf("configuration %s must be a Long value, got %v", key, v)
	}
	return ""
}

// parseEntity turns a request's entity into a QuotaEntity, or returns
// Kafka's error for it.
func parseEntity(types []string, names []*string) (QuotaEntity, *kerr.Error, string) {
	var e QuotaEntity
	if len(types) == 0 {
		return e, kerr.InvalidRequest, "invalid empty client quota entity"
	}
	for i, typ := range types {
		var part *EntityPart
		switch typ {
		case QuotaEntityUser:
			part = &e.User
		case QuotaEntityClientID:
			part = &e.ClientID
		case QuotaEntityIP:
			return e, kerr.InvalidRequest, "ip quota entities (connection_creation_rate) are not supported by tollgate; use limits.connection_rate_per_address"
		default:
			return e, kerr.InvalidRequest, fmt.Sprintf("unhandled client quota entity type: %q", typ)
		}
		if part.Set {
			return e, kerr.InvalidRequest, fmt.Sprintf("duplicate %s entity type in the client quota entity", typ)
		}
		*part = EntityPart{Set: true, Default: names[i] == nil}
		if n := names[i]; n != nil {
			if msg := checkEntityName(typ, *n); msg != "" {
				return e, kerr.InvalidRequest, msg
			}
			part.Name = *n
		}
	}
	return e, nil, ""
}

func checkEntityName(typ, n string) string {
	switch {
	case n == "":
		return fmt.Sprintf("empty %s entity name (a null name is the default entity)", typ)
	case len(n) > maxQuotaNameBytes:
		return fmt.Sprintf("%s entity name longer than %d bytes", typ, maxQuotaNameBytes)
	}
	return ""
}

// Describe answers DescribeClientQuotas (KIP-546): the entities matching
// every filter component (EXACT name, DEFAULT, or ANY non-default name of
// the component's type); with strict, entities with other types too are
// left out.
func (q *Quotas) Describe(req *kmsg.DescribeClientQuotasRequest) *kmsg.DescribeClientQuotasResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(e *kerr.Error, msg string) *kmsg.DescribeClientQuotasResponse {
		resp.ErrorCode, resp.ErrorMessage, resp.Entries = e.Code, &msg, nil
		return resp
	}
	seen := map[string]bool{}
	for _, c := range req.Components {
		switch c.EntityType {
		case QuotaEntityUser, QuotaEntityClientID, QuotaEntityIP:
		default:
			return fail(kerr.InvalidRequest, fmt.Sprintf("custom entity type %q not supported", c.EntityType))
		}
		if seen[c.EntityType] {
			return fail(kerr.InvalidRequest, fmt.Sprintf("duplicate %s filter component entity type", c.EntityType))
		}
		seen[c.EntityType] = true
		switch c.MatchType {
		case 0:
			if c.Match == nil {
				return fail(kerr.InvalidRequest, fmt.Sprintf("exact match of %s without a name", c.EntityType))
			}
		case 1, 2:
		default:
			return fail(kerr.InvalidRequest, fmt.Sprintf("unknown match type %d", c.MatchType))
		}
	}
	if seen[QuotaEntityIP] && (seen[QuotaEntityUser] || seen[QuotaEntityClientID]) {
		return fail(kerr.InvalidRequest, "invalid entity filter component combination: ip with user or client-id")
	}
	for _, e := range sortedEntries(*q.entries.Load()) {
		if !matchesFilter(e.Entity, req.Components, req.Strict) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range []struct {
			typ  string
			part EntityPart
		}{{QuotaEntityUser, e.Entity.User}, {QuotaEntityClientID, e.Entity.ClientID}} {
			if p.part.Set {
				ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
				ee.Type, ee.Name = p.typ, p.part.ptr()
				entry.Entity = append(entry.Entity, ee)
			}
		}
		keys := make([]string, 0, len(e.Values))
		for k := range e.Values {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, e.Values[k]
			entry.Values = append(entry.Values, v)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return resp
}

func matchesFilter(e QuotaEntity, comps []kmsg.DescribeClientQuotasRequestComponent, strict bool) bool {
	want := 0
	for _, c := range comps {
		var p EntityPart
		switch c.EntityType {
		case QuotaEntityUser:
			p = e.User
		case QuotaEntityClientID:
			p = e.ClientID
		default:
			return false // ip: the gateway stores none
		}
		if !p.Set {
			return false
		}
		want++
		switch c.MatchType {
		case 0:
			if p.Default || p.Name != *c.Match {
				return false
			}
		case 1:
			if !p.Default {
				return false
			}
		case 2:
			if p.Default {
				return false
			}
		}
	}
	if strict {
		have := 0
		if e.User.Set {
			have++
		}
		if e.ClientID.Set {
			have++
		}
		return have == want
	}
	return true
}

// Alter answers AlterClientQuotas (KIP-546): every entry is validated on
// its own (an invalid entry gets its error, the others still apply);
// unless validate_only, the valid entries are applied together and
// written to the state file before the answer. The error is the state
// file's, when it could not be written (the entries then carry
// UNKNOWN_SERVER_ERROR and nothing changed); it is for the gateway's log,
// not the client.
func (q *Quotas) Alter(req *kmsg.AlterClientQuotasRequest) (*kmsg.AlterClientQuotasResponse, error) {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	q.mu.Lock()
	defer q.mu.Unlock()
	cur := *q.entries.Load()
	next := make(map[QuotaEntity]map[string]float64, len(cur))
	for k, v := range cur {
		next[k] = v
	}
	var applied []int
	for i := range req.Entries {
		in := &req.Entries[i]
		out := kmsg.NewAlterClientQuotasResponseEntry()
		types := make([]string, len(in.Entity))
		names := make([]*string, len(in.Entity))
		for j, e := range in.Entity {
			ee := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = e.Type, e.Name
			out.Entity = append(out.Entity, ee)
			types[j], names[j] = e.Type, e.Name
		}
		setErr := func(e *kerr.Error, msg string) { out.ErrorCode, out.ErrorMessage = e.Code, &msg }
		ent, kerrv, msg := parseEntity(types, names)
		if kerrv != nil {
			setErr(kerrv, msg)
			resp.Entries = append(resp.Entries, out)
			continue
		}
		vals := cloneValues(next[ent])
		seen := map[string]bool{}
		for _, op := range in.Ops {
			if seen[op.Key] {
				msg = fmt.Sprintf("duplicate quota key %s for entity %s", op.Key, ent)
				break
			}
			seen[op.Key] = true
			if op.Remove {
				if _, known := quotaKeyLong[op.Key]; !known {
					msg = checkQuotaValue(op.Key, 1)
					break
				}
				delete(vals, op.Key)
				continue
			}
			if msg = checkQuotaValue(op.Key, op.Value); msg != "" {
				break
			}
			vals[op.Key] = op.Value
		}
		if msg == "" && len(vals) > 0 && next[ent] == nil && len(next) >= MaxQuotaEntities {
			msg = fmt.Sprintf("the gateway holds quotas for at most %d entities", MaxQuotaEntities)
		}
		if msg != "" {
			setErr(kerr.InvalidRequest, msg)
			resp.Entries = append(resp.Entries, out)
			continue
		}
		if !req.ValidateOnly {
			if len(vals) == 0 {
				delete(next, ent)
			} else {
				next[ent] = vals
			}
			applied = append(applied, len(resp.Entries))
		}
		resp.Entries = append(resp.Entries, out)
	}
	if len(applied) == 0 {
		return resp, nil
	}
	if err := q.save(next); err != nil {
		msg := "the gateway could not store the quota (see its log)"
		for _, i := range applied {
			resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = kerr.UnknownServerError.Code, &msg
		}
		return resp, err
	}
	q.store(next)
	return resp, nil
}

// Set replaces an entity's quotas (nil or empty values delete it), for
// code and tests; it writes the state file like Alter.
func (q *Quotas) Set(ent QuotaEntity, values map[string]float64) error {
	if !ent.User.Set && !ent.ClientID.Set {
		return errors.New("empty quota entity")
	}
	for k, v := range values {
		if msg := checkQuotaValue(k, v); msg != "" {
			return errors.New(msg)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	cur := *q.entries.Load()
	next := make(map[QuotaEntity]map[string]float64, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	if len(values) == 0 {
		delete(next, ent)
	} else {
		next[ent] = cloneValues(values)
	}
	if err := q.save(next); err != nil {
		return err
	}
	q.store(next)
	return nil
}

func (q *Quotas) save(m map[QuotaEntity]map[string]float64) error {
	if q.path == "" {
		return nil
	}
	data, err := encodeQuotaState(m)
	if err != nil {
		return err
	}
	return atomicfile.Write(q.path, data, 0o600)
}

// now is time.Now, for the enforcement code's callers that pass none.
func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}
